-- Resolve an uncertain attempt (issue 16): record what the attempt did, as a person
-- or a reconcile hook said, and append the resolution entry to the run's chain with
-- arvis_journal (the one writer of the journal). Python read the uncertain entry and
-- decided the resolution; this statement checks, under the run's lock, that the
-- attempt is still open and writes both, or nothing:
--   'appended'       out_* describe the resolution entry
--   'resolved'       the attempt was resolved already (once per attempt)
--   'not_uncertain'  no uncertain entry of this attempt at p_uncertain_position
--   'stale'          p_consent was decided on a consent or attempts that changed
-- The uncertain entry itself is never changed. Its open row in `resolutions` was
-- written with it (arvis_on_entry); resolving fills that row in.
-- Revision 0010 adds p_consent (NULL: the resolution leaves every consent as it is):
-- the next round of approval of the consent the resolved attempt used up, which
-- Python decided on (DESIGN §10: settling an uncertain outcome meets the consent
-- terms). JSON: confirmation_id, round (the new one), state (PENDING, or APPROVED when
-- the resolver's approval meets the quorum), expires_at, decided_by, approver (the
-- resolver, when the resolution counts as an approval of the new round, else null).
-- It applies only while the consent is CONSUMED in the round before and the resolved
-- attempt is still the decision's latest, with none in flight.
-- Revision 0011: the entry goes through arvis_journal's one typed argument; the new
-- round opens at the database's now() and lives expires_at - p_recorded_at (one clock
-- for expiry, issue 24).
-- Revision 0015 (issue 28): the run's lock is the row lock on its row (arvis_bind says
-- why), arvis_journal takes the tenant first, and the resolution's time and the
-- approver's groups are computed before the statements that write them (Citus refuses
-- a function that is not IMMUTABLE inside a CASE, and a subquery inside an INSERT).
CREATE OR REPLACE FUNCTION arvis_resolve(
    p_tenant text, p_run text, p_causal text, p_key text, p_attempt integer,
    p_uncertain_position bigint, p_boundary text, p_resolved_by text, p_body text,
    p_recorded_at text, p_consent jsonb,
    OUT out_status text, OUT out_position bigint, OUT out_prev_hash text,
    OUT out_entry_hash text
) LANGUAGE plpgsql AS $$
DECLARE
    v_confirmation text := p_consent ->> 'confirmation_id';
    v_round integer := (p_consent ->> 'round')::integer;
    v_approver jsonb := p_consent -> 'approver';
    v_recorded_at timestamptz := p_recorded_at::timestamptz;
    v_groups text[];
BEGIN
    PERFORM 1 FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR NO KEY UPDATE;
    IF NOT EXISTS (
        SELECT 1 FROM resolutions WHERE tenant_id = p_tenant AND idempotency_key = p_key
           AND attempt = p_attempt AND run_id = p_run
           AND uncertain_position = p_uncertain_position AND boundary IS NULL) THEN
        out_status := CASE WHEN EXISTS (
            SELECT 1 FROM resolutions WHERE tenant_id = p_tenant AND idempotency_key = p_key
               AND attempt = p_attempt AND run_id = p_run
               AND uncertain_position = p_uncertain_position)
            THEN 'resolved' ELSE 'not_uncertain' END;
        RETURN;
    END IF;
    IF p_consent IS NOT NULL AND (
        NOT EXISTS (SELECT 1 FROM confirmations WHERE tenant_id = p_tenant
                     AND confirmation_id = v_confirmation AND idempotency_key = p_key
                     AND state = 'CONSUMED' AND round = v_round - 1)
        OR EXISTS (SELECT 1 FROM attempts
                    WHERE tenant_id = p_tenant AND idempotency_key = p_key)
        OR EXISTS (SELECT 1 FROM journal_entries WHERE idempotency_key = p_key
                    AND tenant_id = p_tenant AND attempt > p_attempt)) THEN
        out_status := 'stale';
        RETURN;
    END IF;
    UPDATE resolutions
       SET boundary = p_boundary, resolved_by = p_resolved_by,
           resolved_at = v_recorded_at
     WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt
       AND run_id = p_run AND uncertain_position = p_uncertain_position
       AND boundary IS NULL;
    -- Not an attempt (attempt NULL): the retry table reads the resolution through
    -- `resolutions`, beside the attempt it resolves.
    SELECT j.out_status, j.out_position, j.out_prev_hash, j.out_entry_hash
      INTO out_status, out_position, out_prev_hash, out_entry_hash
      FROM arvis_journal(p_tenant, jsonb_populate_record(NULL::arvis_journal_step, jsonb_build_object(
          'tenant', p_tenant, 'run', p_run, 'kind', 'resolution', 'causal', p_causal,
          'idempotency_key', p_key, 'boundary', p_boundary, 'body', p_body,
          'recorded_at', p_recorded_at))) j;
    UPDATE resolutions SET position = out_position
     WHERE tenant_id = p_tenant AND idempotency_key = p_key AND attempt = p_attempt;
    IF p_consent IS NULL THEN
        RETURN;
    END IF;
    UPDATE confirmations
       SET state = p_consent ->> 'state', round = v_round,
           renewed_at = now(),
           expires_at = now() + ((p_consent ->> 'expires_at')::timestamptz - v_recorded_at),
           decided_by = p_consent ->> 'decided_by',
           decided_at = CASE WHEN p_consent ->> 'decided_by' IS NULL THEN NULL
                             ELSE v_recorded_at END,
           decision_reason = NULL, updated_at = now()
     WHERE tenant_id = p_tenant AND confirmation_id = v_confirmation AND state = 'CONSUMED';
    IF NOT FOUND THEN
        -- Checked above under the same lock: a resolution never lands without its round.
        RAISE EXCEPTION 'confirmation % changed under the run''s lock', v_confirmation;
    END IF;
    IF jsonb_typeof(v_approver) = 'object' THEN
        v_groups := ARRAY(SELECT jsonb_array_elements_text(v_approver -> 'groups'));
        INSERT INTO confirmation_approvals (tenant_id, confirmation_id, round, principal_id,
            auth_method, key_id, groups, decided_at, position)
        VALUES (p_tenant, v_confirmation, v_round, v_approver ->> 'principal_id',
            v_approver ->> 'auth_method', v_approver ->> 'key_id', v_groups,
            v_recorded_at, out_position);
    END IF;
END
$$;
