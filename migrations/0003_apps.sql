-- The app registry (spec §2.6): each app is a schema of its own. X-App-Schema is resolved here;
-- the management functions of sys.create_app & co. and the trigger that announces a change are in
-- sql/sys/ (06_apps.sql, 02_management.sql).

CREATE TABLE sys.apps (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  schema_name text NOT NULL UNIQUE CHECK (schema_name ~ '^[a-z_][a-z0-9_]{0,62}$'),
  display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 200),
  description text NOT NULL DEFAULT '' CHECK (length(description) <= 2000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON sys.apps FROM PUBLIC;
ALTER TABLE sys.apps ENABLE ROW LEVEL SECURITY;
-- Both services resolve X-App-Schema before they switch role; they need the name and the id only.
-- (USAGE on sys gives them nothing else: every sys function's EXECUTE is granted to app roles only.)
GRANT USAGE ON SCHEMA sys TO authenticator;
GRANT SELECT (id, schema_name) ON sys.apps TO authenticator, chat_authenticator;
CREATE POLICY apps_resolve ON sys.apps FOR SELECT TO authenticator, chat_authenticator USING (true);
