-- Managed schema (spec §4.4 sys functions, §2.5–2.7): business tables, their read views and UI
-- metadata, permissions for staff/member/anon, custom views, and apps. Every function here is
-- SECURITY DEFINER for owner and admin only; identifiers are validated and always quoted with
-- format('%I'), values with format('%L'): nothing from a caller is spliced into SQL as text,
-- except a custom view's SELECT, which is checked to be a single statement first.

-- ---------------------------------------------------------------------------------------------
-- Metadata

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
-- Introspection shows the settings (app_metadata of public): a change must reach its caches.
CREATE TRIGGER settings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sys.settings
FOR EACH STATEMENT EXECUTE FUNCTION sys.notify_catalog_changed();
-- Introspection runs as the caller and reads the UI metadata; what it shows is filtered by the
-- caller's privileges on the tables themselves.
GRANT SELECT ON sys.table_metadata, sys.column_metadata TO owner, admin, staff, member;

-- ---------------------------------------------------------------------------------------------
-- Helpers

-- Management is for owners and admins (and a database administrator, who has no app role).
CREATE FUNCTION sys.require_manager() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF current_setting('role') NOT IN ('owner', 'admin', 'none') THEN
    RAISE EXCEPTION 'only an owner or an admin may change the schema' USING ERRCODE = '42501';
  END IF;
END
$$;

-- The schema a call works in: the app of app.app_id (X-App-Schema), else public.
CREATE FUNCTION sys.current_schema_name() RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app_id text := nullif(current_setting('app.app_id', true), '');
  v_schema text;
BEGIN
  IF v_app_id IS NULL THEN
    RETURN 'public';
  END IF;
  SELECT schema_name INTO v_schema FROM sys.apps WHERE id = v_app_id::uuid;
  IF v_schema IS NULL THEN
    RAISE EXCEPTION 'the app of this request no longer exists' USING ERRCODE = 'P0001';
  END IF;
  RETURN v_schema;
END
$$;

-- Lower-case identifiers of at most 63 bytes, not reserved, not in Plinth's or PostgreSQL's namespace.
CREATE FUNCTION sys.check_name(p_name text, p_what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]*$' THEN
    RAISE EXCEPTION '% name % must start with a lower-case letter and contain only a-z, 0-9 and _', p_what, coalesce(quote_literal(p_name), 'null')
      USING ERRCODE = 'P0001';
  END IF;
  IF octet_length(p_name) > 63 THEN
    RAISE EXCEPTION '% name % is longer than 63 bytes', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF p_name = 'sys' OR p_name LIKE 'sys\_%' OR p_name LIKE 'pg\_%' THEN
    RAISE EXCEPTION '% name % may not be sys or start with sys_ or pg_', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT FROM pg_get_keywords() WHERE word = p_name AND catcode IN ('R', 'T')) THEN
    RAISE EXCEPTION '% name % is a reserved word', p_what, quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  RETURN p_name;
END
$$;

-- Tells every service to drop what it cached about the catalog.
CREATE FUNCTION sys.catalog_changed() RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_notify('plinth_catalog', 'schema');
$$;

-- The SQL type and default display type of each column-spec type.
CREATE FUNCTION sys.column_type_sql(p_type text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE p_type
    WHEN 'text' THEN 'text'
    WHEN 'integer' THEN 'integer'
    WHEN 'bigint' THEN 'bigint'
    WHEN 'numeric' THEN 'numeric'
    WHEN 'currency' THEN 'numeric(14,2)'
    WHEN 'boolean' THEN 'boolean'
    WHEN 'date' THEN 'date'
    WHEN 'timestamp' THEN 'timestamptz'
    WHEN 'uuid' THEN 'uuid'
    WHEN 'json' THEN 'jsonb'
    WHEN 'email' THEN 'text'
    WHEN 'url' THEN 'text'
    WHEN 'choice' THEN 'text'
    WHEN 'reference' THEN 'uuid'
  END;
$$;

CREATE FUNCTION sys.default_display_type(p_type text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE p_type
    WHEN 'integer' THEN 'number'
    WHEN 'bigint' THEN 'number'
    WHEN 'numeric' THEN 'number'
    WHEN 'timestamp' THEN 'datetime'
    WHEN 'uuid' THEN 'text'
    ELSE p_type
  END;
$$;

-- The CHECK that gives email, url and choice columns their meaning (NULL when the type has none).
CREATE FUNCTION sys.column_kind_check(p_column text, p_type text, p_options jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_values text;
BEGIN
  CASE p_type
    WHEN 'email' THEN
      RETURN format('%I ~ %L', p_column, '^[^@\s]+@[^@\s]+\.[^@\s]+$');
    WHEN 'url' THEN
      RETURN format('%I ~* %L', p_column, '^https?://\S+$');
    WHEN 'choice' THEN
      IF p_options IS NULL OR jsonb_typeof(p_options) <> 'array' OR jsonb_array_length(p_options) = 0 THEN
        RAISE EXCEPTION 'choice column % needs options: [{"value": ..., "label": ..., "color": ...}]', p_column USING ERRCODE = 'P0001';
      END IF;
      SELECT string_agg(format('%L', o ->> 'value'), ', ') INTO v_values
      FROM jsonb_array_elements(p_options) o;
      IF EXISTS (SELECT FROM jsonb_array_elements(p_options) o WHERE coalesce(o ->> 'value', '') = '') THEN
        RAISE EXCEPTION 'every option of choice column % needs a non-empty value', p_column USING ERRCODE = 'P0001';
      END IF;
      RETURN format('%I IN (%s)', p_column, v_values);
    ELSE
      RETURN NULL;
  END CASE;
END
$$;

-- A managed table of the current schema, or a clear error.
CREATE FUNCTION sys.require_managed_table(p_schema text, p_table text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM sys.table_metadata WHERE schema_name = p_schema AND table_name = p_table) THEN
    RAISE EXCEPTION 'no managed table % in schema %', quote_literal(coalesce(p_table, 'null')), p_schema USING ERRCODE = 'P0001';
  END IF;
END
$$;

-- Adds one column from its spec: {"name", "type", "required", "unique", "default", "label",
-- "display_type", "options", "references"}.
CREATE FUNCTION sys.add_column(p_schema text, p_table text, p_spec jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_name text := sys.check_name(p_spec ->> 'name', 'column');
  v_type text := coalesce(p_spec ->> 'type', 'text');
  v_sql_type text := sys.column_type_sql(v_type);
  v_check text;
  v_reference text := p_spec ->> 'references';
  v_definition text;
  v_position integer;
BEGIN
  IF jsonb_typeof(p_spec) <> 'object' THEN
    RAISE EXCEPTION 'each column must be an object with at least a name' USING ERRCODE = 'P0001';
  END IF;
  IF v_name IN ('id', 'created_at', 'updated_at', 'created_by') THEN
    RAISE EXCEPTION 'column % is added to every managed table by Plinth', v_name USING ERRCODE = 'P0001';
  END IF;
  IF v_sql_type IS NULL THEN
    RAISE EXCEPTION 'unknown column type % (text, integer, bigint, numeric, currency, boolean, date, timestamp, uuid, json, email, url, choice, reference)',
      quote_literal(v_type) USING ERRCODE = 'P0001';
  END IF;
  v_definition := format('ADD COLUMN %I %s', v_name, v_sql_type);
  IF (p_spec ->> 'required')::boolean THEN
    v_definition := v_definition || ' NOT NULL';
  END IF;
  IF p_spec ? 'default' AND jsonb_typeof(p_spec -> 'default') <> 'null' THEN
    v_definition := v_definition || format(' DEFAULT %L::%s', p_spec ->> 'default', v_sql_type);
  END IF;
  IF (p_spec ->> 'unique')::boolean THEN
    v_definition := v_definition || ' UNIQUE';
  END IF;
  v_check := sys.column_kind_check(v_name, v_type, p_spec -> 'options');
  IF v_check IS NOT NULL THEN
    v_definition := v_definition || format(' CONSTRAINT %I CHECK (%s)', v_name || '_kind', v_check);
  END IF;
  IF v_type = 'reference' THEN
    PERFORM sys.check_name(v_reference, 'referenced table');
    PERFORM sys.require_managed_table(p_schema, v_reference);
    v_definition := v_definition || format(' CONSTRAINT %I REFERENCES %I.%I (id) ON DELETE RESTRICT', v_name || '_ref', p_schema, v_reference);
  ELSIF v_reference IS NOT NULL THEN
    RAISE EXCEPTION 'only reference columns take "references"' USING ERRCODE = 'P0001';
  END IF;
  EXECUTE format('ALTER TABLE %I.%I %s', p_schema, p_table, v_definition);
  SELECT coalesce(max(position), 0) + 1 INTO v_position FROM sys.column_metadata WHERE schema_name = p_schema AND table_name = p_table;
  INSERT INTO sys.column_metadata (schema_name, table_name, column_name, column_type, display_type, label, options, reference_table, position)
  VALUES (p_schema, p_table, v_name, v_type, coalesce(p_spec ->> 'display_type', sys.default_display_type(v_type)), p_spec ->> 'label',
    CASE WHEN v_type = 'choice' THEN p_spec -> 'options' END, CASE WHEN v_type = 'reference' THEN v_reference END, v_position);
END
$$;

-- Policies and grants of a managed table, rewritten from sys.table_permissions (idempotent).
CREATE FUNCTION sys.apply_permissions(p_schema text, p_table text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_policy record;
  v_perm record;
  v_own constant text := 'created_by = nullif(current_setting(''app.user_id'', true), '''')::uuid';
  v_view text := p_table || '_v';
BEGIN
  FOR v_policy IN SELECT policyname FROM pg_policies WHERE schemaname = p_schema AND tablename = p_table LOOP
    EXECUTE format('DROP POLICY %I ON %I.%I', v_policy.policyname, p_schema, p_table);
  END LOOP;
  EXECUTE format('REVOKE ALL ON %I.%I FROM staff, member, anon', p_schema, p_table);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.%I TO owner, admin', p_schema, p_table);
  EXECUTE format('CREATE POLICY managers ON %I.%I FOR ALL TO owner, admin USING (true) WITH CHECK (true)', p_schema, p_table);
  IF to_regclass(format('%I.%I', p_schema, v_view)) IS NOT NULL THEN
    EXECUTE format('REVOKE ALL ON %I.%I FROM staff, member, anon', p_schema, v_view);
    EXECUTE format('GRANT SELECT ON %I.%I TO owner, admin', p_schema, v_view);
  END IF;
  FOR v_perm IN SELECT * FROM sys.table_permissions WHERE schema_name = p_schema AND table_name = p_table LOOP
    IF v_perm.read <> 'none' THEN
      EXECUTE format('GRANT SELECT ON %I.%I TO %I', p_schema, p_table, v_perm.role);
      EXECUTE format('CREATE POLICY %I ON %I.%I FOR SELECT TO %I USING (%s)', v_perm.role || '_read', p_schema, p_table, v_perm.role,
        CASE v_perm.read WHEN 'all' THEN 'true' ELSE v_own END);
      IF to_regclass(format('%I.%I', p_schema, v_view)) IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON %I.%I TO %I', p_schema, v_view, v_perm.role);
      END IF;
    END IF;
    IF v_perm.write <> 'none' THEN
      EXECUTE format('GRANT INSERT, UPDATE ON %I.%I TO %I', p_schema, p_table, v_perm.role);
      EXECUTE format('CREATE POLICY %I ON %I.%I FOR INSERT TO %I WITH CHECK (%s)', v_perm.role || '_insert', p_schema, p_table, v_perm.role,
        CASE v_perm.write WHEN 'all' THEN 'true' ELSE v_own END);
      EXECUTE format('CREATE POLICY %I ON %I.%I FOR UPDATE TO %I USING (%s) WITH CHECK (%s)', v_perm.role || '_update', p_schema, p_table, v_perm.role,
        CASE v_perm.write WHEN 'all' THEN 'true' ELSE v_own END, CASE v_perm.write WHEN 'all' THEN 'true' ELSE v_own END);
    END IF;
    IF v_perm.delete <> 'none' THEN
      EXECUTE format('GRANT DELETE ON %I.%I TO %I', p_schema, p_table, v_perm.role);
      EXECUTE format('CREATE POLICY %I ON %I.%I FOR DELETE TO %I USING (%s)', v_perm.role || '_delete', p_schema, p_table, v_perm.role,
        CASE v_perm.delete WHEN 'all' THEN 'true' ELSE v_own END);
    END IF;
  END LOOP;
END
$$;

-- The read view `<table>_v`: every column, plus `<column>_display` for each reference, built from
-- the referenced table's display columns (its first text column, or its id, when none are set).
CREATE FUNCTION sys.rebuild_view(p_schema text, p_table text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_ref record;
  v_select text := 't.*';
  v_from text := format('%I.%I AS t', p_schema, p_table);
  v_display text[];
  v_alias text;
BEGIN
  EXECUTE format('DROP VIEW IF EXISTS %I.%I', p_schema, p_table || '_v');
  FOR v_ref IN
    SELECT column_name, reference_table FROM sys.column_metadata
    WHERE schema_name = p_schema AND table_name = p_table AND column_type = 'reference'
    ORDER BY position
  LOOP
    SELECT display_columns INTO v_display FROM sys.table_metadata WHERE schema_name = p_schema AND table_name = v_ref.reference_table;
    IF v_display IS NULL OR cardinality(v_display) = 0 THEN
      SELECT ARRAY[coalesce(
        (SELECT column_name FROM sys.column_metadata
         WHERE schema_name = p_schema AND table_name = v_ref.reference_table AND column_type IN ('text', 'email', 'choice')
         ORDER BY position LIMIT 1),
        'id')] INTO v_display;
    END IF;
    v_alias := v_ref.column_name || '__ref';
    v_select := v_select || format(', concat_ws(%L, %s) AS %I', ' ',
      (SELECT string_agg(format('%I.%I', v_alias, d), ', ') FROM unnest(v_display) d), v_ref.column_name || '_display');
    v_from := v_from || format(' LEFT JOIN %I.%I AS %I ON %I.id = t.%I', p_schema, v_ref.reference_table, v_alias, v_alias, v_ref.column_name);
  END LOOP;
  EXECUTE format('CREATE VIEW %I.%I WITH (security_invoker = true) AS SELECT %s FROM %s', p_schema, p_table || '_v', v_select, v_from);
  PERFORM sys.apply_permissions(p_schema, p_table);
END
$$;

-- The managed tables whose read views show p_table's display columns (through a reference).
CREATE FUNCTION sys.referencing_tables(p_schema text, p_table text) RETURNS SETOF text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT DISTINCT table_name FROM sys.column_metadata
  WHERE schema_name = p_schema AND column_type = 'reference' AND reference_table = p_table AND table_name <> p_table;
$$;

-- Those views are dropped while p_table changes, and rebuilt after.
CREATE FUNCTION sys.drop_referencing_views(p_schema text, p_table text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_table text;
BEGIN
  FOR v_table IN SELECT sys.referencing_tables(p_schema, p_table) LOOP
    EXECUTE format('DROP VIEW IF EXISTS %I.%I', p_schema, v_table || '_v');
  END LOOP;
END
$$;

CREATE FUNCTION sys.rebuild_referencing_views(p_schema text, p_table text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_table text;
BEGIN
  FOR v_table IN SELECT sys.referencing_tables(p_schema, p_table) LOOP
    PERFORM sys.rebuild_view(p_schema, v_table);
  END LOOP;
END
$$;

-- Row triggers every managed table gets.
CREATE FUNCTION sys.touch_updated_at() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  NEW.updated_at := now();
  RETURN NEW;
END
$$;

-- Only owners and admins may write rows in someone else's name.
CREATE FUNCTION sys.guard_created_by() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_user uuid := nullif(current_setting('app.user_id', true), '')::uuid;
BEGIN
  IF current_setting('role') IN ('owner', 'admin', 'none') THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'INSERT' AND NEW.created_by IS DISTINCT FROM v_user THEN
    RAISE EXCEPTION 'created_by must be the current user' USING ERRCODE = '42501';
  END IF;
  IF TG_OP = 'UPDATE' AND NEW.created_by IS DISTINCT FROM OLD.created_by THEN
    RAISE EXCEPTION 'created_by cannot be changed' USING ERRCODE = '42501';
  END IF;
  RETURN NEW;
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Tables

CREATE FUNCTION sys.create_table(p_name text, p_columns jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
  v_column jsonb;
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.check_name(p_name, 'table');
  IF p_name LIKE '%\_v' THEN
    RAISE EXCEPTION 'table name % may not end in _v (that is its read view)', quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF octet_length(p_name) > 61 THEN
    RAISE EXCEPTION 'table name % is longer than 61 bytes (its read view adds _v)', quote_literal(p_name) USING ERRCODE = 'P0001';
  END IF;
  IF to_regclass(format('%I.%I', v_schema, p_name)) IS NOT NULL OR to_regclass(format('%I.%I', v_schema, p_name || '_v')) IS NOT NULL THEN
    RAISE EXCEPTION 'a table or view named % already exists', quote_literal(p_name) USING ERRCODE = '42P07';
  END IF;
  IF p_columns IS NULL OR jsonb_typeof(p_columns) <> 'array' THEN
    RAISE EXCEPTION 'columns must be a JSON array of column specs' USING ERRCODE = 'P0001';
  END IF;
  EXECUTE format($ddl$
    CREATE TABLE %I.%I (
      id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      created_by uuid DEFAULT nullif(current_setting('app.user_id', true), '')::uuid
    )$ddl$, v_schema, p_name);
  EXECUTE format('ALTER TABLE %I.%I ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY', v_schema, p_name);
  EXECUTE format('CREATE TRIGGER touch_updated_at BEFORE UPDATE ON %I.%I FOR EACH ROW EXECUTE FUNCTION sys.touch_updated_at()', v_schema, p_name);
  EXECUTE format('CREATE TRIGGER guard_created_by BEFORE INSERT OR UPDATE ON %I.%I FOR EACH ROW EXECUTE FUNCTION sys.guard_created_by()', v_schema, p_name);
  INSERT INTO sys.table_metadata (schema_name, table_name) VALUES (v_schema, p_name);
  FOR v_column IN SELECT * FROM jsonb_array_elements(p_columns) LOOP
    PERFORM sys.add_column(v_schema, p_name, v_column);
  END LOOP;
  -- Defaults: staff reads and writes everything, members only their own rows, anon nothing.
  INSERT INTO sys.table_permissions (schema_name, table_name, role, read, write, delete) VALUES
    (v_schema, p_name, 'staff', 'all', 'all', 'all'),
    (v_schema, p_name, 'member', 'own', 'own', 'own'),
    (v_schema, p_name, 'anon', 'none', 'none', 'none');
  PERFORM sys.rebuild_view(v_schema, p_name);
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('schema', v_schema, 'table', p_name, 'view', p_name || '_v');
END
$$;

-- Operations: add_column {column}, drop_column {name}, rename_column {name, to},
-- change_type {name, type, options?}, set_required {name, required}, set_default {name, default},
-- set_display {name, label?, display_type?, options?}, set_display_columns {columns},
-- add_reference {name, references}, drop_reference {name}.
CREATE FUNCTION sys.alter_table(p_name text, p_operations jsonb) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
  v_op jsonb;
  v_column text;
  v_meta sys.column_metadata;
  v_type text;
  v_sql_type text;
  v_check text;
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.require_managed_table(v_schema, p_name);
  IF p_operations IS NULL OR jsonb_typeof(p_operations) <> 'array' THEN
    RAISE EXCEPTION 'operations must be a JSON array' USING ERRCODE = 'P0001';
  END IF;
  -- Read views depend on the columns (this table's, and the display columns other tables' views
  -- show); they are rebuilt once all operations are done.
  EXECUTE format('DROP VIEW IF EXISTS %I.%I', v_schema, p_name || '_v');
  PERFORM sys.drop_referencing_views(v_schema, p_name);
  FOR v_op IN SELECT * FROM jsonb_array_elements(p_operations) LOOP
    IF v_op ->> 'op' = 'add_column' THEN
      PERFORM sys.add_column(v_schema, p_name, v_op -> 'column');
      CONTINUE;
    END IF;
    IF v_op ->> 'op' = 'set_display_columns' THEN
      IF coalesce(jsonb_typeof(v_op -> 'columns'), 'null') <> 'array' OR EXISTS (
        SELECT FROM jsonb_array_elements_text(v_op -> 'columns') c
        WHERE c NOT IN ('id') AND NOT EXISTS (
          SELECT FROM sys.column_metadata m WHERE m.schema_name = v_schema AND m.table_name = p_name AND m.column_name = c)
      ) THEN
        RAISE EXCEPTION 'display columns must be columns of %', p_name USING ERRCODE = 'P0001';
      END IF;
      UPDATE sys.table_metadata SET display_columns = ARRAY(SELECT jsonb_array_elements_text(v_op -> 'columns'))
      WHERE schema_name = v_schema AND table_name = p_name;
      CONTINUE;
    END IF;
    v_column := v_op ->> 'name';
    SELECT * INTO v_meta FROM sys.column_metadata WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
    IF v_meta.column_name IS NULL THEN
      RAISE EXCEPTION 'operation % needs "name": a column of %', coalesce(v_op ->> 'op', 'null'), p_name USING ERRCODE = 'P0001';
    END IF;
    CASE v_op ->> 'op'
      WHEN 'drop_column' THEN
        EXECUTE format('ALTER TABLE %I.%I DROP COLUMN %I', v_schema, p_name, v_column);
        DELETE FROM sys.column_metadata WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
        UPDATE sys.table_metadata SET display_columns = array_remove(display_columns, v_column)
        WHERE schema_name = v_schema AND table_name = p_name;
      WHEN 'rename_column' THEN
        PERFORM sys.check_name(v_op ->> 'to', 'column');
        IF v_op ->> 'to' IN ('id', 'created_at', 'updated_at', 'created_by') THEN
          RAISE EXCEPTION 'column % is reserved by Plinth', v_op ->> 'to' USING ERRCODE = 'P0001';
        END IF;
        EXECUTE format('ALTER TABLE %I.%I RENAME COLUMN %I TO %I', v_schema, p_name, v_column, v_op ->> 'to');
        IF v_meta.column_type IN ('email', 'url', 'choice') THEN
          EXECUTE format('ALTER TABLE %I.%I RENAME CONSTRAINT %I TO %I', v_schema, p_name, v_column || '_kind', (v_op ->> 'to') || '_kind');
        ELSIF v_meta.column_type = 'reference' THEN
          EXECUTE format('ALTER TABLE %I.%I RENAME CONSTRAINT %I TO %I', v_schema, p_name, v_column || '_ref', (v_op ->> 'to') || '_ref');
        END IF;
        UPDATE sys.column_metadata SET column_name = v_op ->> 'to'
        WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
        UPDATE sys.table_metadata SET display_columns = array_replace(display_columns, v_column, v_op ->> 'to')
        WHERE schema_name = v_schema AND table_name = p_name;
      WHEN 'change_type' THEN
        v_type := v_op ->> 'type';
        v_sql_type := sys.column_type_sql(v_type);
        IF v_sql_type IS NULL OR v_type = 'reference' THEN
          RAISE EXCEPTION 'cannot change % to type % (use add_reference for references)', v_column, coalesce(quote_literal(v_type), 'null')
            USING ERRCODE = 'P0001';
        END IF;
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I, DROP CONSTRAINT IF EXISTS %I', v_schema, p_name, v_column || '_kind', v_column || '_ref');
        EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I TYPE %s USING %I::%s', v_schema, p_name, v_column, v_sql_type, v_column, v_sql_type);
        v_check := sys.column_kind_check(v_column, v_type, coalesce(v_op -> 'options', v_meta.options));
        IF v_check IS NOT NULL THEN
          EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I CHECK (%s)', v_schema, p_name, v_column || '_kind', v_check);
        END IF;
        UPDATE sys.column_metadata
        SET column_type = v_type, display_type = sys.default_display_type(v_type), reference_table = NULL,
          options = CASE WHEN v_type = 'choice' THEN coalesce(v_op -> 'options', v_meta.options) END
        WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
      WHEN 'set_required' THEN
        EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I %s NOT NULL', v_schema, p_name, v_column,
          CASE WHEN (v_op ->> 'required')::boolean THEN 'SET' ELSE 'DROP' END);
      WHEN 'set_default' THEN
        IF v_op ? 'default' AND jsonb_typeof(v_op -> 'default') <> 'null' THEN
          EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I SET DEFAULT %L::%s', v_schema, p_name, v_column, v_op ->> 'default',
            sys.column_type_sql(v_meta.column_type));
        ELSE
          EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I DROP DEFAULT', v_schema, p_name, v_column);
        END IF;
      WHEN 'set_display' THEN
        IF v_op ? 'options' AND v_meta.column_type = 'choice' THEN
          EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I', v_schema, p_name, v_column || '_kind');
          EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I CHECK (%s)', v_schema, p_name, v_column || '_kind',
            sys.column_kind_check(v_column, 'choice', v_op -> 'options'));
        END IF;
        UPDATE sys.column_metadata
        SET label = CASE WHEN v_op ? 'label' THEN v_op ->> 'label' ELSE label END,
          display_type = coalesce(v_op ->> 'display_type', display_type),
          options = CASE WHEN v_op ? 'options' AND column_type = 'choice' THEN v_op -> 'options' ELSE options END
        WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
      WHEN 'add_reference' THEN
        PERFORM sys.check_name(v_op ->> 'references', 'referenced table');
        PERFORM sys.require_managed_table(v_schema, v_op ->> 'references');
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I', v_schema, p_name, v_column || '_kind');
        IF v_meta.column_type <> 'uuid' AND v_meta.column_type <> 'reference' THEN
          EXECUTE format('ALTER TABLE %I.%I ALTER COLUMN %I TYPE uuid USING %I::uuid', v_schema, p_name, v_column, v_column);
        END IF;
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I', v_schema, p_name, v_column || '_ref');
        EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I FOREIGN KEY (%I) REFERENCES %I.%I (id) ON DELETE RESTRICT',
          v_schema, p_name, v_column || '_ref', v_column, v_schema, v_op ->> 'references');
        UPDATE sys.column_metadata SET column_type = 'reference', display_type = 'reference', reference_table = v_op ->> 'references', options = NULL
        WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
      WHEN 'drop_reference' THEN
        EXECUTE format('ALTER TABLE %I.%I DROP CONSTRAINT IF EXISTS %I', v_schema, p_name, v_column || '_ref');
        UPDATE sys.column_metadata SET column_type = 'uuid', display_type = 'text', reference_table = NULL
        WHERE schema_name = v_schema AND table_name = p_name AND column_name = v_column;
      ELSE
        RAISE EXCEPTION 'unknown operation % (add_column, drop_column, rename_column, change_type, set_required, set_default, set_display, set_display_columns, add_reference, drop_reference)',
          coalesce(quote_literal(v_op ->> 'op'), 'null') USING ERRCODE = 'P0001';
    END CASE;
  END LOOP;
  PERFORM sys.rebuild_view(v_schema, p_name);
  PERFORM sys.rebuild_referencing_views(v_schema, p_name);
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('schema', v_schema, 'table', p_name, 'view', p_name || '_v');
END
$$;

-- Restrictive: a table other tables point at stays, and the error names them.
CREATE FUNCTION sys.drop_table(p_name text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
  v_dependents text;
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.require_managed_table(v_schema, p_name);
  SELECT string_agg(DISTINCT c.conrelid::regclass::text, ', ') INTO v_dependents
  FROM pg_constraint c
  WHERE c.contype = 'f' AND c.confrelid = format('%I.%I', v_schema, p_name)::regclass AND c.conrelid <> c.confrelid;
  IF v_dependents IS NOT NULL THEN
    RAISE EXCEPTION 'cannot drop table %: referenced by %', p_name, v_dependents USING ERRCODE = '2BP01',
      HINT = 'drop those references (or tables) first';
  END IF;
  EXECUTE format('DROP VIEW IF EXISTS %I.%I', v_schema, p_name || '_v');
  EXECUTE format('DROP TABLE %I.%I', v_schema, p_name);
  DELETE FROM sys.table_metadata WHERE schema_name = v_schema AND table_name = p_name;
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('schema', v_schema, 'table', p_name, 'view', p_name || '_v');
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Custom views

-- One SELECT, checked here and not only by the SQL guard: without a ';' the text cannot hold a
-- second statement, and CREATE VIEW itself accepts only a query without data-modifying parts.
CREATE FUNCTION sys.create_view(p_name text, p_sql text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.check_name(p_name, 'view');
  IF p_sql IS NULL OR btrim(p_sql) = '' THEN
    RAISE EXCEPTION 'a view needs a SELECT' USING ERRCODE = 'P0001';
  END IF;
  IF position(';' IN p_sql) > 0 THEN
    RAISE EXCEPTION 'a view is exactly one SELECT, without ";"' USING ERRCODE = 'P0001';
  END IF;
  IF length(p_sql) > 100000 THEN
    RAISE EXCEPTION 'a view definition may not exceed 100000 characters' USING ERRCODE = 'P0001';
  END IF;
  IF to_regclass(format('%I.%I', v_schema, p_name)) IS NOT NULL THEN
    RAISE EXCEPTION 'a table or view named % already exists', quote_literal(p_name) USING ERRCODE = '42P07';
  END IF;
  -- The query resolves names in the app's schema first, then public (as requests do).
  PERFORM set_config('search_path', format('%I, public, pg_catalog', v_schema), true);
  EXECUTE format('CREATE VIEW %I.%I WITH (security_invoker = true) AS %s', v_schema, p_name, p_sql);
  PERFORM set_config('search_path', 'pg_catalog, pg_temp', true);
  IF (SELECT relkind FROM pg_class WHERE oid = format('%I.%I', v_schema, p_name)::regclass) <> 'v' THEN
    RAISE EXCEPTION 'a view is exactly one SELECT' USING ERRCODE = 'P0001';
  END IF;
  EXECUTE format('GRANT SELECT ON %I.%I TO owner, admin, staff, member', v_schema, p_name);
  INSERT INTO sys.managed_views (schema_name, view_name, definition) VALUES (v_schema, p_name, p_sql);
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('schema', v_schema, 'view', p_name);
END
$$;

CREATE FUNCTION sys.drop_view(p_name text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
BEGIN
  PERFORM sys.require_manager();
  IF NOT EXISTS (SELECT FROM sys.managed_views WHERE schema_name = v_schema AND view_name = p_name) THEN
    RAISE EXCEPTION 'no custom view % in schema % (read views go with their tables)', quote_literal(coalesce(p_name, 'null')), v_schema
      USING ERRCODE = 'P0001';
  END IF;
  EXECUTE format('DROP VIEW %I.%I', v_schema, p_name);
  DELETE FROM sys.managed_views WHERE schema_name = v_schema AND view_name = p_name;
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('schema', v_schema, 'view', p_name);
END
$$;

-- ---------------------------------------------------------------------------------------------
-- Permissions

CREATE FUNCTION sys.get_table_permissions()
RETURNS TABLE (table_name text, role text, read text, write text, delete text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM sys.require_manager();
  RETURN QUERY
  SELECT p.table_name, p.role, p.read, p.write, p.delete
  FROM sys.table_permissions p
  WHERE p.schema_name = sys.current_schema_name()
  ORDER BY p.table_name, array_position(ARRAY['staff', 'member', 'anon'], p.role);
END
$$;

-- Each of read/write/delete is 'all', 'own' (rows the user created) or 'none'.
CREATE FUNCTION sys.set_table_permissions(p_table text, p_role text, p_read text, p_write text, p_delete text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_schema text := sys.current_schema_name();
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.require_managed_table(v_schema, p_table);
  IF p_role IS NULL OR p_role NOT IN ('staff', 'member', 'anon') THEN
    RAISE EXCEPTION 'permissions are set for staff, member or anon, not %', coalesce(quote_literal(p_role), 'null') USING ERRCODE = 'P0001';
  END IF;
  IF p_read NOT IN ('all', 'own', 'none') OR p_write NOT IN ('all', 'own', 'none') OR p_delete NOT IN ('all', 'own', 'none')
    OR p_read IS NULL OR p_write IS NULL OR p_delete IS NULL THEN
    RAISE EXCEPTION 'read, write and delete are each all, own or none' USING ERRCODE = 'P0001';
  END IF;
  INSERT INTO sys.table_permissions (schema_name, table_name, role, read, write, delete)
  VALUES (v_schema, p_table, p_role, p_read, p_write, p_delete)
  ON CONFLICT (schema_name, table_name, role) DO UPDATE SET read = excluded.read, write = excluded.write, delete = excluded.delete;
  PERFORM sys.apply_permissions(v_schema, p_table);
  PERFORM sys.catalog_changed();
  RETURN jsonb_build_object('table', p_table, 'role', p_role, 'read', p_read, 'write', p_write, 'delete', p_delete);
END
$$;

-- Booleans read as all (true) or none (false).
CREATE FUNCTION sys.set_table_permissions(p_table text, p_role text, p_read boolean, p_write boolean, p_delete boolean)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT sys.set_table_permissions(p_table, p_role,
    CASE WHEN p_read THEN 'all' ELSE 'none' END,
    CASE WHEN p_write THEN 'all' ELSE 'none' END,
    CASE WHEN p_delete THEN 'all' ELSE 'none' END);
$$;

-- ---------------------------------------------------------------------------------------------
-- Apps

CREATE FUNCTION sys.app_json(p_app sys.apps) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object('id', p_app.id, 'schema_name', p_app.schema_name, 'display_name', p_app.display_name,
    'description', p_app.description, 'home_page', p_app.home_page, 'created_at', p_app.created_at, 'updated_at', p_app.updated_at);
$$;

CREATE FUNCTION sys.create_app(p_schema_name text, p_display_name text, p_description text DEFAULT '') RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app sys.apps;
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.check_name(p_schema_name, 'app schema');
  IF p_schema_name IN ('public', 'extensions', 'plinth', 'information_schema') THEN
    RAISE EXCEPTION 'app schema name % is taken', quote_literal(p_schema_name) USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT FROM pg_namespace WHERE nspname = p_schema_name) THEN
    RAISE EXCEPTION 'a schema named % already exists', quote_literal(p_schema_name) USING ERRCODE = '42P06';
  END IF;
  EXECUTE format('CREATE SCHEMA %I', p_schema_name);
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO owner, admin, staff, member, anon', p_schema_name);
  INSERT INTO sys.apps (schema_name, display_name, description)
  VALUES (p_schema_name, coalesce(nullif(p_display_name, ''), p_schema_name), coalesce(p_description, ''))
  RETURNING * INTO v_app;
  PERFORM sys.catalog_changed();
  RETURN sys.app_json(v_app);
END
$$;

CREATE FUNCTION sys.update_app(p_schema_name text, p_display_name text, p_description text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app sys.apps;
BEGIN
  PERFORM sys.require_manager();
  UPDATE sys.apps
  SET display_name = coalesce(nullif(p_display_name, ''), display_name), description = coalesce(p_description, description), updated_at = now()
  WHERE schema_name = p_schema_name
  RETURNING * INTO v_app;
  IF v_app.id IS NULL THEN
    RAISE EXCEPTION 'no app %', quote_literal(coalesce(p_schema_name, 'null')) USING ERRCODE = 'P0001';
  END IF;
  RETURN sys.app_json(v_app);
END
$$;

CREATE FUNCTION sys.rename_app(p_old_name text, p_new_name text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app sys.apps;
BEGIN
  PERFORM sys.require_manager();
  PERFORM sys.check_name(p_new_name, 'app schema');
  IF NOT EXISTS (SELECT FROM sys.apps WHERE schema_name = p_old_name) THEN
    RAISE EXCEPTION 'no app %', quote_literal(coalesce(p_old_name, 'null')) USING ERRCODE = 'P0001';
  END IF;
  IF EXISTS (SELECT FROM pg_namespace WHERE nspname = p_new_name) THEN
    RAISE EXCEPTION 'a schema named % already exists', quote_literal(p_new_name) USING ERRCODE = '42P06';
  END IF;
  EXECUTE format('ALTER SCHEMA %I RENAME TO %I', p_old_name, p_new_name);
  UPDATE sys.table_metadata SET schema_name = p_new_name WHERE schema_name = p_old_name;
  UPDATE sys.managed_views SET schema_name = p_new_name WHERE schema_name = p_old_name;
  UPDATE sys.pages SET schema_name = p_new_name WHERE schema_name = p_old_name;
  UPDATE sys.apps SET schema_name = p_new_name, updated_at = now() WHERE schema_name = p_old_name RETURNING * INTO v_app;
  RETURN sys.app_json(v_app);
END
$$;

CREATE FUNCTION sys.drop_app(p_schema_name text) RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_app sys.apps;
BEGIN
  PERFORM sys.require_manager();
  DELETE FROM sys.apps WHERE schema_name = p_schema_name RETURNING * INTO v_app;
  IF v_app.id IS NULL THEN
    RAISE EXCEPTION 'no app %', quote_literal(coalesce(p_schema_name, 'null')) USING ERRCODE = 'P0001';
  END IF;
  EXECUTE format('DROP SCHEMA %I CASCADE', p_schema_name);
  DELETE FROM sys.table_metadata WHERE schema_name = p_schema_name;
  -- The cascade also takes custom views elsewhere that read the app's tables.
  DELETE FROM sys.managed_views
  WHERE schema_name = p_schema_name OR to_regclass(format('%I.%I', schema_name, view_name)) IS NULL;
  DELETE FROM sys.pages WHERE schema_name = p_schema_name;
  RETURN sys.app_json(v_app);
END
$$;

CREATE FUNCTION sys.list_apps()
RETURNS TABLE (id uuid, schema_name text, display_name text, description text, home_page jsonb, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT a.id, a.schema_name, a.display_name, a.description, a.home_page, a.created_at, a.updated_at
  FROM sys.apps a ORDER BY a.display_name, a.schema_name;
$$;

-- ---------------------------------------------------------------------------------------------
-- Privileges: management for owner and admin, list_apps for every signed-in role.

REVOKE ALL ON FUNCTION
  sys.require_manager(), sys.current_schema_name(), sys.check_name(text, text), sys.catalog_changed(),
  sys.column_type_sql(text), sys.default_display_type(text), sys.column_kind_check(text, text, jsonb),
  sys.require_managed_table(text, text), sys.add_column(text, text, jsonb), sys.apply_permissions(text, text),
  sys.rebuild_view(text, text), sys.referencing_tables(text, text), sys.rebuild_referencing_views(text, text),
  sys.drop_referencing_views(text, text),
  sys.app_json(sys.apps),
  sys.create_table(text, jsonb), sys.alter_table(text, jsonb), sys.drop_table(text),
  sys.create_view(text, text), sys.drop_view(text),
  sys.get_table_permissions(), sys.set_table_permissions(text, text, text, text, text),
  sys.set_table_permissions(text, text, boolean, boolean, boolean),
  sys.create_app(text, text, text), sys.update_app(text, text, text), sys.rename_app(text, text),
  sys.drop_app(text), sys.list_apps()
FROM PUBLIC;

-- Trigger functions run as the writer of the row, so every writer needs them.
GRANT EXECUTE ON FUNCTION sys.touch_updated_at(), sys.guard_created_by() TO owner, admin, staff, member, anon;

GRANT EXECUTE ON FUNCTION
  sys.create_table(text, jsonb), sys.alter_table(text, jsonb), sys.drop_table(text),
  sys.create_view(text, text), sys.drop_view(text),
  sys.get_table_permissions(), sys.set_table_permissions(text, text, text, text, text),
  sys.set_table_permissions(text, text, boolean, boolean, boolean),
  sys.create_app(text, text, text), sys.update_app(text, text, text), sys.rename_app(text, text), sys.drop_app(text)
TO owner, admin;
GRANT EXECUTE ON FUNCTION sys.list_apps() TO owner, admin, staff, member;
