-- The audit trail (issue #24): who changed what, appended by the sys functions in the same
-- transaction as the change (sys.record_audit_event, sql/sys/14_audit.sql), read by owners and
-- admins (sys.list_audit_events), and removed only by a database administrator's prune
-- (sys.prune_audit_events, `plinth audit prune`). No app role has any privilege on the table;
-- row-level security is forced, with no policy for UPDATE, and a trigger refuses changes.

CREATE TABLE sys.audit_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT now(),
  -- NULL: a database administrator, or nobody signed in (a failed sign-in).
  actor_id uuid,
  actor_role text NOT NULL,
  action text NOT NULL,
  target text,
  details jsonb NOT NULL DEFAULT '{}'::jsonb,
  request_id text
);
CREATE INDEX audit_events_at ON sys.audit_events (at, id);

REVOKE ALL ON sys.audit_events FROM PUBLIC;
ALTER TABLE sys.audit_events ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
-- The table's owner (the role that migrates, which also owns the sys functions) appends, reads
-- and prunes; nobody may update.
CREATE POLICY append ON sys.audit_events FOR INSERT TO CURRENT_USER WITH CHECK (true);
CREATE POLICY read ON sys.audit_events FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY prune ON sys.audit_events FOR DELETE TO CURRENT_USER USING (true);
