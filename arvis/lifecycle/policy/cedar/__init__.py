"""The Cedar policy engine (``[policy] engine = "cedar"``, docs/policy.md)."""

from arvis.lifecycle.policy.cedar.engine import CedarPolicy
from arvis.lifecycle.policy.cedar.schema import payload_type, render_schema

__all__ = ["CedarPolicy", "payload_type", "render_schema"]
