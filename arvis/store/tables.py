"""The lifecycle schema (DESIGN §1, §5) as SQLAlchemy Core tables.

Invariants live in the schema wherever PostgreSQL can carry them: every
tenant-owned row has ``tenant_id`` in its key, states are CHECKed, one
idempotency key has at most one unsettled attempt, and a run's journal
positions are unique. The alembic revisions are the source of truth for the
database; this module must match them (a test runs autogenerate and expects
no differences).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ForeignKeyConstraint,
    Index,
    Integer,
    Numeric,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from arvis.domain.boundary import EffectBoundary
from arvis.domain.identity import ROLES as ROLES_OF_KEYS
from arvis.domain.journal import JournalKind
from arvis.domain.states import CapabilityState, ConfirmationState
from arvis.store.columns import at_ as _at
from arvis.store.columns import defaulted as _defaulted
from arvis.store.columns import entry_actor as _entry_actor
from arvis.store.columns import in_ as _in
from arvis.store.columns import metadata as metadata
from arvis.store.columns import names_an_actor as _names_an_actor
from arvis.store.columns import of_run as _of_run
from arvis.store.columns import tenant_check as _tenant_check
from arvis.store.columns import texts as _texts
from arvis.store.notify_tables import notify_outbox as notify_outbox
from arvis.store.notify_tables import slack_messages as slack_messages

# The CHECKed value sets come from the domain's one definition of each.
BOUNDARIES = tuple(boundary.value for boundary in EffectBoundary)
CAPABILITY_STATES = tuple(state.value for state in CapabilityState)
CONFIRMATION_STATES = tuple(state.value for state in ConfirmationState)
JOURNAL_KINDS = tuple(kind.value for kind in JournalKind)
ROLES: tuple[str, ...] = ROLES_OF_KEYS


# Plans are deployment configuration, shared by every tenant: the plan id is a
# digest of the definitions, so one row serves every run bound to it.
tool_plans = Table(
    "tool_plans",
    metadata,
    *_texts("plan_id"),
    Column("definitions", JSONB, nullable=False),
    _at("created_at", now=True),
    PrimaryKeyConstraint("plan_id"),
    CheckConstraint("length(plan_id) = 64", name="plan_id_digest"),
)

runs = Table(
    "runs",
    metadata,
    *_texts("tenant_id", "run_id", "plan_id"),
    _defaulted("journal_length", BigInteger, "0"),
    *_texts("journal_head"),
    # Receipt positions count per run (revision 0005): the next is receipts + 1.
    _defaulted("receipts", BigInteger, "0"),
    _defaulted("audit_incomplete", Boolean, "false"),
    Column("audit_incomplete_reason", Text),
    _at("created_at", now=True),
    # The principal the run is bound to (revision 0010): its first syscall's. NULL only
    # for a run from before it that recorded no principal anywhere; its next syscall
    # binds it. The key of a later binding (an actor beside the principal) goes here too.
    Column("principal_id", Text),
    # The first position where the run's evidence was found broken, and what was found
    # (revision 0010): served answers of the run are refused from then on.
    Column("evidence_broken_at", BigInteger),
    Column("evidence_fault", Text),
    PrimaryKeyConstraint("tenant_id", "run_id"),
    ForeignKeyConstraint(["plan_id"], ["tool_plans.plan_id"]),
    _tenant_check(),
    CheckConstraint("journal_length >= 0", name="journal_length_natural"),
    # The console lists a tenant's runs newest first (revision 0009).
    Index("ix_runs_tenant_id_created_at", "tenant_id", "created_at"),
)

# One row per decision: the run's causal id names it for ever (DESIGN §4), and it
# keeps the frozen payload once. Written at its first contact, never updated.
decisions = Table(
    "decisions",
    metadata,
    *_texts("tenant_id", "run_id", "causal_id", "idempotency_key", "tool", "payload_digest"),
    # NULL only for decisions refused before revision 0005 (their payload was not kept).
    Column("payload", JSONB),
    _at("created_at", now=True),
    PrimaryKeyConstraint("tenant_id", "run_id", "causal_id"),
    _of_run(),
    _tenant_check(),
)

# One row per attempt in flight: its capability (minted, activated by its receipt
# and consumed in the admission transaction: one row version) and its intent. The
# primary key allows one unsettled attempt per key; the journal entry that settles
# the attempt deletes the row in its own transaction and is its record from then on.
attempts = Table(
    "attempts",
    metadata,
    *_texts("tenant_id", "idempotency_key"),
    Column("attempt", Integer, nullable=False),
    *_texts("run_id", "causal_id", "tool", "plan_id", "intent_id", "capability_id", "commitment"),
    Column("receipt_position", BigInteger, nullable=False),
    Column("context", JSONB, nullable=False),
    # The lease name of the process that admitted it (DESIGN §6).
    *_texts("owner"),
    Column("confirmation_id", Text),
    _at("admitted_at", now=True),
    # The tool reported that its effect started (DESIGN §1, EFFECT_STARTED).
    _at("started_at", required=False),
    # Which policy authorized it, and what it was charged to each budget (revision
    # 0007): the settling entry records the one and gives back the other.
    Column("policy", JSONB),
    Column("budgets", JSONB),
    PrimaryKeyConstraint("tenant_id", "idempotency_key"),
    ForeignKeyConstraint(
        ["tenant_id", "run_id", "causal_id"],
        ["decisions.tenant_id", "decisions.run_id", "decisions.causal_id"],
    ),
    _tenant_check(),
    CheckConstraint("attempt >= 1", name="attempt_positive"),
)

confirmations = Table(
    "confirmations",
    metadata,
    *_texts(
        "tenant_id",
        "confirmation_id",
        "run_id",
        "causal_id",
        "idempotency_key",
        "tool",
        "payload_digest",
    ),
    Column("payload", JSONB, nullable=False),
    *_texts("state"),
    Column("context", JSONB, nullable=False),
    Column("decided_by", Text),
    Column("decision_reason", Text),
    _at("expires_at"),
    _at("created_at", now=True),
    _at("updated_at", now=True),
    _at("decided_at", required=False),
    # The terms frozen when consent was asked (revision 0006): who may approve, how
    # many must, and what the approval is for (re-checked at the moment of use).
    _defaulted("approver_groups", ARRAY(Text), "'{}'"),
    _defaulted("quorum", Integer, "1"),
    Column("definition_fingerprint", Text),
    Column("policy_digest", Text),
    # Which policy asked for the consent and why (revision 0018): engine, version, digest,
    # policy_ids, reason. NULL: asked before it.
    Column("policy", JSONB),
    # The round of approval (revision 0010): a resolution as not started of an attempt
    # that used the consent up opens the next, under the same terms, at renewed_at.
    _defaulted("round", Integer, "1"),
    _at("renewed_at", required=False),
    PrimaryKeyConstraint("tenant_id", "confirmation_id"),
    UniqueConstraint("idempotency_key", "tenant_id"),
    _of_run(),
    _tenant_check(),
    CheckConstraint(_in("state", CONFIRMATION_STATES), name="state_known"),
    CheckConstraint("quorum >= 1", name="quorum_positive"),
    CheckConstraint("round >= 1", name="round_positive"),
    Index(
        "ix_confirmations_tenant_id_state_confirmation_id", "tenant_id", "state", "confirmation_id"
    ),
    # The expiry sweep reads the waiting confirmations whose time has come.
    Index(
        "ix_confirmations_expires_at",
        "expires_at",
        postgresql_where=text("state IN ('PENDING', 'APPROVED')"),
    ),
)

# One row per distinct approver of a confirmation in each round of approval
# (revisions 0006, 0010): the key is the rule "distinct approvals" of a quorum,
# enforced by the database.
confirmation_approvals = Table(
    "confirmation_approvals",
    metadata,
    *_texts("tenant_id", "confirmation_id"),
    _defaulted("round", Integer, "1"),
    *_texts("principal_id", "auth_method"),
    Column("key_id", Text),
    _defaulted("groups", ARRAY(Text), "'{}'"),
    _at("decided_at"),
    Column("position", BigInteger, nullable=False),
    PrimaryKeyConstraint("tenant_id", "confirmation_id", "round", "principal_id"),
    ForeignKeyConstraint(
        ["tenant_id", "confirmation_id"],
        ["confirmations.tenant_id", "confirmations.confirmation_id"],
    ),
    _tenant_check(),
)

journal_entries = Table(
    "journal_entries",
    metadata,
    *_texts("tenant_id", "run_id"),
    Column("position", BigInteger, nullable=False),
    *_texts("kind", "causal_id", "idempotency_key"),
    Column("attempt", Integer),
    Column("intent_id", Text),
    Column("boundary", Text),
    # The attempt's retry advice, for the retry table (revision 0005).
    _defaulted("retryable", Boolean, "false"),
    # The canonical (RFC 8785) body text, byte for byte what the chain hashes.
    *_texts("body", "prev_hash", "entry_hash"),
    _at("recorded_at"),
    PrimaryKeyConstraint("tenant_id", "run_id", "position"),
    _of_run(),
    _tenant_check(),
    CheckConstraint("position >= 1", name="position_positive"),
    CheckConstraint(_in("kind", JOURNAL_KINDS), name="kind_known"),
    CheckConstraint(f"boundary IS NULL OR {_in('boundary', BOUNDARIES)}", name="boundary_known"),
    # The agents that acted for a run's principal, by run (revision 0019): the runs list
    # reads each run's distinct actors from here, one probe per actor (arvis.store.reads).
    Index(
        "ix_journal_entries_actor",
        "tenant_id",
        "run_id",
        text(_entry_actor()),
        postgresql_where=text(_names_an_actor()),
    ),
    # One result per attempt: appends are INSERT … ON CONFLICT on this key.
    Index(
        "uq_journal_entries_one_result_per_attempt",
        "idempotency_key",
        "attempt",
        "tenant_id",
        unique=True,
        postgresql_where=text("attempt IS NOT NULL"),
    ),
)

# One row per uncertain attempt (revision 0006), written with the uncertain entry by
# a trigger on journal_entries: what is still open for a person or a reconcile hook
# to resolve (boundary NULL), and, once resolved, the resolution (one per attempt).
resolutions = Table(
    "resolutions",
    metadata,
    *_texts("tenant_id", "idempotency_key"),
    Column("attempt", Integer, nullable=False),
    *_texts("run_id", "causal_id"),
    Column("uncertain_position", BigInteger, nullable=False),
    Column("boundary", Text),
    Column("position", BigInteger),
    Column("resolved_by", Text),
    _at("resolved_at", required=False),
    # Reconcile hooks asked so far, and when to ask next (with backoff).
    _defaulted("asks", Integer, "0"),
    _at("next_ask_at", now=True),
    PrimaryKeyConstraint("tenant_id", "idempotency_key", "attempt"),
    _of_run(),
    _tenant_check(),
    CheckConstraint(
        "boundary IS NULL OR boundary IN ('EFFECT_COMPLETED', 'EFFECT_FAILED',"
        " 'EFFECT_NOT_STARTED')",
        name="boundary_resolved",
    ),
    Index("ix_resolutions_next_ask_at", "next_ask_at", postgresql_where=text("boundary IS NULL")),
)

instance_leases = Table(
    "instance_leases",
    metadata,
    *_texts("instance_id"),
    _at("started_at", now=True),
    _at("last_beat_at", now=True),
    _at("expires_at"),
    _defaulted("released", Boolean, "false"),
    # The random token of the process that holds this name (see revision 0004).
    Column("holder", Text),
    PrimaryKeyConstraint("instance_id"),
    CheckConstraint("instance_id <> ''", name="instance_present"),
)

api_keys = Table(
    "api_keys",
    metadata,
    *_texts("tenant_id", "key_id", "principal"),
    Column("roles", ARRAY(Text), nullable=False),
    *_texts("secret_hash"),
    _at("created_at", now=True),
    _at("revoked_at", required=False),
    # Approver groups (revision 0006): who may approve which tool (issue 16).
    _defaulted("groups", ARRAY(Text), "'{}'"),
    # When the key was last used, to the minute (revision 0016): written off the
    # request's path, at most once a minute per key (arvis.store.keys).
    _at("last_used_at", required=False),
    PrimaryKeyConstraint("tenant_id", "key_id"),
    UniqueConstraint("key_id"),
    _tenant_check(),
    CheckConstraint("principal <> ''", name="principal_present"),
    CheckConstraint(
        "cardinality(roles) >= 1 AND roles <@ ARRAY['agent','approver','auditor','admin']::text[]",
        name="roles_known",
    ),
)

# Durable budgets (revision 0007): one row per (tenant, budget, scope, window), its use
# raised by the admitting statement only while it stays within the limit (a
# conditional upsert) and lowered by the entry that settles an attempt that did not start.
budget_usage = Table(
    "budget_usage",
    metadata,
    *_texts("tenant_id", "budget"),
    # The scope within the tenant as canonical JSON: {} or {"principal": …, "tool": …}.
    *_texts("scope_key"),
    _at("window_start"),
    _defaulted("used", Numeric, "0"),
    _at("updated_at", now=True),
    PrimaryKeyConstraint("tenant_id", "budget", "scope_key", "window_start"),
    _tenant_check(),
    CheckConstraint("used >= 0", name="used_natural"),
)


# Signed checkpoints of a run's chain head (revision 0009): what was signed and the
# signature, with the id of the key (never the key itself, which the database must
# not hold). One per (run, length).
run_checkpoints = Table(
    "run_checkpoints",
    metadata,
    *_texts("tenant_id", "run_id"),
    Column("length", BigInteger, nullable=False),
    *_texts("head_hash"),
    _at("signed_at"),
    *_texts("key_id", "signature"),
    PrimaryKeyConstraint("tenant_id", "run_id", "length"),
    _of_run(),
    _tenant_check(),
    CheckConstraint("length >= 1", name="length_positive"),
)


# Operator console sessions (revision 0009): the cookie's token is stored only as its
# SHA-256; a session lives no longer than its key (revoked: the lookup refuses it).
console_sessions = Table(
    "console_sessions",
    metadata,
    *_texts("tenant_id", "token_hash"),
    # Revision 0017: a session is of a key (looked up live) or of a verified ID token.
    Column("key_id", Text),
    Column("identity", JSONB),
    _at("created_at", now=True),
    _at("expires_at"),
    PrimaryKeyConstraint("tenant_id", "token_hash"),
    CheckConstraint("(key_id IS NULL) <> (identity IS NULL)", name="key_or_identity"),
    # The cookie names no tenant: found by its digest alone (a plain index, no key
    # across tenants; a random 256-bit token's digest does not collide).
    Index("ix_console_sessions_token_hash", "token_hash"),
    # No foreign key to api_keys (a reference table, not distributed by tenant): every
    # lookup joins the live key instead.
    _tenant_check(),
    CheckConstraint("length(token_hash) = 64", name="token_hash_digest"),
    Index("ix_console_sessions_expires_at", "expires_at"),
)
