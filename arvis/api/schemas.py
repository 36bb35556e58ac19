"""Response and request bodies of the HTTP API (not the storage rows)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from arvis.domain import wire
from arvis.lifecycle.results import SyscallResult


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ToolOut(wire.ToolInfo):
    """One definition of the current plan."""


class ToolsOut(_Out):
    plan_id: str
    """The current plan; a new run binds to it."""
    tools: list[ToolOut]


class JournalEntryOut(wire.JournalEntry):
    """One link of a run's hash chain."""


class JournalPage(_Out):
    run_id: str
    entries: list[JournalEntryOut]
    next_after: int | None
    """Pass as ``after`` for the next page; null on the last page."""


class VerifyOut(wire.Verification):
    """The chain recomputed, its checkpoints and its witness checked."""


class ReplayOut(_Out):
    run_id: str
    results: list[SyscallResult]
    """The latest recorded result of each causal id, in the order first settled."""
    next_after: int | None = None
    """Pass as ``after`` for the next page; null on the last page."""


class ApprovalOut(_Out):
    """One approver's decision: who (principal and key, from authentication) and when."""

    principal_id: str
    key_id: str | None
    auth_method: str
    groups: list[str]
    decided_at: datetime
    journal_position: int


class ConfirmationOut(wire.Confirmation):
    """A consent request with its terms and the approvals of its current round."""

    approvers: list[str] = Field(default_factory=list)
    """Approver groups one of which an approving key must hold (empty: any approver)."""
    quorum: int = 1
    """Distinct approvals needed."""
    round: int = 1
    """The round of approval: a resolution as not started of an attempt that used this
    consent up opens the next one, under the same terms."""
    approvals: list[ApprovalOut] = Field(default_factory=list)
    """The approvals of the current round."""


class ConfirmationList(_Out):
    confirmations: list[ConfirmationOut]
    next_after: str | None


class ConsentRoundOut(_Out):
    """The new round of approval a resolution as not started opened for the consent
    its attempt used up: the next attempt runs only once it is APPROVED."""

    confirmation_id: str
    round: int
    state: str
    """PENDING, or APPROVED when the resolver's approval alone met the quorum."""
    approvals: int
    """1 when the resolver could approve the consent and so counts, else 0."""
    quorum: int


class ResolutionOut(wire.Resolution):
    consent: ConsentRoundOut | None = None
    """The consent's new round, when the attempt ran under consent and is resolved as
    not started (else null: the resolution leaves every consent as it is)."""


class RunOut(wire.RunInfo):
    """One run of the tenant."""


class RunsOut(_Out):
    runs: list[RunOut]
    next_cursor: str | None
    """Pass as ``cursor`` for the next (older) page; null on the last page."""


class ApiKeyOut(wire.ApiKeyInfo):
    """One API key of the tenant (no secret)."""


class ApiKeysOut(_Out):
    keys: list[ApiKeyOut]


class ApiKeyCreated(ApiKeyOut):
    """The new key, and its token."""

    token: str
    """The key's secret, shown in this answer only; ARVIS keeps its hash."""
