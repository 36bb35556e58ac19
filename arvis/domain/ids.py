"""Identifier types (plain strings at run time, distinct to the type checker) and the
rules every entry point checks ids by."""

import hashlib
import re
from typing import NewType

TenantId = NewType("TenantId", str)
PrincipalId = NewType("PrincipalId", str)
RunId = NewType("RunId", str)
CausalId = NewType("CausalId", str)
PlanId = NewType("PlanId", str)
CallId = NewType("CallId", str)
CapabilityId = NewType("CapabilityId", str)
IntentId = NewType("IntentId", str)
ConfirmationId = NewType("ConfirmationId", str)
InstanceId = NewType("InstanceId", str)
IdempotencyKey = NewType("IdempotencyKey", str)

# Run, causal and confirmation ids: 1 to 128 of [A-Za-z0-9._:-], but not "." or "..".
# Those two are dot segments: a client normalises them out of a URL path, so a run
# named ".." would be reachable only percent-encoded. The three alternatives say
# "starts with a non-dot", "one dot, then a non-dot", "two dots, then anything",
# because pydantic's regex engine has no lookahead.
ID_PATTERN = (
    r"^(?:[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}"
    r"|\.[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,126}"
    r"|\.\.[A-Za-z0-9._:-]{1,126})$"
)

RESERVED_RUN_PREFIX = "mcp:"
"""The namespace of the run ids ARVIS derives for a principal (an MCP client's default
run, docs/mcp.md). A syscall naming one is refused (``identity_mismatch``) unless it is
the caller's own: nobody can open, and so bind, another principal's derived run."""
_VERBATIM_PRINCIPAL = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


def principal_run_id(principal_id: str) -> str:
    """The run ARVIS derives for ``principal_id``: ``mcp:<principal id>``, or, for a
    principal id that is not a safe run id tail, ``mcp::<first 40 hex of its SHA-256>``
    (the second colon keeps the two forms apart). One run per principal of a tenant,
    whatever its key or the tool plan."""
    if _VERBATIM_PRINCIPAL.fullmatch(principal_id):
        return RESERVED_RUN_PREFIX + principal_id
    digest = hashlib.sha256(principal_id.encode()).hexdigest()[:40]
    return f"{RESERVED_RUN_PREFIX}:{digest}"


def reserved_for_another(run_id: str, principal_id: str) -> bool:
    """True when ``run_id`` is a derived run id, and not the one of ``principal_id``."""
    return run_id.startswith(RESERVED_RUN_PREFIX) and run_id != principal_run_id(principal_id)
