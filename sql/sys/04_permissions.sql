-- Permissions of staff, member and anon on managed tables (spec §4.4 get_table_permissions,
-- set_table_permissions): kept in sys.table_permissions, applied as grants and row-level security
-- policies. SECURITY DEFINER for owner and admin only.

-- Policies and grants of a managed table, rewritten from sys.table_permissions (idempotent).
CREATE OR REPLACE FUNCTION sys.apply_permissions(p_schema text, p_table text) RETURNS void
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

CREATE OR REPLACE FUNCTION sys.get_table_permissions()
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

-- Each of read/write/delete is 'all', 'own' (rows the user created) or 'none'; 'true' and 'false'
-- (how a JSON boolean in POST /sql's params arrives) read as all and none.
CREATE OR REPLACE FUNCTION sys.permission_level(p_what text, p_level text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  CASE p_level
    WHEN 'all', 'own', 'none' THEN RETURN p_level;
    WHEN 'true' THEN RETURN 'all';
    WHEN 'false' THEN RETURN 'none';
    ELSE
      RAISE EXCEPTION 'read, write and delete are each all, own or none, or a boolean (true = all, false = none); % is %', p_what,
        coalesce(quote_literal(p_level), 'null') USING ERRCODE = 'P0001';
  END CASE;
END
$$;

CREATE OR REPLACE FUNCTION sys.set_table_permissions(p_table text, p_role text, p_read text, p_write text, p_delete text)
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
  p_read := sys.permission_level('read', p_read);
  p_write := sys.permission_level('write', p_write);
  p_delete := sys.permission_level('delete', p_delete);
  INSERT INTO sys.table_permissions (schema_name, table_name, role, read, write, delete)
  VALUES (v_schema, p_table, p_role, p_read, p_write, p_delete)
  ON CONFLICT (schema_name, table_name, role) DO UPDATE SET read = excluded.read, write = excluded.write, delete = excluded.delete;
  PERFORM sys.apply_permissions(v_schema, p_table);
  PERFORM sys.catalog_changed();
  PERFORM sys.record_audit_event('permissions.set', v_schema || '.' || p_table,
    jsonb_build_object('role', p_role, 'read', p_read, 'write', p_write, 'delete', p_delete));
  RETURN jsonb_build_object('table', p_table, 'role', p_role, 'read', p_read, 'write', p_write, 'delete', p_delete);
END
$$;

-- SQL booleans (true = all, false = none) in any of the three places, beside text in the others:
-- boolean has no implicit cast to text, so each mix of boolean and text parameters is an overload
-- that hands its values to the text form above (a literal 'own' beside true resolves to text).
DO $$
DECLARE
  v_types text[];
BEGIN
  FOR v_types IN
    SELECT ARRAY[r, w, d] FROM unnest(ARRAY['text', 'boolean']) r, unnest(ARRAY['text', 'boolean']) w, unnest(ARRAY['text', 'boolean']) d
    WHERE 'boolean' IN (r, w, d)
  LOOP
    EXECUTE format($f$
      CREATE OR REPLACE FUNCTION sys.set_table_permissions(p_table text, p_role text, p_read %1$s, p_write %2$s, p_delete %3$s)
      RETURNS jsonb
      LANGUAGE sql SET search_path = pg_catalog, pg_temp AS
      'SELECT sys.set_table_permissions(p_table, p_role, p_read::text, p_write::text, p_delete::text)'$f$,
      v_types[1], v_types[2], v_types[3]);
    EXECUTE format('REVOKE ALL ON FUNCTION sys.set_table_permissions(text, text, %1$s, %2$s, %3$s) FROM PUBLIC', v_types[1], v_types[2], v_types[3]);
    EXECUTE format('GRANT EXECUTE ON FUNCTION sys.set_table_permissions(text, text, %1$s, %2$s, %3$s) TO owner, admin', v_types[1], v_types[2], v_types[3]);
  END LOOP;
END
$$;

REVOKE ALL ON FUNCTION sys.apply_permissions(text, text), sys.permission_level(text, text), sys.get_table_permissions(),
  sys.set_table_permissions(text, text, text, text, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.get_table_permissions(), sys.set_table_permissions(text, text, text, text, text) TO owner, admin;
