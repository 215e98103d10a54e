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

-- Each of read/write/delete is 'all', 'own' (rows the user created) or 'none'.
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
CREATE OR REPLACE FUNCTION sys.set_table_permissions(p_table text, p_role text, p_read boolean, p_write boolean, p_delete boolean)
RETURNS jsonb
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT sys.set_table_permissions(p_table, p_role,
    CASE WHEN p_read THEN 'all' ELSE 'none' END,
    CASE WHEN p_write THEN 'all' ELSE 'none' END,
    CASE WHEN p_delete THEN 'all' ELSE 'none' END);
$$;

REVOKE ALL ON FUNCTION sys.apply_permissions(text, text), sys.get_table_permissions(),
  sys.set_table_permissions(text, text, text, text, text), sys.set_table_permissions(text, text, boolean, boolean, boolean)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sys.get_table_permissions(), sys.set_table_permissions(text, text, text, text, text),
  sys.set_table_permissions(text, text, boolean, boolean, boolean)
TO owner, admin;
