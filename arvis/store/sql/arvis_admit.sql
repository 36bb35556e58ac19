-- Admission (DESIGN §2 step 1) for an attempt the caller has authorized: the
-- capability minted, activated by its receipt and consumed, written as the one
-- in-flight attempt row that also is the intent (its payload is the decision's). Python decided on what it knew
-- of the decision's history; this statement checks that knowledge under the
-- run's lock and writes nothing when it is stale:
--   'admitted'        out_receipt_position is the receipt's durable position
--   'stale'           the history is not what the caller decided on: read it, decide again
--   'identity_mismatch' the run is bound to another principal: nothing written
--   'causal_conflict' the run's causal id names another decision
--   'receipt_reused'  the caller's receipt position is not past the run's last one
-- The caller's expectation is p_attempt (the decision's last attempt + 1) and
-- p_confirmation (the consent it acts under, NULL for none): the in-flight
-- primary key allows one unsettled attempt per key; an APPROVED confirmation is
-- reserved for this attempt (p_reserve), a CONSUMED one only re-checked.
-- Receipt positions count per run: the built-in sink (p_receipt_position NULL)
-- takes the next one; an external sink's must be past every earlier one.
-- Budgets (revision 0007): p_budgets is NULL (no budget applies) or the JSON array
-- of charges Python decided, sorted by (budget, scope) so that every statement
-- takes the rows' locks in one order. Each adds its amount to its window's row
-- only while the sum stays within its limit (a conditional upsert: exact under
-- any concurrency, across runs and instances). A charge that does not fit raises
-- SQLSTATE AR010 naming the budget, which undoes the whole statement (the other
-- charges, a reservation, a binding): nothing is admitted, nothing is charged.
-- The charges are kept on the attempt, for the entry that settles it (p_policy:
-- which policy authorized it, likewise).
-- Revision 0010: the run is bound to the principal of p_context (arvis_bind), and the
-- attempt to the plan it was decided under (p_plan), not the run's first plan.
-- Revision 0015 (issue 28): the charge is an INSERT … VALUES, its time taken from
-- excluded, and the limit of a charge alone checked first: Citus refuses a function
-- that is not IMMUTABLE in DO UPDATE SET, and an INSERT … SELECT of the function's
-- variables loses its parameters on the worker it is sent to.
-- Revision 0020: whether p_attempt is the next attempt is arvis_next_attempt's answer,
-- the journal's too.
CREATE OR REPLACE FUNCTION arvis_admit(
    p_tenant text, p_run text, p_plan text, p_causal text, p_key text, p_tool text,
    p_digest text, p_attempt integer, p_intent text, p_capability text, p_payload text,
    p_commitment text, p_context text, p_owner text, p_confirmation text, p_reserve boolean,
    p_receipt_position bigint, p_policy text, p_budgets text,
    OUT out_status text, OUT out_receipt_position bigint, OUT out_run_plan text
) LANGUAGE plpgsql AS $$
DECLARE
    v_context jsonb := p_context::jsonb;
    v_bound text;
    v_receipts bigint;
    v_confirmation text;
    v_state text;
    v_charge record;
BEGIN
    SELECT b.out_status, b.out_run_plan INTO v_bound, out_run_plan
      FROM arvis_bind(p_tenant, p_run, p_plan, p_causal, p_key, p_tool, p_digest, p_payload,
                      v_context ->> 'principal_id') b;
    IF v_bound IN ('identity_mismatch', 'causal_conflict') THEN
        out_status := v_bound;
        RETURN;
    END IF;
    IF v_bound = 'new' THEN
        -- A decision bound just now has no attempts and no consent yet.
        IF p_attempt <> 1 OR p_confirmation IS NOT NULL THEN
            out_status := 'stale';
            RETURN;
        END IF;
    ELSE
        IF NOT arvis_next_attempt(p_tenant, p_key, p_attempt) THEN
            out_status := 'stale';
            RETURN;
        END IF;
        SELECT confirmation_id, state INTO v_confirmation, v_state FROM confirmations
         WHERE idempotency_key = p_key AND tenant_id = p_tenant;
        IF v_confirmation IS DISTINCT FROM p_confirmation THEN
            out_status := 'stale';
            RETURN;
        END IF;
        IF p_confirmation IS NOT NULL THEN
            IF p_reserve THEN
                -- Revision 0006: expiry is checked by the database's clock at the
                -- moment of use; an expired approval is 'stale' and Python, reading
                -- the history with that clock, refuses it (confirmation_expired).
                UPDATE confirmations SET state = 'RESERVED', updated_at = now()
                 WHERE tenant_id = p_tenant AND confirmation_id = p_confirmation
                   AND state = 'APPROVED' AND expires_at > now();
            ELSE
                PERFORM 1 WHERE v_state = 'CONSUMED';
            END IF;
            IF NOT FOUND THEN
                out_status := 'stale';
                RETURN;
            END IF;
        END IF;
    END IF;
    SELECT receipts INTO v_receipts FROM runs WHERE tenant_id = p_tenant AND run_id = p_run;
    out_receipt_position := coalesce(p_receipt_position, v_receipts + 1);
    IF out_receipt_position <= v_receipts THEN
        out_status := 'receipt_reused';
        RETURN;
    END IF;
    IF p_budgets IS NOT NULL THEN
        FOR v_charge IN
            SELECT c.budget, c.scope, c.window_start, c.amount, c."limit"
              FROM jsonb_to_recordset(p_budgets::jsonb) AS c(budget text, scope text,
                   window_start timestamptz, amount numeric, "limit" numeric)
             ORDER BY c.budget, c.scope
        LOOP
            -- A charge past the limit on its own fits in no window, new or not.
            IF v_charge.amount <= v_charge."limit" THEN
                INSERT INTO budget_usage AS u (tenant_id, budget, scope_key, window_start,
                    used, updated_at)
                VALUES (p_tenant, v_charge.budget, v_charge.scope, v_charge.window_start,
                    v_charge.amount, now())
                ON CONFLICT (tenant_id, budget, scope_key, window_start) DO UPDATE
                   SET used = u.used + excluded.used, updated_at = excluded.updated_at
                 WHERE u.used + excluded.used <= v_charge."limit";
            END IF;
            IF v_charge.amount > v_charge."limit" OR NOT FOUND THEN
                RAISE EXCEPTION 'budget % is spent', v_charge.budget
                      USING ERRCODE = 'AR010', DETAIL = v_charge.budget;
            END IF;
        END LOOP;
    END IF;
    UPDATE runs SET receipts = out_receipt_position
     WHERE tenant_id = p_tenant AND run_id = p_run;
    INSERT INTO attempts (tenant_id, idempotency_key, attempt, run_id, causal_id, tool,
        plan_id, intent_id, capability_id, commitment, receipt_position, context, owner,
        confirmation_id, policy, budgets)
    VALUES (p_tenant, p_key, p_attempt, p_run, p_causal, p_tool, p_plan, p_intent,
        p_capability, p_commitment, out_receipt_position, v_context, p_owner,
        p_confirmation, p_policy::jsonb, p_budgets::jsonb);
    out_status := 'admitted';
END
$$;
