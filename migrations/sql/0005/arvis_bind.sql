-- Take the run's lock for this transaction, bind a new run to the caller's plan,
-- and bind the run's causal id to this decision (DESIGN §4: one causal id names
-- one decision for ever; the decisions primary key enforces it). The decision
-- row keeps the frozen payload, once, for as long as the journal refers to it.
--
-- The lock is a transaction-scoped advisory lock per run: admissions and appends
-- of one run take turns, different runs never wait on each other, and taking it
-- writes nothing. Answers:
--   'new'             the decision was bound just now: it has no history at all
--   'known'           the decision was bound before (it may have history)
--   'plan_mismatch'   the run is bound to another plan (out_run_plan names it)
--   'causal_conflict' the run's causal id already names another decision
-- p_key NULL binds the run only ('known').
CREATE OR REPLACE FUNCTION arvis_bind(
    p_tenant text, p_run text, p_plan text, p_causal text, p_key text, p_tool text,
    p_digest text, p_payload text, OUT out_status text, OUT out_run_plan text
) LANGUAGE plpgsql AS $$
DECLARE
    v_key text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_tenant || E'\x1f' || p_run, 0));
    SELECT plan_id INTO out_run_plan FROM runs WHERE tenant_id = p_tenant AND run_id = p_run;
    IF NOT FOUND THEN
        INSERT INTO runs (tenant_id, run_id, plan_id, journal_head)
        VALUES (p_tenant, p_run, p_plan, repeat('0', 64));
        out_run_plan := p_plan;
    ELSIF p_plan IS NOT NULL AND out_run_plan <> p_plan THEN
        out_status := 'plan_mismatch';
        RETURN;
    END IF;
    IF p_key IS NULL THEN
        out_status := 'known';
        RETURN;
    END IF;
    -- Under the run's lock nobody else binds this run's causal ids: look, then insert
    -- (a plain insert: ON CONFLICT's speculative insertion costs WAL on every call).
    SELECT idempotency_key INTO v_key FROM decisions
     WHERE tenant_id = p_tenant AND run_id = p_run AND causal_id = p_causal;
    IF FOUND THEN
        out_status := CASE WHEN v_key = p_key THEN 'known' ELSE 'causal_conflict' END;
        RETURN;
    END IF;
    INSERT INTO decisions (tenant_id, run_id, causal_id, idempotency_key, tool,
        payload_digest, payload)
    VALUES (p_tenant, p_run, p_causal, p_key, p_tool, p_digest, p_payload::jsonb);
    out_status := 'new';
END
$$;
