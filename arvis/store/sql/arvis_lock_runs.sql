-- Take the locks of every run a batch of steps touches (issue 25), before any step
-- runs, in one order every transaction agrees on (the lock key's): a batch's steps
-- then take only locks of their own runs (which they already hold) or, after all of
-- them, the budget rows of its one charged step (in budget order), so two batches,
-- or a batch and a lone step, can never wait on each other in a cycle.
-- These transaction-scoped advisory locks order batches only; what excludes two steps
-- of one run is the row lock on the run's row each step takes (revision 0015). A batch
-- holds a run's advisory lock before it takes that run's row lock, and a lone step
-- touches one run, so row locks never wait in a cycle either, even for a run whose row
-- a step of the batch creates (an advisory lock needs no row). On Citus the batches of
-- a tenant run on its worker (pushed down by p_tenant), where these locks are taken.
CREATE OR REPLACE FUNCTION arvis_lock_runs(p_tenant text, p_steps jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_lock bigint;
BEGIN
    FOR v_lock IN
        SELECT DISTINCT hashtextextended(p_tenant || E'\x1f' || (s ->> 'run'), 0) AS k
          FROM jsonb_array_elements(p_steps) AS s
         ORDER BY k
    LOOP
        PERFORM pg_advisory_xact_lock(v_lock);
    END LOOP;
END
$$;
