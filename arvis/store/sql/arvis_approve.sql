-- One approval of a confirmation that may need several (issue 16: quorum), under the
-- run's lock: the approver's row in confirmation_approvals (its key makes approvals
-- distinct) and the `confirmation` journal entry (arvis_journal), with the state
-- change Python decided: PENDING stays PENDING short of the quorum, or becomes
-- APPROVED (p_to). Python decided on p_seen earlier approvals; answers:
--   'appended'   out_* describe the entry
--   'stale'      the approvals or the state are not what Python saw: read, decide again
--   'duplicate'  this principal has approved this confirmation already
--   'expired'    the confirmation expired by the database's clock: nothing written
-- Revision 0010 adds p_round, the round of approval Python decided in (a resolution
-- as not started of an attempt that used the consent up opens the next one): the
-- approvals counted, and the distinct approvers, are those of that round; a round
-- that moved on since is 'stale'.
-- Revision 0011: the entry goes through arvis_journal's one typed argument.
-- Revision 0015 (issue 28): the run's lock is the row lock on its row (arvis_bind says
-- why), and arvis_journal takes the tenant first.
CREATE OR REPLACE FUNCTION arvis_approve(
    p_tenant text, p_run text, p_causal text, p_key text, p_confirmation text,
    p_round integer,
    p_principal text, p_auth_method text, p_key_id text, p_groups text[], p_seen integer,
    p_to text, p_decided_by text, p_body text, p_recorded_at text,
    OUT out_status text, OUT out_position bigint, OUT out_prev_hash text,
    OUT out_entry_hash text
) LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM runs WHERE tenant_id = p_tenant AND run_id = p_run FOR NO KEY UPDATE;
    IF EXISTS (SELECT 1 FROM confirmation_approvals WHERE tenant_id = p_tenant
                AND confirmation_id = p_confirmation AND round = p_round
                AND principal_id = p_principal) THEN
        out_status := 'duplicate';
        RETURN;
    END IF;
    IF EXISTS (SELECT 1 FROM confirmations WHERE tenant_id = p_tenant
                AND confirmation_id = p_confirmation AND expires_at <= now()) THEN
        out_status := 'expired';
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM confirmations WHERE tenant_id = p_tenant
                    AND confirmation_id = p_confirmation AND round = p_round)
       OR (SELECT count(*) FROM confirmation_approvals WHERE tenant_id = p_tenant
            AND confirmation_id = p_confirmation AND round = p_round) <> p_seen THEN
        out_status := 'stale';
        RETURN;
    END IF;
    SELECT j.out_status, j.out_position, j.out_prev_hash, j.out_entry_hash
      INTO out_status, out_position, out_prev_hash, out_entry_hash
      FROM arvis_journal(p_tenant, jsonb_populate_record(NULL::arvis_journal_step, jsonb_build_object(
          'tenant', p_tenant, 'run', p_run, 'kind', 'confirmation', 'causal', p_causal,
          'idempotency_key', p_key, 'body', p_body, 'recorded_at', p_recorded_at,
          'confirmation', p_confirmation, 'confirmation_from', ARRAY['PENDING'],
          'confirmation_to', p_to, 'confirmation_strict', true,
          'decided_by', p_decided_by))) j;
    IF out_status <> 'appended' THEN
        RETURN;
    END IF;
    INSERT INTO confirmation_approvals (tenant_id, confirmation_id, round, principal_id,
        auth_method, key_id, groups, decided_at, position)
    VALUES (p_tenant, p_confirmation, p_round, p_principal, p_auth_method, p_key_id,
        p_groups, p_recorded_at::timestamptz, out_position);
END
$$;
