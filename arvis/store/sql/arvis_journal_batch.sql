-- Append a batch of journal steps (issue 25, group commit): the one journaling
-- statement, carrying the steps of one tenant (p_tenant, first, so the call can be
-- delegated to the tenant's shard; a step of another tenant is an error) that queued
-- while its previous batch was in flight (a lone step is a batch of one). Each item is one arvis_journal_step
-- record; the items run in their order through arvis_journal, so two entries of one
-- run are chained in that order on the run's one chain, and the batch commits once.
-- One row per item in order, arvis_journal's answer: a 'conflict' or 'stale' of one
-- item is its own answer and never fails its batch-mates. Python puts at most one
-- step that gives budget charges back in a batch (after every run lock:
-- arvis_lock_runs).
CREATE OR REPLACE FUNCTION arvis_journal_batch(
    p_tenant text, p_steps jsonb,
    OUT out_status text, OUT out_position bigint, OUT out_prev_hash text,
    OUT out_entry_hash text
) RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
    v arvis_journal_step;
BEGIN
    IF jsonb_array_length(p_steps) > 1 THEN
        PERFORM arvis_lock_runs(p_tenant, p_steps);
    END IF;
    FOR n IN 0 .. jsonb_array_length(p_steps) - 1 LOOP
        v := jsonb_populate_record(NULL::arvis_journal_step, p_steps -> n);
        IF v.tenant IS DISTINCT FROM p_tenant THEN
            RAISE EXCEPTION 'a batch of tenant % holds a step of tenant %', p_tenant, v.tenant
                  USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT j.out_status, j.out_position, j.out_prev_hash, j.out_entry_hash
          INTO out_status, out_position, out_prev_hash, out_entry_hash
          FROM arvis_journal(p_tenant, v) j;
        RETURN NEXT;
    END LOOP;
END
$$;
