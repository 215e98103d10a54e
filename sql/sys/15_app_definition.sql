-- App definitions (`plinth app export`, issue #27): what Plinth recorded of one app schema (or of
-- public) as JSON, in the shape src/services/AppDefinition.ts decodes and imports through the
-- management functions. For a database administrator only: nothing is granted to app roles.

-- An object without its keys whose value is JSON null (nested values stay as they are).
CREATE OR REPLACE FUNCTION sys.without_null_keys(p_object jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(p_object) WHERE jsonb_typeof(value) <> 'null';
$$;

-- A column's default as the text its column spec gave: add_column stores `'<text>'::<type>`, which
-- the catalog keeps as written for some types and folds into a constant for others (evaluated here).
CREATE OR REPLACE FUNCTION sys.column_default_text(p_table regclass, p_column text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_expression text;
  v_value text;
BEGIN
  SELECT pg_get_expr(d.adbin, d.adrelid) INTO v_expression
  FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
  WHERE d.adrelid = p_table AND a.attname = p_column;
  IF v_expression IS NULL THEN
    RETURN NULL;
  END IF;
  v_value := substring(v_expression FROM '^''((?:[^'']|'''')*)''::[a-z ]+(?:\([0-9,]+\))?$');
  IF v_value IS NOT NULL THEN
    RETURN replace(v_value, '''''', '''');
  END IF;
  EXECUTE format('SELECT (%s)::text', v_expression) INTO v_value;
  RETURN v_value;
END
$$;

-- The definition of app schema p_schema (or of public's managed tables): the app's own row, its
-- managed tables with their column specs as sys.create_table takes them and their permissions,
-- custom views in the order they were made, and pages. Tables are in name order; the importer
-- orders them by their references.
CREATE OR REPLACE FUNCTION sys.export_app(p_schema text) RETURNS jsonb
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  v_head jsonb;
BEGIN
  IF p_schema = 'public' THEN
    SELECT jsonb_build_object('description', coalesce(value ->> 'description', ''), 'home_page', coalesce(value -> 'home_page', '{}'::jsonb))
    INTO v_head FROM sys.settings WHERE key = 'public_app';
    v_head := coalesce(v_head, '{"description": "", "home_page": {}}'::jsonb);
  ELSE
    SELECT jsonb_build_object('display_name', display_name, 'description', description, 'home_page', home_page)
    INTO v_head FROM sys.apps WHERE schema_name = p_schema;
    IF v_head IS NULL THEN
      RAISE EXCEPTION 'no app %', quote_literal(coalesce(p_schema, 'null')) USING ERRCODE = 'P0002';
    END IF;
  END IF;
  -- Names resolve as in a request of the app (and as sys.create_view resolves them).
  PERFORM set_config('search_path', format('%I, public, pg_catalog', p_schema), true);
  RETURN jsonb_build_object('plinth_app', 1, 'schema', p_schema) || v_head || jsonb_build_object(
    'tables', coalesce((
      SELECT jsonb_agg(sys.without_null_keys(jsonb_build_object(
        'name', t.table_name,
        'description', nullif(t.description, ''),
        'display_columns', CASE WHEN cardinality(t.display_columns) > 0 THEN to_jsonb(t.display_columns) END,
        'columns', coalesce((
          SELECT jsonb_agg(sys.without_null_keys(jsonb_build_object(
            'name', m.column_name,
            'type', m.column_type,
            'required', CASE WHEN a.attnotnull THEN true END,
            'unique', CASE WHEN EXISTS (
              SELECT FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'u' AND k.conkey = ARRAY[a.attnum]
            ) THEN true END,
            'default', sys.column_default_text(a.attrelid, m.column_name),
            'label', m.label,
            'display_type', m.display_type,
            'options', m.options,
            'references', m.reference_table
          )) ORDER BY m.position)
          FROM sys.column_metadata m
          JOIN pg_attribute a ON a.attrelid = format('%I.%I', t.schema_name, t.table_name)::regclass AND a.attname = m.column_name
          WHERE m.schema_name = t.schema_name AND m.table_name = t.table_name
        ), '[]'::jsonb),
        'permissions', (
          SELECT jsonb_object_agg(p.role, jsonb_build_object('read', p.read, 'write', p.write, 'delete', p.delete))
          FROM sys.table_permissions p WHERE p.schema_name = t.schema_name AND p.table_name = t.table_name
        )
      )) ORDER BY t.table_name)
      FROM sys.table_metadata t WHERE t.schema_name = p_schema
    ), '[]'::jsonb),
    -- In the order they were made (their oids): a view may read an earlier one. The SELECT is the
    -- catalog's, not the text recorded when it was made: a column renamed since is followed, and with
    -- the app's schema first on the path its own tables are named unqualified (an import --as reads
    -- the copy's).
    'views', coalesce((
      SELECT jsonb_agg(jsonb_build_object('name', v.view_name,
          'sql', rtrim(btrim(pg_get_viewdef(format('%I.%I', v.schema_name, v.view_name)::regclass, true)), ';'))
        ORDER BY to_regclass(format('%I.%I', v.schema_name, v.view_name))::oid, v.view_name)
      FROM sys.managed_views v WHERE v.schema_name = p_schema
    ), '[]'::jsonb),
    'pages', coalesce((
      SELECT jsonb_agg(jsonb_build_object('slug', g.slug, 'title', g.title, 'source', g.source) ORDER BY g.slug)
      FROM sys.pages g WHERE g.schema_name = p_schema
    ), '[]'::jsonb)
  );
END
$$;

REVOKE ALL ON FUNCTION sys.without_null_keys(jsonb), sys.column_default_text(regclass, text), sys.export_app(text) FROM PUBLIC;
