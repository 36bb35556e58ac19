"""The runs list and key management over HTTP: ``GET /v1/runs``, ``GET/POST /v1/keys``,
``POST /v1/keys/{id}/revoke`` (issue 27).

Kept apart from :mod:`arvis.client._calls` because these routes are the console's
newest ground: the models here require only the fields a caller cannot do without
(``run_id``; ``key_id``, ``principal``, ``roles``) and keep every other field the
server sends (``extra="allow"``), so the listing can grow without breaking the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TypedDict, cast

from pydantic import BaseModel, ConfigDict, Field

from arvis.client._calls import Call, _segment

__all__ = ["ApiKey", "CreatedKey", "KeyList", "RunFilters", "RunSummary", "RunsPage"]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class RunSummary(_Wire):
    """One row of ``GET /v1/runs``: a run, its status and who runs it (and more fields)."""

    run_id: str
    status: str | None = None
    """What needs a person first, the first that holds (docs/http.md, "The list of runs"):
    ``audit_incomplete`` (an effect's result could not be journaled), ``uncertain`` (an
    uncertain attempt nobody has resolved), ``waiting_for_consent`` (a confirmation still
    PENDING), ``refused`` (the run's latest entry is a refusal), else ``running`` (none of
    these, which includes a run whose calls all ended: ARVIS is not told when an agent's
    run is over). A newer server may name more; a string, not an enum, for that reason."""
    principal: str | None = None
    """The principal the run is bound to: the person, when an agent acted for one."""
    actors: list[str] = Field(default_factory=list)
    """The agents that acted for the principal in the run's calls, sorted (issue 26);
    empty: the principal made every call itself (or the server predates the field)."""
    tools: list[str] = Field(default_factory=list)
    """The tools the run asked for."""
    started_at: datetime | None = None
    last_activity: datetime | None = None
    entries: int | None = None
    """Journal entries so far."""


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


RunFilter = str | datetime | None
"""A filter of ``GET /v1/runs``: text, or a time (sent as ISO 8601; a time without its
offset is UTC to the server)."""


class RunFilters(TypedDict, total=False):
    """The filters of ``GET /v1/runs``, named as its query parameters, declared once for
    both clients' ``runs(**filters)``. They all hold at once; None leaves one out."""

    status: str | None
    """Exactly this status (see :attr:`RunSummary.status`)."""
    principal: str | None
    """Bound to exactly this principal."""
    actor: str | None
    """An agent that acted for the principal in one of the run's calls, exactly."""
    tool: str | None
    """Asked for this tool."""
    q: str | None
    """A part of the run id."""
    started_after: RunFilter
    """Started at or after."""
    started_before: RunFilter
    """Started before."""
    active_after: RunFilter
    """Last activity at or after."""
    active_before: RunFilter
    """Last activity before."""


def runs(cursor: str | None, limit: int, filters: RunFilters) -> Call[RunsPage]:
    """One page of runs; a filter this list does not know is a ``TypeError``, as an
    unknown keyword is, not a wider list than asked for."""
    unknown = filters.keys() - RunFilters.__optional_keys__
    if unknown:
        raise TypeError(f"runs() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    # Every field of RunFilters is a RunFilter; mypy types a TypedDict's values as object.
    given = {"cursor": cursor, **cast(Mapping[str, RunFilter], filters)}
    params: dict[str, str | int] = {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in given.items()
        if value is not None
    }
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
