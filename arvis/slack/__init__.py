"""Approvals where people are: consent requests posted to Slack with Approve/Deny
buttons, and Slack's signed interactions deciding them through the one consent service
(``pip install 'arvis[slack]'``; docs/integrations.md)."""
