-- Whether p_attempt is the next attempt of decision p_key (revision 0020): none is in
-- flight and the last one journaled is p_attempt - 1 (0 for none). Admission of a
-- decision already bound and a journal entry under an attempt number that settles
-- nothing (a refusal of a retry) check the caller's knowledge with it, under the
-- run's lock: false is their 'stale'. One definition, so the two cannot drift.
-- PL/pgSQL, not SQL: its statements' plans are kept for the session (a SQL function
-- holding subqueries is not inlined, and is planned again in every transaction).
CREATE OR REPLACE FUNCTION arvis_next_attempt(p_tenant text, p_key text, p_attempt integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM attempts
                        WHERE tenant_id = p_tenant AND idempotency_key = p_key)
       AND coalesce((SELECT max(attempt) FROM journal_entries
                      WHERE idempotency_key = p_key AND tenant_id = p_tenant
                        AND attempt IS NOT NULL), 0) + 1 = p_attempt;
END
$$;
