-- Resolve an uncertain attempt (issue 16): record what the attempt did, as a person
-- or a reconcile hook said, and append the resolution entry to the run's chain with
-- arvis_journal (the one writer of the journal). Python read the uncertain entry and
-- decided the resolution; this statement checks, under the run's lock, that the
-- attempt is still open and writes both, or nothing:
--   'appended'       out_* describe the resolution entry
--   'resolved'       the attempt was resolved already (once per attempt)
--   'not_uncertain'  no uncertain entry of this attempt at p_uncertain_position
-- The uncertain entry itself is never changed. Its open row in `resolutions` was
-- written with it (arvis_on_entry); resolving fills that row in.
CREATE OR REPLACE FUNCTION arvis_resolve(
    p_tenant text, p_run text, p_causal text, p_key text, p_attempt integer,
    p_uncertain_position bigint, p_boundary text, p_resolved_by text, p_body text,
    p_recorded_at text,
    OUT out_status text, OUT out_position bigint, OUT out_prev_hash text,
    OUT out_entry_hash text
) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_tenant || E'\x1f' || p_run, 0));
    UPDATE resolutions
       SET boundary = p_boundary, resolved_by = p_resolved_by,
           resolved_at = p_recorded_at::timestamptz
     WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt
       AND run_id = p_run AND uncertain_position = p_uncertain_position
       AND boundary IS NULL;
    IF NOT FOUND THEN
        out_status := CASE WHEN EXISTS (
            SELECT 1 FROM resolutions WHERE tenant_id = p_tenant AND idempotency_key = p_key
               AND attempt = p_attempt AND run_id = p_run
               AND uncertain_position = p_uncertain_position)
            THEN 'resolved' ELSE 'not_uncertain' END;
        RETURN;
    END IF;
    -- Not an attempt (attempt NULL): the retry table reads the resolution through
    -- `resolutions`, beside the attempt it resolves.
    SELECT j.out_status, j.out_position, j.out_prev_hash, j.out_entry_hash
      INTO out_status, out_position, out_prev_hash, out_entry_hash
      FROM arvis_journal(p_tenant, p_run, 'resolution', p_causal, p_key, NULL, NULL,
          p_boundary, false, p_body, p_recorded_at, false, false, NULL, NULL, NULL, NULL,
          NULL, NULL, NULL, false, NULL, NULL, NULL) j;
    UPDATE resolutions SET position = out_position
     WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt;
END
$$;
