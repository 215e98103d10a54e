-- Defence in depth for POST /sql and /function/:name: what the SQL guard refuses by parsing, the
-- database refuses by privilege too, so a guard miss fails with 42501 (403) instead of working.

-- The caller's role and claims are set with set_config before the caller's statement runs; after
-- the switch, no app role may call it again. The login roles keep it for that first statement.
REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO authenticator, chat_authenticator;

-- Backend signalling, NOTIFY, session-level advisory locks (they would outlive the request on a
-- pooled connection), queries smuggled in as text, large objects (server-side files) and replication.
DO $$
DECLARE
  fn regprocedure;
BEGIN
  FOR fn IN
    SELECT p.oid::regprocedure
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'pg_catalog'::regnamespace
      AND (
        p.proname IN (
          'pg_terminate_backend', 'pg_cancel_backend', 'pg_reload_conf', 'pg_rotate_logfile',
          'pg_notify', 'pg_listening_channels',
          'pg_advisory_lock', 'pg_advisory_lock_shared', 'pg_try_advisory_lock', 'pg_try_advisory_lock_shared',
          'pg_advisory_unlock', 'pg_advisory_unlock_shared', 'pg_advisory_unlock_all',
          'query_to_xml', 'query_to_xmlschema', 'query_to_xml_and_xmlschema', 'cursor_to_xml', 'cursor_to_xmlschema',
          'pg_read_file', 'pg_read_binary_file', 'pg_ls_dir', 'pg_stat_file',
          'pg_logical_emit_message', 'pg_switch_wal', 'pg_create_restore_point',
          'dblink', 'dblink_exec', 'dblink_connect',
          'ts_stat', 'ts_rewrite',
          'pg_create_physical_replication_slot', 'pg_create_logical_replication_slot', 'pg_drop_replication_slot',
          'pg_replication_origin_create', 'pg_replication_origin_drop'
        )
        OR p.proname LIKE 'lo\_%'
        OR p.proname IN ('loread', 'lowrite')
      )
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', fn);
  END LOOP;
END
$$;

-- The services themselves may notify (LISTEN/NOTIFY fan-out); only before switching role.
GRANT EXECUTE ON FUNCTION pg_catalog.pg_notify(text, text) TO authenticator, chat_authenticator;

-- No temporary tables or new schemas for anyone but the administrators.
DO $$
BEGIN
  EXECUTE format('REVOKE CREATE, TEMPORARY ON DATABASE %I FROM PUBLIC', current_database());
END
$$;
