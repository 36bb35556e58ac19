-- The triggers that keep the indexes of facts already written (arvis_notify.sql has
-- their functions), as revision 0011 installs them: defined here rather than inline in
-- a revision, and asking arvis_uncertain (arvis_boundaries.sql, generated from the
-- domain) which boundaries are uncertain rather than restating them.
-- An uncertain outcome opens a resolution and is reported; so is a resolution.
CREATE OR REPLACE TRIGGER tr_journal_entries_notify AFTER INSERT ON journal_entries
FOR EACH ROW WHEN (NEW.kind = 'resolution' OR arvis_uncertain(NEW.boundary))
EXECUTE FUNCTION arvis_on_entry();

-- A consent asked is reported.
CREATE OR REPLACE TRIGGER tr_confirmations_requested AFTER INSERT ON confirmations
FOR EACH ROW EXECUTE FUNCTION arvis_on_confirmation();

-- A consent decided (approved, denied, expired) or re-opened for a new round (a
-- resolution as not started of the attempt that used it up, revision 0010) is
-- reported. These are transitions of arvis/domain/states.py's tables (a test checks).
CREATE OR REPLACE TRIGGER tr_confirmations_decided AFTER UPDATE OF state ON confirmations
FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (
    (OLD.state = 'PENDING' AND NEW.state = 'APPROVED')
    OR (OLD.state = 'CONSUMED' AND NEW.state IN ('PENDING', 'APPROVED'))
    OR NEW.state IN ('DENIED', 'EXPIRED')))
EXECUTE FUNCTION arvis_on_confirmation();
