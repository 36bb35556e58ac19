-- Generated from arvis/domain/boundary.py by arvis/store/boundaries.py: do not
-- edit by hand (a test compares the two).
-- Nobody can say whether the effect happened: open for resolution.
CREATE OR REPLACE FUNCTION arvis_uncertain(p_boundary text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_boundary IN ('EFFECT_STARTED', 'EFFECT_STATE_UNKNOWN')
$$;

-- What a resolution may say an uncertain attempt did.
CREATE OR REPLACE FUNCTION arvis_resolved(p_boundary text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_boundary IN ('EFFECT_COMPLETED', 'EFFECT_FAILED', 'EFFECT_NOT_STARTED')
$$;
