-- Append one entry to a run's hash chain (DESIGN §5), under the run's lock: the
-- one writer of the journal, for every kind of entry. Python built the body and
-- decided every state change; this statement applies them together or not at all.
-- Its one argument (revision 0011) is the typed record arvis_journal_step, which
-- says what each field does; in short:
--   settle              the entry settles the in-flight attempt: its row is deleted
--                       first, so two settlers (the owner and a sweeper) can never
--                       both succeed; the entry is the durable record of the consumed
--                       capability from then on. With release_budgets, the budget
--                       charges the row carries are given back (Python decided its
--                       effect provably did not start), once, since the row is
--                       deleted once
--   bind_tool           a refusal of a decision binds the run's causal id to it
--   confirmation_to     the confirmation goes there from one of confirmation_from
--                       (with who decided, why and when); with confirmation_strict,
--                       no such confirmation means 'stale'
--   flag                flag the run audit-incomplete with this reason
-- Answers:
--   'appended'          out_* describe the new entry
--   'existing'          the same result of this attempt is journaled already: out_*
--                       describe that entry (a retried append is idempotent)
--   'conflict'          this attempt is settled, or journaled with another result
--   'stale'             an attempt refusal whose attempt number is not the next one,
--                       or a decision on a confirmation no longer in confirmation_from
--   'causal_conflict'   bind_tool, and the causal id names another decision
--   'identity_mismatch' bind_tool, and the run is bound to another principal than
--                       the refusal's (its body's principal_id, revision 0010): nothing
--                       written
-- Revision 0015 (issue 28): the tenant comes first, as an argument of its own
-- (p_tenant, equal to p.tenant): Citus sends a call to the worker of its tenant's
-- shards only when the distribution argument is a plain value of the shard key's type.
-- The run's lock is the row lock on its row (arvis_bind says why), and the entry's
-- time is cast once, outside the statements (Citus refuses a function that is not
-- IMMUTABLE inside a CASE of a statement on a distributed table).
CREATE OR REPLACE FUNCTION arvis_journal(
    p_tenant text, p arvis_journal_step,
    OUT out_status text, OUT out_position bigint, OUT out_prev_hash text,
    OUT out_entry_hash text
) LANGUAGE plpgsql AS $$
DECLARE
    p_run text := p.run;
    p_key text := p.idempotency_key;
    p_attempt integer := p.attempt;
    p_boundary text := p.boundary;
    p_body text := p.body;
    p_recorded_at text := p.recorded_at;
    v_recorded_at timestamptz := p.recorded_at::timestamptz;
    p_settle boolean := coalesce(p.settle, false);
    v_bound text;
    v_old record;
    v_length bigint;
    v_budgets jsonb;
    v_charge record;
BEGIN
    IF p.tenant IS DISTINCT FROM p_tenant THEN
        RAISE EXCEPTION 'the step names tenant %, the call %', p.tenant, p_tenant
              USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p.bind_tool IS NOT NULL THEN
        SELECT b.out_status INTO v_bound
          FROM arvis_bind(p_tenant, p_run, p.bind_plan, p.causal, p_key, p.bind_tool,
                          p.bind_digest, p.bind_payload, p_body::jsonb ->> 'principal_id') b;
        IF v_bound IN ('causal_conflict', 'identity_mismatch') THEN
            out_status := v_bound;
            RETURN;
        END IF;
    ELSE
        PERFORM 1 FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR NO KEY UPDATE;
    END IF;
    IF p_attempt IS NOT NULL THEN
        SELECT position, prev_hash, entry_hash, boundary, body, recorded_at, intent_id INTO v_old
          FROM journal_entries
         WHERE idempotency_key = p_key AND attempt = p_attempt AND tenant_id = p_tenant;
        IF FOUND THEN
            -- The same append again (a retried statement: same syscall, body and
            -- time) is answered with the entry; anything else under a taken attempt
            -- number is a conflict for a settlement and stale history for a refusal.
            IF v_old.intent_id IS NOT DISTINCT FROM p.intent
               AND v_old.boundary IS NOT DISTINCT FROM p_boundary AND v_old.body = p_body
               AND v_old.recorded_at = v_recorded_at THEN
                out_status := 'existing';
                out_position := v_old.position;
                out_prev_hash := v_old.prev_hash;
                out_entry_hash := v_old.entry_hash;
            ELSE
                out_status := CASE WHEN p_settle THEN 'conflict' ELSE 'stale' END;
            END IF;
            RETURN;
        END IF;
        IF p_settle THEN
            DELETE FROM attempts
             WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt
            RETURNING budgets INTO v_budgets;
            IF NOT FOUND THEN
                out_status := 'conflict';
                RETURN;
            END IF;
            IF coalesce(p.release_budgets, false) AND v_budgets IS NOT NULL THEN
                -- In the order admission took these rows' locks.
                FOR v_charge IN
                    SELECT c.budget, c.scope, c.window_start, c.amount
                      FROM jsonb_to_recordset(v_budgets) AS c(budget text, scope text,
                           window_start timestamptz, amount numeric)
                     ORDER BY c.budget, c.scope
                LOOP
                    UPDATE budget_usage SET used = used - v_charge.amount, updated_at = now()
                     WHERE tenant_id = p_tenant AND budget = v_charge.budget
                       AND scope_key = v_charge.scope AND window_start = v_charge.window_start;
                END LOOP;
            END IF;
        ELSIF NOT arvis_next_attempt(p_tenant, p_key, p_attempt) THEN
            out_status := 'stale';
            RETURN;
        END IF;
    END IF;
    IF p.confirmation_to IS NOT NULL THEN
        UPDATE confirmations
           SET state = p.confirmation_to, updated_at = now(),
               decided_by = coalesce(p.decided_by, decided_by),
               decision_reason = coalesce(p.reason, decision_reason),
               decided_at = CASE WHEN p.decided_by IS NULL THEN decided_at
                                 ELSE v_recorded_at END
         WHERE tenant_id = p_tenant AND confirmation_id = p.confirmation
           AND state = ANY (p.confirmation_from);
        IF NOT FOUND AND coalesce(p.confirmation_strict, false) THEN
            out_status := 'stale';
            RETURN;
        END IF;
    END IF;
    SELECT journal_length, journal_head INTO v_length, out_prev_hash
      FROM runs WHERE tenant_id = p_tenant AND run_id = p_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run USING ERRCODE = 'AR002';
    END IF;
    out_position := v_length + 1;
    out_entry_hash := arvis_entry_hash(out_prev_hash, p_tenant, p_run, out_position, p.kind,
        p.causal, p_key, p_attempt, p.intent, p_boundary, p_recorded_at, p_body);
    -- The head first: the entry's foreign key then finds the run's row already
    -- written by this transaction and needs no lock of its own (no WAL record).
    UPDATE runs SET journal_length = out_position, journal_head = out_entry_hash,
           audit_incomplete = audit_incomplete OR p.flag IS NOT NULL,
           audit_incomplete_reason = CASE WHEN p.flag IS NULL THEN audit_incomplete_reason
               ELSE coalesce(audit_incomplete_reason || '; ', '') || p.flag END
     WHERE tenant_id = p_tenant AND run_id = p_run;
    INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,
        idempotency_key, attempt, intent_id, boundary, retryable, body, prev_hash,
        entry_hash, recorded_at)
    VALUES (p_tenant, p_run, out_position, p.kind, p.causal, p_key, p_attempt, p.intent,
        p_boundary, coalesce(p.retryable, false), p_body, out_prev_hash, out_entry_hash,
        v_recorded_at);
    out_status := 'appended';
END
$$;
