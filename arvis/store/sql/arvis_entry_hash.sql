-- The journal entry hash, version 1: SHA-256 over the header fields and the
-- canonical (RFC 8785) body text, joined by newlines. No header field can hold
-- a newline (ids are restricted), and the body comes last, so the preimage is
-- unambiguous. arvis.lifecycle.journal.chain_hash computes the same in Python.
CREATE OR REPLACE FUNCTION arvis_entry_hash(
    p_prev text, p_tenant text, p_run text, p_position bigint, p_kind text,
    p_causal text, p_key text, p_attempt integer, p_intent text, p_boundary text,
    p_recorded_at text, p_body text
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT encode(sha256(convert_to(
        'arvis-journal-v1' || E'\n' || p_prev || E'\n' || p_tenant || E'\n' || p_run
        || E'\n' || p_position::text || E'\n' || p_kind || E'\n' || p_causal
        || E'\n' || p_key || E'\n' || coalesce(p_attempt::text, '')
        || E'\n' || coalesce(p_intent, '') || E'\n' || coalesce(p_boundary, '')
        || E'\n' || p_recorded_at || E'\n' || p_body, 'UTF8')), 'hex')
$$;
