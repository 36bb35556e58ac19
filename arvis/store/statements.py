"""The statements of the lifecycle's write steps, as :mod:`arvis.store.operations` sends
them: each calls one server-side function of ``arvis/store/sql/`` or is one plain
statement. Kept apart from the adapter that binds their arguments, so the texts can be
read (and timed alone, bench/floor.py) in one place."""

from __future__ import annotations

from arvis.domain.states import WAITING
from arvis.store.reads import CONFIRMATION_COLUMNS, UNCERTAIN_COLUMNS

# The two statements of a governed call (bench/floor.py times them alone too). Each
# carries a batch (issue 25, arvis.store.batching) of one tenant: the tenant, and the
# JSON array of its items; one answer row per item, in order. A lone call is a batch
# of one.
# An admission item names arvis_admit's arguments (arvis.store.operations.admit_item).
ADMIT_SQL = (
    "SELECT out_status, out_receipt_position, out_run_plan, out_budget"
    " FROM arvis_admit_batch(%s, %s::jsonb)"
)
# A journal item is the JSON record arvis.store.journaling.journal_record builds, read
# as the typed arvis_journal_step (revision 0011).
JOURNAL_SQL = (
    "SELECT out_status, out_position, out_prev_hash, out_entry_hash"
    " FROM arvis_journal_batch(%s, %s::jsonb)"
)
CONSENT_SQL = (
    "SELECT out_status, out_confirmation_id, out_run_plan FROM arvis_request_consent("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
RESOLVE_SQL = (
    "SELECT out_status, out_position, out_prev_hash, out_entry_hash FROM arvis_resolve("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
APPROVE_SQL = (
    "SELECT out_status, out_position, out_prev_hash, out_entry_hash FROM arvis_approve("
    "%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
OPEN_UNCERTAIN_SQL = (
    f"SELECT {UNCERTAIN_COLUMNS} WHERE r.boundary IS NULL AND r.next_ask_at <= now()"
    " AND r.asks < %s ORDER BY r.next_ask_at LIMIT %s"
)
RECORD_ASK_SQL = (
    "UPDATE resolutions SET asks = asks + 1,"
    " next_ask_at = now() + make_interval(secs => %s)"
    " WHERE tenant_id = %s AND idempotency_key = %s AND attempt = %s AND boundary IS NULL"
)
# The expiry rule (arvis.domain.states.consent_expired) by the database's clock, on
# the states it names: the partial index ix_confirmations_expires_at has this predicate.
_WAITING = ", ".join(f"'{state.value}'" for state in WAITING)
EXPIRABLE_SQL = (
    f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations"
    f" WHERE state IN ({_WAITING}) AND expires_at <= now()"
    " ORDER BY expires_at LIMIT %s"
)
HISTORY_SQL = (
    "SELECT (SELECT idempotency_key FROM decisions WHERE tenant_id = %(t)s"
    "   AND run_id = %(r)s AND causal_id = %(c)s) AS bound_key,"
    " l.attempt, l.boundary, l.retryable, l.position,"
    " (SELECT attempt FROM attempts WHERE tenant_id = %(t)s"
    "   AND idempotency_key = %(k)s) AS in_flight,"
    " c.confirmation_id, c.tenant_id AS c_tenant_id, c.run_id AS c_run_id,"
    " c.causal_id AS c_causal_id, c.idempotency_key AS c_idempotency_key, c.tool AS c_tool,"
    " c.payload AS c_payload, c.state AS c_state, c.context AS c_context,"
    " c.decided_by AS c_decided_by, c.decision_reason AS c_reason, c.decided_at AS c_decided_at,"
    " c.expires_at AS c_expires_at, c.created_at AS c_created_at,"
    " c.approver_groups AS c_approver_groups, c.quorum AS c_quorum,"
    " c.definition_fingerprint AS c_definition_fingerprint,"
    " c.policy_digest AS c_policy_digest, c.round AS c_round, c.renewed_at AS c_renewed_at,"
    # Revision 0006: the resolution of the latest attempt, and the database's clock.
    " rz.boundary AS resolved, rz.position AS resolution_position, now() AS read_at,"
    # Revision 0010: the run's principal, and the plan the latest attempt was decided
    # under (entries from before revision 0005 may not say: the run's plan then, since
    # a run kept its plan for ever before revision 0010).
    " ru.principal_id AS owner, coalesce(l.plan_id, ru.plan_id) AS plan_id"
    " FROM (SELECT 1) AS one"
    " LEFT JOIN LATERAL (SELECT attempt, boundary, retryable, position,"
    "   body::jsonb ->> 'plan_id' AS plan_id FROM journal_entries"
    "   WHERE idempotency_key = %(k)s AND tenant_id = %(t)s AND attempt IS NOT NULL"
    "   ORDER BY attempt DESC LIMIT 1) AS l ON true"
    " LEFT JOIN runs ru ON ru.tenant_id = %(t)s AND ru.run_id = %(r)s"
    " LEFT JOIN confirmations c ON c.idempotency_key = %(k)s AND c.tenant_id = %(t)s"
    " LEFT JOIN resolutions rz ON rz.tenant_id = %(t)s AND rz.idempotency_key = %(k)s"
    "   AND rz.attempt = l.attempt AND rz.boundary IS NOT NULL"
)
MARK_STARTED_SQL = (
    "UPDATE attempts SET started_at = now() WHERE tenant_id = %s AND idempotency_key = %s"
    " AND attempt = %s AND started_at IS NULL"
)
_ATTEMPT_COLUMNS = (
    "a.tenant_id, a.idempotency_key, a.attempt, a.run_id, a.causal_id, a.tool, a.plan_id,"
    " a.intent_id, a.capability_id, a.commitment, a.receipt_position, a.context, a.owner,"
    " a.confirmation_id, a.admitted_at, a.started_at IS NOT NULL AS started, d.payload_digest,"
    " a.policy"
    " FROM attempts a JOIN decisions d"
    " ON d.tenant_id = a.tenant_id AND d.run_id = a.run_id AND d.causal_id = a.causal_id"
)
IN_FLIGHT_SQL = {
    "owner": f"SELECT {_ATTEMPT_COLUMNS} WHERE a.owner = %s ORDER BY a.admitted_at LIMIT %s",
    # No live lease holds the owner's name: it expired, was released, or never was.
    "abandoned": (
        f"SELECT {_ATTEMPT_COLUMNS} WHERE NOT EXISTS (SELECT 1 FROM instance_leases l"
        " WHERE l.instance_id = a.owner AND NOT l.released AND l.expires_at > now())"
        " ORDER BY a.admitted_at LIMIT %s"
    ),
    "key": f"SELECT {_ATTEMPT_COLUMNS} WHERE a.tenant_id = %s AND a.idempotency_key = %s",
}
# Every time comes from the row proposed (excluded), none from a function: Citus refuses
# a function that is not IMMUTABLE in an upsert's DO UPDATE on a distributed or
# reference table (issue 28), and one clock reading serves every column.
CLAIM_LEASE_SQL = (
    "INSERT INTO instance_leases (instance_id, holder, started_at, last_beat_at, expires_at)"
    " VALUES (%(n)s, %(h)s, now(), now(), now() + make_interval(secs => %(ttl)s))"
    " ON CONFLICT (instance_id) DO UPDATE SET holder = excluded.holder,"
    " started_at = excluded.started_at, last_beat_at = excluded.last_beat_at,"
    " expires_at = excluded.expires_at, released = false"
    " WHERE instance_leases.released OR instance_leases.expires_at <= excluded.started_at"
    " RETURNING instance_id"
)
BEAT_LEASE_SQL = (
    "UPDATE instance_leases SET last_beat_at = now(),"
    " expires_at = now() + make_interval(secs => %(ttl)s)"
    " WHERE instance_id = %(n)s AND holder = %(h)s AND NOT released"
)
RELEASE_LEASE_SQL = (
    "UPDATE instance_leases SET released = true, expires_at = now()"
    " WHERE instance_id = %s AND holder = %s AND NOT released"
)
# The slots of one instance id still held, for the start-up takeover of dead ones.
LIVE_LEASES_SQL = (
    "SELECT instance_id, holder FROM instance_leases"
    " WHERE starts_with(instance_id, %s) AND holder IS NOT NULL AND NOT released"
    " AND expires_at > now() ORDER BY instance_id"
)
