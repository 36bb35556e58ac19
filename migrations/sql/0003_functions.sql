-- Revision 0003: the journal step as one flat function. Appending an attempt's
-- result and settling it was arvis_journal_execution calling arvis_journal_append
-- and arvis_settle_attempt; each nested call, and RETURN QUERY's result buffer,
-- cost PostgreSQL more than the writes themselves (docs/benchmarks.md). One
-- function now appends and, when asked, settles; the general path calls it to
-- append, the hot path to append and settle.

-- Append one entry to a run's chain under the run's row lock. Appending the same
-- result for the same attempt again answers the stored entry; a different one
-- raises AR001 (journal conflict), never overwrites. With p_settle, the attempt
-- is then settled in the same transaction: the intent, the action's
-- latest-attempt summary, and the consent (released to APPROVED only when
-- nothing started, else CONSUMED) — DESIGN §2 step 3.
CREATE FUNCTION arvis_journal_append(
    p_tenant text, p_run text, p_kind text, p_causal text, p_key text,
    p_attempt integer, p_intent text, p_boundary text, p_body text, p_recorded_at text,
    p_settle boolean DEFAULT false, p_retryable boolean DEFAULT NULL,
    p_confirmation text DEFAULT NULL,
    OUT out_position bigint, OUT out_prev_hash text, OUT out_entry_hash text
) LANGUAGE plpgsql AS $$
DECLARE
    v_length bigint;
    v_old record;
BEGIN
    SELECT journal_length, journal_head INTO v_length, out_prev_hash
      FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run USING ERRCODE = 'AR002';
    END IF;
    out_position := v_length + 1;
    out_entry_hash := arvis_entry_hash(out_prev_hash, p_tenant, p_run, out_position, p_kind,
        p_causal, p_key, p_attempt, p_intent, p_boundary, p_recorded_at, p_body);
    INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,
        idempotency_key, attempt, intent_id, boundary, body, prev_hash, entry_hash,
        recorded_at)
    VALUES (p_tenant, p_run, out_position, p_kind, p_causal, p_key, p_attempt, p_intent,
        p_boundary, p_body, out_prev_hash, out_entry_hash, p_recorded_at::timestamptz)
    ON CONFLICT (tenant_id, idempotency_key, attempt) WHERE attempt IS NOT NULL DO NOTHING;
    IF FOUND THEN
        UPDATE runs SET journal_length = out_position, journal_head = out_entry_hash
         WHERE tenant_id = p_tenant AND run_id = p_run;
    ELSE
        SELECT position, prev_hash, entry_hash, boundary, body INTO v_old
          FROM journal_entries
         WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt;
        IF v_old.boundary IS DISTINCT FROM p_boundary OR v_old.body <> p_body THEN
            RAISE EXCEPTION 'attempt % of % already has a different result', p_attempt, p_key
                USING ERRCODE = 'AR001';
        END IF;
        out_position := v_old.position;
        out_prev_hash := v_old.prev_hash;
        out_entry_hash := v_old.entry_hash;
    END IF;
    IF p_settle THEN
        -- "settled_at IS NULL" means "NOT settled" (CHECK settled_has_time) but does
        -- not match the partial index of unsettled intents: with statistics saying
        -- almost none are unsettled, the planner would scan that index, dead entries
        -- and all, instead of looking the intent up by its primary key.
        UPDATE intents SET settled = true, settled_at = now(), boundary = p_boundary
         WHERE tenant_id = p_tenant AND intent_id = p_intent AND settled_at IS NULL;
        UPDATE actions SET in_flight = false, last_boundary = p_boundary,
               last_retryable = p_retryable, last_position = out_position, updated_at = now()
         WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempts = p_attempt;
        IF p_confirmation IS NOT NULL THEN
            UPDATE confirmations
               SET state = CASE WHEN p_boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED')
                                THEN 'APPROVED' ELSE 'CONSUMED' END,
                   updated_at = now()
             WHERE tenant_id = p_tenant AND confirmation_id = p_confirmation
               AND state = 'RESERVED';
        END IF;
    END IF;
END
$$;
