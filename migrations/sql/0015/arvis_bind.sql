-- Take the run's lock for this transaction, bind a new run to the caller's plan and
-- principal, and bind the run's causal id to this decision (DESIGN §4: one causal id
-- names one decision for ever; the decisions primary key enforces it). The decision
-- row keeps the frozen payload, once, for as long as the journal refers to it.
--
-- The lock is a row lock on the run's row (FOR NO KEY UPDATE, held to the end of the
-- transaction; revision 0015): admissions and appends of one run take turns, different
-- runs never wait on each other, and children's foreign keys (FOR KEY SHARE) are not
-- blocked. It lives with the run's row, so on Citus it holds on the worker of the
-- run's shard whichever node runs the function (an advisory lock was taken on that
-- node only: a call pushed down and one run on the coordinator did not exclude each
-- other). A run's first step creates the row; a concurrent first step of the same run
-- waits on that insert, then locks the row it committed. Answers:
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
--
-- Revision 0015 (issue 28): the run's lock is the row lock above.
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
    SELECT plan_id, principal_id INTO out_run_plan, v_principal
      FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO runs (tenant_id, run_id, plan_id, principal_id, journal_head)
        VALUES (p_tenant, p_run, p_plan, p_principal, repeat('0', 64))
        ON CONFLICT DO NOTHING;
        IF FOUND THEN
            out_run_plan := p_plan;
            v_principal := p_principal;
        ELSE
            SELECT plan_id, principal_id INTO out_run_plan, v_principal
              FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR NO KEY UPDATE;
        END IF;
    END IF;
    IF v_principal IS NULL THEN
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
