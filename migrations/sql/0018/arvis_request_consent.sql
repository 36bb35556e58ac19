-- Ask for consent (DESIGN §2: "commit a PENDING confirmation and answer
-- 'confirmation required'; nothing is minted"), binding the run and its causal
-- id like admission. Answers 'created' or 'existing' with out_confirmation_id
-- (a confirmation of this decision already exists: the caller decides again on
-- it), 'identity_mismatch' (revision 0010: the run is bound to another principal than
-- p_context's; nothing written) or 'causal_conflict'.
-- Revision 0006 adds p_terms, the approval terms Python froze for this consent
-- (JSON: approver_groups, quorum, definition_fingerprint, policy_digest).
-- Revision 0011: a consent's times are the database's (one clock for expiry, issue
-- 24): it is created at now() and lives p_expires_at - p_created_at (the lifetime
-- Python decided), so whatever clock the caller's times came from, the statements
-- that use, list and expire it (expires_at <= now()) judge it by the same clock.
-- Revision 0015 (issue 28): the approver groups are read from p_terms before the insert
-- (Citus refuses a subquery inside an INSERT on a distributed table).
-- Revision 0018 (issue 27): p_terms may carry 'policy', which policy asked for the
-- consent and why (engine, version, digest, policy_ids, reason); it is kept in
-- confirmations.policy for the approver to see.
CREATE OR REPLACE FUNCTION arvis_request_consent(
    p_tenant text, p_run text, p_plan text, p_causal text, p_key text, p_tool text,
    p_digest text, p_confirmation text, p_payload text, p_context text,
    p_expires_at timestamptz, p_created_at timestamptz, p_terms jsonb,
    OUT out_status text, OUT out_confirmation_id text, OUT out_run_plan text
) LANGUAGE plpgsql AS $$
DECLARE
    v_bound text;
    v_groups text[] := ARRAY(SELECT jsonb_array_elements_text(p_terms -> 'approver_groups'));
BEGIN
    SELECT b.out_status, b.out_run_plan INTO v_bound, out_run_plan
      FROM arvis_bind(p_tenant, p_run, p_plan, p_causal, p_key, p_tool, p_digest, p_payload,
                      p_context::jsonb ->> 'principal_id') b;
    IF v_bound IN ('identity_mismatch', 'causal_conflict') THEN
        out_status := v_bound;
        RETURN;
    END IF;
    INSERT INTO confirmations (tenant_id, confirmation_id, run_id, causal_id,
        idempotency_key, tool, payload_digest, payload, state, context, expires_at,
        created_at, updated_at, approver_groups, quorum, definition_fingerprint,
        policy_digest, policy)
    VALUES (p_tenant, p_confirmation, p_run, p_causal, p_key, p_tool, p_digest,
        p_payload::jsonb, 'PENDING', p_context::jsonb, now() + (p_expires_at - p_created_at),
        now(), now(),
        v_groups, (p_terms ->> 'quorum')::integer, p_terms ->> 'definition_fingerprint',
        p_terms ->> 'policy_digest', p_terms -> 'policy')
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        out_status := 'created';
        out_confirmation_id := p_confirmation;
        RETURN;
    END IF;
    SELECT confirmation_id INTO out_confirmation_id FROM confirmations
     WHERE idempotency_key = p_key AND tenant_id = p_tenant;
    out_status := 'existing';
END
$$;
