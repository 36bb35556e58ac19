-- Admit a batch of attempts (issue 25, group commit): the one admission statement,
-- carrying the attempts of one tenant (p_tenant, first, so the call can be delegated
-- to the tenant's shard) that queued while its previous batch was in flight (a lone
-- call is a batch of one). Each item is arvis_admit's other arguments by name; the
-- items run in their order, so two attempts of one run keep theirs, and the batch
-- commits once. Each item gets its own answer, one row per item in
-- order: arvis_admit's, or 'budget_exceeded' with the spent budget in out_budget.
-- A refusal of one item never fails its batch-mates: arvis_admit's refusals are
-- answers already, and the budget refusal it raises (SQLSTATE AR010, undoing that
-- item's charges, reservation and binding) is caught in a block of its own around
-- the item that carries charges, so only that item's writes are undone. Python puts
-- at most one such item in a batch (after every run lock: arvis_lock_runs).
-- That block is entered by the item alone: the batch calls itself for it with the
-- one item (p_charged), inside the block, so arvis_admit's call is written once and an
-- item without charges pays no subtransaction (a block around every item would give
-- each one; a helper function around the call cost a lone admission about 8 %).
CREATE OR REPLACE FUNCTION arvis_admit_batch(
    p_tenant text, p_items jsonb, p_charged boolean DEFAULT false,
    OUT out_status text, OUT out_receipt_position bigint, OUT out_run_plan text,
    OUT out_budget text
) RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
    v jsonb;
BEGIN
    IF jsonb_array_length(p_items) > 1 THEN
        PERFORM arvis_lock_runs(p_tenant, p_items);
    END IF;
    FOR n IN 0 .. jsonb_array_length(p_items) - 1 LOOP
        v := p_items -> n;
        out_budget := NULL;
        IF v ->> 'budgets' IS NULL OR p_charged THEN
            SELECT a.out_status, a.out_receipt_position, a.out_run_plan
              INTO out_status, out_receipt_position, out_run_plan
              FROM arvis_admit(p_tenant, v ->> 'run', v ->> 'plan', v ->> 'causal',
                   v ->> 'idempotency_key', v ->> 'tool', v ->> 'digest',
                   (v ->> 'attempt')::integer, v ->> 'intent', v ->> 'capability',
                   v ->> 'payload', v ->> 'commitment', v ->> 'context', v ->> 'owner',
                   v ->> 'confirmation', (v ->> 'reserve')::boolean,
                   (v ->> 'receipt_position')::bigint, v ->> 'policy', v ->> 'budgets') a;
        ELSE
            BEGIN
                SELECT b.out_status, b.out_receipt_position, b.out_run_plan
                  INTO out_status, out_receipt_position, out_run_plan
                  FROM arvis_admit_batch(p_tenant, jsonb_build_array(v), true) b;
            EXCEPTION WHEN SQLSTATE 'AR010' THEN
                GET STACKED DIAGNOSTICS out_budget = PG_EXCEPTION_DETAIL;
                out_status := 'budget_exceeded';
                out_receipt_position := NULL;
                out_run_plan := NULL;
            END;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
