-- Server-side steps of the lifecycle (DESIGN §2). Each is one statement for the
-- client and, called outside a transaction, one commit: the hot path of a
-- tool.execute is arvis_admit before the tool body and arvis_journal_execution
-- after it. Every state change inside is the same conditional statement the
-- general path uses; the schema's constraints hold either way.

-- The journal entry hash, version 1: SHA-256 over the header fields and the
-- canonical (RFC 8785) body text, joined by newlines. No header field can hold
-- a newline (ids are restricted), and the body comes last, so the preimage is
-- unambiguous. arvis.lifecycle.journal.hash_of computes the same in Python.
CREATE FUNCTION arvis_entry_hash(
    p_prev text, p_tenant text, p_run text, p_position bigint, p_kind text,
    p_causal text, p_key text, p_attempt integer, p_intent text, p_boundary text,
    p_recorded_at text, p_body text
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(
        'arvis-journal-v1' || E'\n' || p_prev || E'\n' || p_tenant || E'\n' || p_run
        || E'\n' || p_position::text || E'\n' || p_kind || E'\n' || p_causal
        || E'\n' || p_key || E'\n' || coalesce(p_attempt::text, '')
        || E'\n' || coalesce(p_intent, '') || E'\n' || coalesce(p_boundary, '')
        || E'\n' || p_recorded_at || E'\n' || p_body, 'UTF8')), 'hex')
$$;

-- Append one entry to a run's chain under the run's row lock. Appending the same
-- result for the same attempt again answers the stored entry; a different one
-- raises AR001 (journal conflict), never overwrites.
CREATE FUNCTION arvis_journal_append(
    p_tenant text, p_run text, p_kind text, p_causal text, p_key text,
    p_attempt integer, p_intent text, p_boundary text, p_body text, p_recorded_at text
) RETURNS TABLE (out_position bigint, out_prev_hash text, out_entry_hash text)
LANGUAGE plpgsql AS $$
DECLARE
    v_length bigint;
    v_head text;
    v_hash text;
    v_old record;
BEGIN
    SELECT journal_length, journal_head INTO v_length, v_head
      FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run USING ERRCODE = 'AR002';
    END IF;
    v_hash := arvis_entry_hash(v_head, p_tenant, p_run, v_length + 1, p_kind, p_causal,
                               p_key, p_attempt, p_intent, p_boundary, p_recorded_at, p_body);
    INSERT INTO journal_entries (tenant_id, run_id, position, kind, causal_id,
        idempotency_key, attempt, intent_id, boundary, body, prev_hash, entry_hash,
        recorded_at)
    VALUES (p_tenant, p_run, v_length + 1, p_kind, p_causal, p_key, p_attempt, p_intent,
        p_boundary, p_body, v_head, v_hash, p_recorded_at::timestamptz)
    ON CONFLICT (tenant_id, idempotency_key, attempt) WHERE attempt IS NOT NULL DO NOTHING;
    IF NOT FOUND THEN
        SELECT position, prev_hash, entry_hash, boundary, body INTO v_old
          FROM journal_entries
         WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt;
        IF v_old.boundary IS NOT DISTINCT FROM p_boundary AND v_old.body = p_body THEN
            RETURN QUERY SELECT v_old.position, v_old.prev_hash, v_old.entry_hash;
            RETURN;
        END IF;
        RAISE EXCEPTION 'attempt % of % already has a different result', p_attempt, p_key
            USING ERRCODE = 'AR001';
    END IF;
    UPDATE runs SET journal_length = v_length + 1, journal_head = v_hash
     WHERE tenant_id = p_tenant AND run_id = p_run;
    RETURN QUERY SELECT v_length + 1, v_head, v_hash;
END
$$;

-- Settle an attempt after its result is journaled: the intent, the action's
-- latest-attempt summary, and the consent (released only when nothing started).
CREATE FUNCTION arvis_settle_attempt(
    p_tenant text, p_intent text, p_key text, p_attempt integer, p_boundary text,
    p_retryable boolean, p_position bigint, p_confirmation text
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE intents SET settled = true, settled_at = now(), boundary = p_boundary
     WHERE tenant_id = p_tenant AND intent_id = p_intent AND NOT settled;
    UPDATE actions SET in_flight = false, last_boundary = p_boundary,
           last_retryable = p_retryable, last_position = p_position, updated_at = now()
     WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempts = p_attempt;
    IF p_confirmation IS NOT NULL THEN
        UPDATE confirmations
           SET state = CASE WHEN p_boundary IN ('PRE_EFFECT_REFUSAL', 'EFFECT_NOT_STARTED')
                            THEN 'APPROVED' ELSE 'CONSUMED' END,
               updated_at = now()
         WHERE tenant_id = p_tenant AND confirmation_id = p_confirmation
           AND state = 'RESERVED';
    END IF;
END
$$;

-- The journal transaction of DESIGN §2 step 3, as one statement.
CREATE FUNCTION arvis_journal_execution(
    p_tenant text, p_run text, p_causal text, p_key text, p_attempt integer,
    p_intent text, p_boundary text, p_body text, p_recorded_at text,
    p_retryable boolean, p_confirmation text
) RETURNS TABLE (out_position bigint, out_prev_hash text, out_entry_hash text)
LANGUAGE plpgsql AS $$
DECLARE
    v_entry record;
BEGIN
    SELECT * INTO v_entry FROM arvis_journal_append(p_tenant, p_run, 'execution', p_causal,
        p_key, p_attempt, p_intent, p_boundary, p_body, p_recorded_at);
    PERFORM arvis_settle_attempt(p_tenant, p_intent, p_key, p_attempt, p_boundary,
        p_retryable, v_entry.out_position, p_confirmation);
    RETURN QUERY SELECT v_entry.out_position, v_entry.out_prev_hash, v_entry.out_entry_hash;
END
$$;

-- The admission transaction of DESIGN §2 step 1 for a first attempt that the
-- caller has already authorized (tool in plan, payload valid, policy allows, no
-- consent needed), with the PostgreSQL audit sink. It binds a new run to the
-- caller's plan, claims the action as new, mints the capability, writes the
-- intent (its receipt position from the global sequence), activates and consumes
-- the capability. Anything but a brand-new action answers without writing, and
-- the caller takes the general path:
--   'admitted'       receipt position in out_receipt_position
--   'plan_mismatch'  the run is bound to out_run_plan
--   'existing'       the key (or the run's causal id) already has history
CREATE FUNCTION arvis_admit(
    p_tenant text, p_run text, p_plan text, p_causal text, p_key text, p_tool text,
    p_digest text, p_capability text, p_manager text, p_intent text, p_payload text,
    p_commitment text, p_context text, p_instance text
) RETURNS TABLE (out_status text, out_receipt_position bigint, out_run_plan text)
LANGUAGE plpgsql AS $$
DECLARE
    v_plan text;
    v_position bigint;
BEGIN
    INSERT INTO runs (tenant_id, run_id, plan_id, journal_head)
    VALUES (p_tenant, p_run, p_plan, repeat('0', 64))
    ON CONFLICT (tenant_id, run_id) DO NOTHING
    RETURNING plan_id INTO v_plan;
    IF NOT FOUND THEN
        SELECT plan_id INTO v_plan FROM runs WHERE tenant_id = p_tenant AND run_id = p_run;
        IF v_plan <> p_plan THEN
            RETURN QUERY SELECT 'plan_mismatch'::text, NULL::bigint, v_plan;
            RETURN;
        END IF;
    END IF;
    INSERT INTO actions (tenant_id, idempotency_key, run_id, causal_id, tool,
        payload_digest, attempts, in_flight)
    VALUES (p_tenant, p_key, p_run, p_causal, p_tool, p_digest, 1, true)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'existing'::text, NULL::bigint, v_plan;
        RETURN;
    END IF;
    -- The receipt's durable position is drawn first and the capability is minted
    -- bound to it, so activation and consumption change no indexed column (cheap
    -- in-place updates); the unique receipt column still refuses any reuse.
    v_position := nextval('receipt_position_seq');
    INSERT INTO capabilities (tenant_id, capability_id, run_id, idempotency_key, attempt,
        manager_id, state, receipt_position)
    VALUES (p_tenant, p_capability, p_run, p_key, 1, p_manager, 'MINTED', v_position);
    INSERT INTO intents (tenant_id, intent_id, run_id, causal_id, idempotency_key, attempt,
        tool, plan_id, payload, payload_digest, capability_id, commitment,
        receipt_position, context, instance_id)
    VALUES (p_tenant, p_intent, p_run, p_causal, p_key, 1, p_tool, p_plan,
        p_payload::jsonb, p_digest, p_capability, p_commitment,
        v_position, p_context::jsonb, p_instance);
    UPDATE capabilities SET state = 'ACTIVE', updated_at = now()
     WHERE tenant_id = p_tenant AND capability_id = p_capability AND state = 'MINTED'
       AND receipt_position = v_position;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability % was not MINTED', p_capability USING ERRCODE = 'AR003';
    END IF;
    UPDATE capabilities SET state = 'CONSUMED', updated_at = now()
     WHERE tenant_id = p_tenant AND capability_id = p_capability AND state = 'ACTIVE'
       AND manager_id = p_manager;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'capability % was not ACTIVE for %', p_capability, p_manager
            USING ERRCODE = 'AR003';
    END IF;
    RETURN QUERY SELECT 'admitted'::text, v_position, v_plan;
END
$$;
