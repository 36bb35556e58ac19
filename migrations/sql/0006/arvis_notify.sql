-- Triggers of revision 0006 (issue 16). They decide nothing about the lifecycle: they
-- keep two indexes of facts already written, in the transaction that wrote them, so
-- neither can be lost or invented after the fact:
--   * `resolutions`: an open row for every attempt journaled uncertain
--     (EFFECT_STARTED / EFFECT_STATE_UNKNOWN), which a person or a hook resolves;
--   * `notify_outbox`: one event per fact an operator is told of (a consent asked,
--     approved, denied or expired; an uncertain outcome; a resolution), delivered
--     after commit by the deliverer. The event id is a digest of the fact, so a
--     redelivery carries the same id.
CREATE OR REPLACE FUNCTION arvis_event_id(p_parts text[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT 'ev_' || left(encode(sha256(convert_to(array_to_string(p_parts, E'\x1f'),
        'UTF8')), 'hex'), 32)
$$;

CREATE OR REPLACE FUNCTION arvis_on_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_type text;
BEGIN
    IF NEW.kind = 'resolution' THEN
        v_type := 'effect.resolved';
    ELSE
        v_type := 'effect.uncertain';
        IF NEW.attempt IS NOT NULL THEN
            INSERT INTO resolutions (tenant_id, idempotency_key, attempt, run_id, causal_id,
                uncertain_position)
            VALUES (NEW.tenant_id, NEW.idempotency_key, NEW.attempt, NEW.run_id,
                NEW.causal_id, NEW.position)
            ON CONFLICT DO NOTHING;
        END IF;
    END IF;
    INSERT INTO notify_outbox (tenant_id, event_id, event_type, subject, occurred_at)
    VALUES (NEW.tenant_id,
        arvis_event_id(ARRAY[v_type, NEW.tenant_id, NEW.run_id, NEW.position::text]),
        v_type,
        jsonb_build_object('run_id', NEW.run_id, 'causal_id', NEW.causal_id,
            'idempotency_key', NEW.idempotency_key, 'attempt',
            coalesce(NEW.attempt, (NEW.body::jsonb ->> 'attempt')::integer),
            'position', NEW.position, 'boundary', NEW.boundary,
            'tool', NEW.body::jsonb ->> 'tool'),
        NEW.recorded_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION arvis_on_confirmation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_type text := 'confirmation.' || CASE WHEN TG_OP = 'INSERT' THEN 'requested'
                                          ELSE lower(NEW.state) END;
BEGIN
    INSERT INTO notify_outbox (tenant_id, event_id, event_type, subject)
    VALUES (NEW.tenant_id,
        arvis_event_id(ARRAY[v_type, NEW.tenant_id, NEW.confirmation_id]),
        v_type,
        jsonb_build_object('confirmation_id', NEW.confirmation_id, 'run_id', NEW.run_id,
            'causal_id', NEW.causal_id, 'idempotency_key', NEW.idempotency_key,
            'tool', NEW.tool, 'state', NEW.state, 'requested_by',
            NEW.context ->> 'principal_id', 'approvers', to_jsonb(NEW.approver_groups),
            'quorum', NEW.quorum, 'expires_at', NEW.expires_at))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
