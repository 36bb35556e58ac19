-- Take the run's lock for this transaction, bind a new run to the caller's plan and
-- principal, and bind the run's causal id to this decision (DESIGN §4: one causal id
-- names one decision for ever; the decisions primary key enforces it). The decision
-- row keeps the frozen payload, once, for as long as the journal refers to it.
--
-- The lock is a transaction-scoped advisory lock per run: admissions and appends
-- of one run take turns, different runs never wait on each other, and taking it
-- writes nothing. Answers:
--   'new'               the decision was bound just now: it has no history at all
--   'known'             the decision was bound before (it may have history)
--   'identity_mismatch' the run is bound to another principal (DESIGN §10): nothing
--                       was written, not even the causal id's binding
--   'causal_conflict'   the run's causal id already names another decision
-- p_key NULL binds the run only ('known').
--
-- Revision 0010: a run is bound to the principal of the step that created it
-- (p_principal, the step's sealed context's); a run from before it that recorded no
-- principal (principal_id NULL) is bound by its next step. The run's plan is the plan
-- of its first step, no longer checked: every decision is decided under the caller's
-- current plan, and one with history under what its attempts were (Python decides it
-- on the history, which the caller statement re-checks).
CREATE OR REPLACE FUNCTION arvis_bind(
    p_tenant text, p_run text, p_plan text, p_causal text, p_key text, p_tool text,
    p_digest text, p_payload text, p_principal text,
    OUT out_status text, OUT out_run_plan text
) LANGUAGE plpgsql AS $$
DECLARE
    v_key text;
    v_principal text;
BEGIN
    IF coalesce(p_principal, '') = '' THEN
        RAISE EXCEPTION 'a run is bound to a principal; none was given'
              USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_tenant || E'\x1f' || p_run, 0));
    SELECT plan_id, principal_id INTO out_run_plan, v_principal
      FROM runs WHERE tenant_id = p_tenant AND run_id = p_run;
    IF NOT FOUND THEN
        INSERT INTO runs (tenant_id, run_id, plan_id, principal_id, journal_head)
        VALUES (p_tenant, p_run, p_plan, p_principal, repeat('0', 64));
        out_run_plan := p_plan;
    ELSIF v_principal IS NULL THEN
        UPDATE runs SET principal_id = p_principal
         WHERE tenant_id = p_tenant AND run_id = p_run;
    ELSIF v_principal IS DISTINCT FROM p_principal THEN
        out_status := 'identity_mismatch';
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
