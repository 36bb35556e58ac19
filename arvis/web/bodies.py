"""The operators' request bodies that more than one HTTP adapter reads: an approval
or denial (the v1 routes and the console's forms), a resolution of an uncertain
attempt, and a new API key. One model each, so both ways in refuse the same input the same way."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from arvis.domain.authorization import GROUP_PATTERN
from arvis.domain.identity import Role


def _storable_text(value: str) -> str:
    # As for payload strings (arvis.domain.canonical): PostgreSQL text cannot hold
    # U+0000, and a lone surrogate is not Unicode; refuse both before anything is
    # recorded, as a validation error, not a failed write.
    if "\x00" in value:
        raise ValueError("may not contain U+0000")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("may not contain unpaired surrogates") from None
    return value


Reason = Annotated[str, Field(max_length=500), AfterValidator(_storable_text)]
"""Free text a client sends for the record: at most 500 characters, no U+0000, no
unpaired surrogates."""


class DecisionBody(BaseModel):
    """Optional body of approve and deny."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: Reason | None = None


class ResolveBody(BaseModel):
    """Body of ``POST /v1/runs/{run_id}/attempts/{key}/{attempt}/resolve``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    as_: Literal["completed", "failed", "not_started"] = Field(alias="as")
    """What the attempt did, as the resolver found out."""
    evidence: Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_storable_text)]
    """How the resolver knows (a ticket, a ledger line): journaled as given."""


class KeyBody(BaseModel):
    """Body of ``POST /v1/keys`` (and the console's form): a key of the caller's tenant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    principal: Annotated[
        str,
        Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$"),
        AfterValidator(_storable_text),
    ]
    """Who uses the key (recorded in the journal): 1 to 128 printable characters."""
    roles: Annotated[list[Role], Field(min_length=1, max_length=4)]
    groups: Annotated[list[Annotated[str, Field(pattern=GROUP_PATTERN)]], Field(max_length=16)] = (
        Field(default_factory=list)
    )
    """Approver groups (lowercase names: letters, digits, '.', '_', '-')."""
