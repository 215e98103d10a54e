-- Custom views (spec §4.4 create_view, drop_view): one SELECT each, run with the caller's rights
-- (security_invoker), recorded in sys.managed_views. SECURITY DEFINER for owner and admin only.

-- One SELECT, checked here and not only by the SQL guard: without a ';' the text cannot hold a
-- second statement, and CREATE VIEW itself accepts only a query without data-modifying parts.
CREATE OR REPLACE FUNCTION sys.create_view(p_name text, p_sql text) RETURNS jsonb
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
  PERFORM sys.record_audit_event('view.create', v_schema || '.' || p_name, jsonb_build_object('sql', p_sql));
  RETURN jsonb_build_object('schema', v_schema, 'view', p_name);
END
$$;

CREATE OR REPLACE FUNCTION sys.drop_view(p_name text) RETURNS jsonb
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
  PERFORM sys.record_audit_event('view.drop', v_schema || '.' || p_name);
  RETURN jsonb_build_object('schema', v_schema, 'view', p_name);
END
$$;

REVOKE ALL ON FUNCTION sys.create_view(text, text), sys.drop_view(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.create_view(text, text), sys.drop_view(text) TO owner, admin;
