-- Managed schema (spec §4.4 sys functions, §2.5–2.7): the tables that hold the UI metadata of
-- business tables, the permissions of staff/member/anon, custom views, pages and settings. The
-- functions that manage them are in sql/sys/ (02_management.sql to 06_apps.sql).

CREATE TABLE sys.table_metadata (
  schema_name text NOT NULL,
  table_name text NOT NULL,
  display_columns text[] NOT NULL DEFAULT '{}',
  description text NOT NULL DEFAULT '',
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (schema_name, table_name)
);

CREATE TABLE sys.column_metadata (
  schema_name text NOT NULL,
  table_name text NOT NULL,
  column_name text NOT NULL,
  -- The column-spec type (text, currency, choice, reference, ...), not the SQL type.
  column_type text NOT NULL,
  display_type text NOT NULL,
  label text,
  options jsonb,
  reference_table text,
  position integer NOT NULL,
  PRIMARY KEY (schema_name, table_name, column_name),
  FOREIGN KEY (schema_name, table_name) REFERENCES sys.table_metadata ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE TABLE sys.table_permissions (
  schema_name text NOT NULL,
  table_name text NOT NULL,
  role text NOT NULL CHECK (role IN ('staff', 'member', 'anon')),
  read text NOT NULL CHECK (read IN ('all', 'own', 'none')),
  write text NOT NULL CHECK (write IN ('all', 'own', 'none')),
  delete text NOT NULL CHECK (delete IN ('all', 'own', 'none')),
  PRIMARY KEY (schema_name, table_name, role),
  FOREIGN KEY (schema_name, table_name) REFERENCES sys.table_metadata ON UPDATE CASCADE ON DELETE CASCADE
);

CREATE TABLE sys.managed_views (
  schema_name text NOT NULL,
  view_name text NOT NULL,
  definition text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (schema_name, view_name)
);

-- Custom pages belong to an app (or to public); their functions and events come with live pages.
CREATE TABLE sys.pages (
  schema_name text NOT NULL,
  slug text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  title text NOT NULL DEFAULT '' CHECK (length(title) <= 200),
  source text NOT NULL DEFAULT '' CHECK (length(source) <= 1000000),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  updated_by uuid,
  PRIMARY KEY (schema_name, slug)
);

-- Which page each role lands on, per app (and for public, the app with no schema).
ALTER TABLE sys.apps ADD COLUMN home_page jsonb NOT NULL DEFAULT '{}';
CREATE TABLE sys.settings (
  key text PRIMARY KEY,
  value jsonb NOT NULL
);

REVOKE ALL ON sys.table_metadata, sys.column_metadata, sys.table_permissions, sys.managed_views, sys.pages, sys.settings FROM PUBLIC;

-- Introspection runs as the caller and reads the UI metadata; what it shows is filtered by the
-- caller's privileges on the tables themselves.
GRANT SELECT ON sys.table_metadata, sys.column_metadata TO owner, admin, staff, member;
