-- The one argument of arvis_journal (revision 0011, issue 24): one journal entry and
-- the state changes Python decided go with it, by name. Python builds it as one JSON
-- record (arvis.store.journaling.journal_record) that the statement turns into this
-- type; the server-side callers (arvis_approve, arvis_resolve) name only the fields
-- they set. An absent field is NULL; an absent switch is false.
--   entry              tenant, run, kind, causal, idempotency_key, attempt, intent,
--                      boundary, retryable, body, recorded_at (the hashed text)
--   settle             the entry settles the in-flight attempt (idempotency_key,
--                      attempt); with release_budgets, its budget charges are given back
--   bind_*             bind the run and the causal id to the refused decision first
--                      (bind_tool set: bind; bind_plan, bind_digest, bind_payload)
--   confirmation*      the confirmation goes to confirmation_to from one of
--                      confirmation_from (who decided, why); confirmation_strict: no
--                      such confirmation makes the step 'stale'
--   flag               flag the run audit-incomplete with this reason
CREATE TYPE arvis_journal_step AS (
    tenant text,
    run text,
    kind text,
    causal text,
    idempotency_key text,
    attempt integer,
    intent text,
    boundary text,
    retryable boolean,
    body text,
    recorded_at text,
    settle boolean,
    release_budgets boolean,
    bind_plan text,
    bind_tool text,
    bind_digest text,
    bind_payload text,
    confirmation text,
    confirmation_from text[],
    confirmation_to text,
    confirmation_strict boolean,
    decided_by text,
    reason text,
    flag text
);
