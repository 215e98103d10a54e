-- Apps (spec §2.6, §4.4 create_app & co.): each app is a schema of its own, registered in sys.apps.
-- Management for owner and admin, list_apps for every signed-in role.

CREATE OR REPLACE FUNCTION sys.app_json(p_app sys.apps) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT jsonb_build_object('id', p_app.id, 'schema_name', p_app.schema_name, 'display_name', p_app.display_name,
    'description', p_app.description, 'home_page', p_app.home_page, 'created_at', sys.iso_utc(p_app.created_at), 'updated_at', sys.iso_utc(p_app.updated_at));
$$;

CREATE OR REPLACE FUNCTION sys.create_app(p_schema_name text, p_display_name text, p_description text DEFAULT '') RETURNS jsonb
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
  PERFORM sys.record_audit_event('app.create', p_schema_name, jsonb_build_object('display_name', v_app.display_name));
  RETURN sys.app_json(v_app);
END
$$;

CREATE OR REPLACE FUNCTION sys.update_app(p_schema_name text, p_display_name text, p_description text) RETURNS jsonb
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
  PERFORM sys.record_audit_event('app.update', p_schema_name,
    jsonb_build_object('display_name', v_app.display_name, 'description', v_app.description));
  RETURN sys.app_json(v_app);
END
$$;

CREATE OR REPLACE FUNCTION sys.rename_app(p_old_name text, p_new_name text) RETURNS jsonb
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
  PERFORM sys.record_audit_event('app.rename', p_new_name, jsonb_build_object('from', p_old_name));
  RETURN sys.app_json(v_app);
END
$$;

CREATE OR REPLACE FUNCTION sys.drop_app(p_schema_name text) RETURNS jsonb
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
  PERFORM sys.record_audit_event('app.drop', p_schema_name);
  RETURN sys.app_json(v_app);
END
$$;

CREATE OR REPLACE FUNCTION sys.list_apps()
RETURNS TABLE (id uuid, schema_name text, display_name text, description text, home_page jsonb, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT a.id, a.schema_name, a.display_name, a.description, a.home_page, a.created_at, a.updated_at
  FROM sys.apps a ORDER BY a.display_name, a.schema_name;
$$;

REVOKE ALL ON FUNCTION sys.app_json(sys.apps), sys.create_app(text, text, text), sys.update_app(text, text, text),
  sys.rename_app(text, text), sys.drop_app(text), sys.list_apps()
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.create_app(text, text, text), sys.update_app(text, text, text), sys.rename_app(text, text),
  sys.drop_app(text)
TO owner, admin;
GRANT EXECUTE ON FUNCTION sys.list_apps() TO owner, admin, staff, member;
