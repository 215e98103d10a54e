-- Tenants across PostgreSQL clusters (issue #27): the registry of clusters beside the registry of
-- tenants, in the control database. Each tenant lives on one cluster; `moving` fences it while
-- `plinth tenant move` flips it to another, and `epoch` counts its flips so every replica can tell
-- its pools point at the old one. The control cluster is the cluster `default`, whose URLs come
-- from the configuration (NULL templates), so existing setups keep working unchanged.
-- (Every database gets these tables; only the control database's are filled.)

CREATE TABLE plinth.clusters (
  name text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,62}$'),
  -- `postgres://…/{tenant}` as a superuser (or a role with CREATEDB and REPLICATION), and as the
  -- two login roles; NULL only for `default`.
  admin_url_template text,
  url_template text,
  chat_url_template text,
  state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining')),
  -- At most this many tenant databases; NULL: no cap beyond the connection budget.
  max_databases integer CHECK (max_databases > 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((name = 'default') = (admin_url_template IS NULL AND url_template IS NULL AND chat_url_template IS NULL))
);
INSERT INTO plinth.clusters (name) VALUES ('default');

ALTER TABLE plinth.tenants
  ADD COLUMN cluster text NOT NULL DEFAULT 'default' REFERENCES plinth.clusters (name),
  ADD COLUMN state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'moving')),
  ADD COLUMN epoch integer NOT NULL DEFAULT 1,
  -- The cluster a move is copying the tenant to (set from its start to its flip or undoing), so
  -- that `plinth tenant cleanup` can undo a move whose process was killed.
  ADD COLUMN moving_to text REFERENCES plinth.clusters (name),
  -- The cluster a move left the tenant's old (read-only) database on, until `plinth tenant cleanup`.
  ADD COLUMN previous_cluster text REFERENCES plinth.clusters (name);

REVOKE ALL ON plinth.clusters FROM PUBLIC;
-- Each service reads its own runtime template only (the admin template is the administrator's).
GRANT SELECT (name, state, url_template) ON plinth.clusters TO authenticator;
GRANT SELECT (name, state, chat_url_template) ON plinth.clusters TO chat_authenticator;

-- Marks `plinth tenant move` writes into the tenant's database once its fence is up: the last commit
-- there, so that its arrival on the target proves every earlier commit has been applied too.
CREATE TABLE plinth.move_marks (
  token text PRIMARY KEY,
  marked_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON plinth.move_marks FROM PUBLIC;
