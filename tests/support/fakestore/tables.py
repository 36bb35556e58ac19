"""The fake store's rows: one frozen record per row of the PostgreSQL table it stands for.

A write step works on a copy of :class:`Tables` and commits by swapping it in, so a
step is all or nothing (an exception leaves the committed tables as they were) and a
read holds the committed tables it started on: the snapshot a REPEATABLE READ
transaction sees. Records are never changed in place, only replaced.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from arvis.lifecycle.ports import JournalEntry

GENESIS = "0" * 64


@dataclass(frozen=True, slots=True)
class RunRow:
    plan_id: str
    principal_id: str | None
    created_at: datetime
    journal_length: int = 0
    journal_head: str = GENESIS
    receipts: int = 0
    audit_incomplete: bool = False
    audit_incomplete_reason: str | None = None
    evidence_broken_at: int | None = None
    evidence_fault: str | None = None


@dataclass(frozen=True, slots=True)
class DecisionRow:
    idempotency_key: str
    tool: str
    payload_digest: str
    payload: Any


@dataclass(frozen=True, slots=True)
class AttemptRow:
    tenant_id: str
    idempotency_key: str
    attempt: int
    run_id: str
    causal_id: str
    tool: str
    plan_id: str
    intent_id: str
    capability_id: str
    commitment: str
    receipt_position: int
    context: dict[str, Any]
    owner: str
    confirmation_id: str | None
    admitted_at: datetime
    policy: dict[str, Any] | None
    budgets: tuple[dict[str, Any], ...] | None
    started_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ConfirmationRow:
    tenant_id: str
    confirmation_id: str
    run_id: str
    causal_id: str
    idempotency_key: str
    tool: str
    payload_digest: str
    payload: Any
    state: str
    context: dict[str, Any]
    expires_at: datetime
    created_at: datetime
    approver_groups: tuple[str, ...]
    quorum: int
    definition_fingerprint: str | None
    policy_digest: str | None
    decided_by: str | None = None
    decision_reason: str | None = None
    decided_at: datetime | None = None
    round: int = 1
    renewed_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    principal_id: str
    auth_method: str
    key_id: str | None
    groups: tuple[str, ...]
    decided_at: datetime
    position: int


@dataclass(frozen=True, slots=True)
class ResolutionRow:
    run_id: str
    causal_id: str
    uncertain_position: int
    boundary: str | None = None
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    position: int | None = None
    asks: int = 0
    next_ask_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LeaseRow:
    holder: str
    expires_at: datetime
    released: bool = False


@dataclass(frozen=True, slots=True)
class StoredEntry:
    entry: JournalEntry
    retryable: bool


RunKey = tuple[str, str]


@dataclass
class Tables:
    """Every table the lifecycle's steps write, keyed as their primary keys are."""

    runs: dict[RunKey, RunRow] = field(default_factory=dict)
    decisions: dict[tuple[str, str, str], DecisionRow] = field(default_factory=dict)
    """(tenant, run, causal id)"""
    attempts: dict[tuple[str, str], AttemptRow] = field(default_factory=dict)
    """(tenant, idempotency key): one in-flight attempt per decision"""
    confirmations: dict[tuple[str, str], ConfirmationRow] = field(default_factory=dict)
    consent_of: dict[tuple[str, str], str] = field(default_factory=dict)
    """(tenant, idempotency key) -> confirmation id: the unique constraint"""
    approvals: dict[tuple[str, str, int, str], ApprovalRow] = field(default_factory=dict)
    """(tenant, confirmation, round, principal)"""
    entries: dict[tuple[str, str, int], StoredEntry] = field(default_factory=dict)
    """(tenant, run, position)"""
    by_attempt: dict[tuple[str, str, int], tuple[str, str, int]] = field(default_factory=dict)
    """(tenant, key, attempt) -> the entry's key: the unique index on attempts"""
    last_attempt: dict[tuple[str, str], int] = field(default_factory=dict)
    """(tenant, key) -> the highest attempt journaled"""
    resolutions: dict[tuple[str, str, int], ResolutionRow] = field(default_factory=dict)
    budget_usage: dict[tuple[str, str, str, datetime], Decimal] = field(default_factory=dict)
    leases: dict[str, LeaseRow] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    events: tuple[tuple[str, str], ...] = ()
    """(event type, subject id) of what the notification outbox would hold."""

    def copy(self) -> Tables:
        fresh = dataclasses.replace(self)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, dict):
                setattr(fresh, f.name, dict(value))
        return fresh

    def entry(self, tenant: str, run: str, position: int) -> JournalEntry | None:
        stored = self.entries.get((tenant, run, position))
        return None if stored is None else stored.entry

    def attempt_entry(self, tenant: str, key: str, attempt: int) -> StoredEntry | None:
        where = self.by_attempt.get((tenant, key, attempt))
        return None if where is None else self.entries[where]
