"""The runs list and key management over HTTP: ``GET /v1/runs``, ``GET/POST /v1/keys``,
``POST /v1/keys/{id}/revoke`` (issue 27).

Kept apart from :mod:`arvis.client._calls` because these routes are the console's
newest ground: the models here require only the fields a caller cannot do without
(``run_id``; ``key_id``, ``principal``, ``roles``) and keep every other field the
server sends (``extra="allow"``), so the listing can grow without breaking the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from arvis.client._calls import Call, _segment

__all__ = ["ApiKey", "CreatedKey", "KeyList", "RunSummary", "RunsPage"]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class RunSummary(_Wire):
    """One row of ``GET /v1/runs``: a run, its status and who runs it (and more fields)."""

    run_id: str
    status: str | None = None
    """``running``, ``waiting for consent``, ``uncertain``, ``refused``, ``audit-incomplete``…"""
    principal: str | None = None


class RunsPage(_Wire):
    """One page of runs; pass ``next_cursor`` as ``cursor`` for the next."""

    runs: list[RunSummary]
    next_cursor: str | None = None


class ApiKey(_Wire):
    """An API key as an admin sees it: never its secret."""

    key_id: str
    principal: str
    roles: list[str]
    groups: list[str] = Field(default_factory=list)
    tenant_id: str | None = None
    created_at: datetime | None = None
    revoked_at: datetime | None = None


class CreatedKey(ApiKey):
    """``POST /v1/keys``: the new key and its token, shown only in this answer."""

    token: str


class KeyList(_Wire):
    """``GET /v1/keys``: the tenant's keys."""

    keys: list[ApiKey]


def runs(
    cursor: str | None, limit: int, status: str | None, principal: str | None, tool: str | None
) -> Call[RunsPage]:
    filters = {"cursor": cursor, "status": status, "principal": principal, "tool": tool}
    params: dict[str, str | int] = {k: v for k, v in filters.items() if v is not None}
    params["limit"] = limit
    return Call("GET", "/v1/runs", RunsPage.model_validate, params=params)


def keys() -> Call[KeyList]:
    return Call("GET", "/v1/keys", KeyList.model_validate)


def create_key(principal: str, roles: Sequence[str], groups: Sequence[str]) -> Call[CreatedKey]:
    """Not idempotent: a repeat after a lost answer mints a second key."""
    body = {"principal": principal, "roles": list(roles), "groups": list(groups)}
    return Call("POST", "/v1/keys", CreatedKey.model_validate, body=body, idempotent=False)


def revoke_key(key_id: str) -> Call[None]:
    # Revoking a revoked key changes nothing: repeating it is harmless. The answer's
    # body is not read: a 2xx is the whole news.
    return Call("POST", f"/v1/keys/{_segment(key_id)}/revoke", lambda _: None)
