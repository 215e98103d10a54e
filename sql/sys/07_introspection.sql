-- Introspection (spec §2.5, POST /): what a client needs to draw its screens, as the caller sees
-- it. Both functions run with the caller's rights (SECURITY INVOKER): a relation appears only if
-- the caller may select from it or write to it, and row counts pass through row-level security.

-- Everything but the row counts: the same for every user of a role, so the service caches it.
CREATE OR REPLACE FUNCTION sys.introspect() RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
WITH app AS (
  SELECT a.* FROM sys.list_apps() a
  WHERE a.id::text = nullif(current_setting('app.app_id', true), '')
),
schemas AS (
  SELECT 'public'::text AS schema_name
  UNION
  SELECT schema_name FROM app
),
rels AS (
  SELECT c.oid, n.nspname AS schema_name, c.relname AS table_name, c.relkind,
    has_table_privilege(c.oid, 'SELECT') AS can_select,
    has_table_privilege(c.oid, 'INSERT') AS can_insert,
    has_table_privilege(c.oid, 'UPDATE') AS can_update,
    has_table_privilege(c.oid, 'DELETE') AS can_delete
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname IN (SELECT schema_name FROM schemas)
    AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
),
visible AS (
  SELECT r.*,
    EXISTS (SELECT FROM sys.table_metadata m WHERE m.schema_name = r.schema_name AND m.table_name = r.table_name) AS is_managed,
    CASE
      -- A read view <table>_v: read here, write to the base table.
      WHEN r.relkind = 'v' AND r.table_name LIKE '%\_v' AND EXISTS (
        SELECT FROM pg_class b WHERE b.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = r.schema_name)
          AND b.relname = left(r.table_name, -2) AND b.relkind IN ('r', 'p')
      ) THEN left(r.table_name, -2)
      -- A base table with a read view: its view is what clients show.
      WHEN r.relkind IN ('r', 'p') AND EXISTS (
        SELECT FROM pg_class v WHERE v.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = r.schema_name)
          AND v.relname = r.table_name || '_v' AND v.relkind = 'v'
      ) THEN NULL
      -- A base table on its own is written directly.
      WHEN r.relkind IN ('r', 'p') THEN r.table_name
      ELSE NULL
    END AS write_target
  FROM rels r
  WHERE r.can_select OR r.can_insert OR r.can_update OR r.can_delete
),
columns AS (
  SELECT a.attrelid AS oid,
    jsonb_agg(jsonb_build_object(
      'name', a.attname,
      'type', format_type(a.atttypid, a.atttypmod),
      'nullable', NOT a.attnotnull,
      'has_default', a.atthasdef OR a.attidentity <> '',
      'default', pg_get_expr(d.adbin, d.adrelid),
      'position', a.attnum,
      'is_generated', a.attgenerated <> '',
      'can_select', has_column_privilege(a.attrelid, a.attnum, 'SELECT'),
      'can_insert', has_column_privilege(a.attrelid, a.attnum, 'INSERT'),
      'can_update', has_column_privilege(a.attrelid, a.attnum, 'UPDATE')
    ) ORDER BY a.attnum) AS cols
  FROM pg_attribute a
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE a.attrelid IN (SELECT oid FROM visible) AND a.attnum > 0 AND NOT a.attisdropped
  GROUP BY a.attrelid
),
keys AS (
  SELECT jsonb_agg(jsonb_build_object(
    'constraint_name', k.conname,
    'constraint_type', CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'f' THEN 'FOREIGN KEY' ELSE 'UNIQUE' END,
    'source_schema', v.schema_name,
    'source_table', v.table_name,
    'source_columns', (SELECT jsonb_agg(a.attname ORDER BY u.ord) FROM unnest(k.conkey) WITH ORDINALITY u(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum),
    'target_schema', tn.nspname,
    'target_table', t.relname,
    'target_columns', (SELECT jsonb_agg(a.attname ORDER BY u.ord) FROM unnest(k.confkey) WITH ORDINALITY u(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.attnum)
  ) ORDER BY v.table_name, k.contype, k.conname) AS items
  FROM pg_constraint k
  JOIN visible v ON v.oid = k.conrelid
  LEFT JOIN pg_class t ON t.oid = k.confrelid
  LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace
  WHERE k.contype IN ('p', 'f', 'u')
)
SELECT jsonb_build_object(
  'relations', coalesce((
    SELECT jsonb_agg(jsonb_build_object(
      'table_name', v.table_name,
      'schema_name', v.schema_name,
      'kind', CASE WHEN v.relkind IN ('r', 'p') THEN 'table' WHEN v.relkind = 'm' THEN 'materialized_view'
        WHEN v.relkind = 'f' THEN 'foreign_table' ELSE 'view' END,
      'cols', coalesce(c.cols, '[]'::jsonb),
      'can_select', v.can_select,
      'can_insert', v.can_insert,
      'can_update', v.can_update,
      'can_delete', v.can_delete,
      'write_target', v.write_target,
      'is_managed', v.is_managed,
      -- Plinth's own relations (the chat's views): a generic client leaves them out.
      'is_system', v.schema_name = 'public' AND v.relkind = 'v' AND v.table_name IN ('conversations', 'messages')
    ) ORDER BY v.schema_name = 'public', v.table_name)
    FROM visible v LEFT JOIN columns c ON c.oid = v.oid
  ), '[]'::jsonb),
  'keys', coalesce((SELECT items FROM keys), '[]'::jsonb),
  'table_metadata', coalesce((
    SELECT jsonb_object_agg(m.table_name, jsonb_build_object('display_columns', to_jsonb(m.display_columns), 'description', m.description))
    FROM sys.table_metadata m JOIN visible v ON v.schema_name = m.schema_name AND v.table_name = m.table_name
  ), '{}'::jsonb),
  'app_metadata', coalesce(
    (SELECT jsonb_build_object('app_description', description, 'home_page', home_page) FROM app),
    jsonb_build_object(
      'app_description', coalesce((SELECT value ->> 'description' FROM sys.settings WHERE key = 'public_app'), ''),
      'home_page', coalesce((SELECT value -> 'home_page' FROM sys.settings WHERE key = 'public_app'), '{}'::jsonb)
    )
  ),
  'column_metadata', coalesce((
    SELECT jsonb_object_agg(t.table_name, t.cols)
    FROM (
      -- Absent keys rather than nulls for what a column does not have; the options keep their own
      -- nulls (a choice's color may be null).
      SELECT m.table_name, jsonb_object_agg(m.column_name,
        jsonb_build_object('display_type', m.display_type, 'column_type', m.column_type)
        || CASE WHEN m.label IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('label', m.label) END
        || CASE WHEN m.options IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('options', m.options) END
        || CASE WHEN m.reference_table IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('reference_table', m.reference_table) END
      ) AS cols
      FROM sys.column_metadata m JOIN visible v ON v.schema_name = m.schema_name AND v.table_name = m.table_name
      GROUP BY m.table_name
    ) t
  ), '{}'::jsonb),
  'apps', coalesce((
    SELECT jsonb_agg(jsonb_build_object('id', a.id, 'schema_name', a.schema_name, 'display_name', a.display_name,
      'description', a.description, 'home_page', a.home_page) ORDER BY a.display_name)
    FROM sys.list_apps() a
  ), '[]'::jsonb),
  'curr_role', current_user
);
$$;

-- Row counts as the caller sees them: exact (through RLS) for tables the statistics call small,
-- the planner's estimate for the large ones, so that introspection stays fast on big data. Where
-- row-level security applies to the caller, a large table is counted up to the bound first: the
-- estimate is the whole table's, and a member who sees a few of its rows (or none) must not be
-- shown the total.
CREATE OR REPLACE FUNCTION sys.table_stats(p_exact_below bigint DEFAULT 100000) RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_rel record;
  v_count bigint;
  v_stats jsonb := '[]';
BEGIN
  FOR v_rel IN
    SELECT c.oid, n.nspname, c.relname AS name, c.reltuples
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname IN ('public', coalesce((SELECT a.schema_name FROM sys.list_apps() a
        WHERE a.id::text = nullif(current_setting('app.app_id', true), '')), 'public'))
      AND c.relkind IN ('r', 'p')
      AND has_table_privilege(c.oid, 'SELECT')
    ORDER BY n.nspname, c.relname
  LOOP
    IF v_rel.reltuples < p_exact_below THEN
      EXECUTE format('SELECT count(*) FROM %I.%I', v_rel.nspname, v_rel.name) INTO v_count;
    ELSIF row_security_active(v_rel.oid) THEN
      EXECUTE format('SELECT count(*) FROM (SELECT FROM %I.%I LIMIT %s) AS visible', v_rel.nspname, v_rel.name, p_exact_below)
        INTO v_count;
      IF v_count >= p_exact_below THEN
        v_count := v_rel.reltuples::bigint;
      END IF;
    ELSE
      v_count := v_rel.reltuples::bigint;
    END IF;
    v_stats := v_stats || jsonb_build_object('relname', v_rel.name, 'number_rows', v_count);
  END LOOP;
  RETURN v_stats;
END
$$;

REVOKE ALL ON FUNCTION sys.introspect(), sys.table_stats(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.introspect(), sys.table_stats(bigint) TO owner, admin, staff, member;
