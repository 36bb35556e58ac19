"""Consent (DESIGN §2, §6): asking for and recording approvals, operators' resolutions
of uncertain outcomes, and the notifications that tell approvers."""
