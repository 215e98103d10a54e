/**
 * The one list of functions no caller may reach through POST /sql, /function/:name or a chat tool.
 * The SQL guard refuses a call of any of them by name; the migrator revokes EXECUTE on every
 * function so named from PUBLIC and from every Plinth role, each time it runs (Migrator.ts), so
 * the two defences can never disagree.
 */

/**
 * Exact names: the settings that carry role and claims, backend signalling, NOTIFY, advisory
 * locks (session-level ones outlive the request on a pooled connection; transaction-level ones
 * let a caller hold the rate limiter's locks), SQL smuggled in as text, whole results built in
 * memory as XML, server files, large objects, replication and what PostgreSQL itself keeps from
 * PUBLIC (backups, WAL, server configuration and memory).
 */
export const DENIED_FUNCTION_NAMES: ReadonlySet<string> = new Set([
  "set_config",
  "pg_terminate_backend", "pg_cancel_backend", "pg_signal_backend", "pg_reload_conf", "pg_rotate_logfile",
  "pg_notify", "pg_listening_channels",
  "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
  "table_to_xml", "table_to_xmlschema", "table_to_xml_and_xmlschema",
  "schema_to_xml", "schema_to_xmlschema", "schema_to_xml_and_xmlschema",
  "database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema",
  "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_file_write", "pg_file_unlink", "pg_file_rename",
  "loread", "lowrite",
  "pg_logical_emit_message", "pg_switch_wal", "pg_create_restore_point", "pg_promote",
  "pg_backup_start", "pg_backup_stop", "pg_wal_replay_pause", "pg_wal_replay_resume", "pg_log_standby_snapshot",
  "pg_create_physical_replication_slot", "pg_create_logical_replication_slot", "pg_drop_replication_slot",
  "pg_show_replication_origin_status",
  "pg_config", "pg_current_logfile", "pg_hba_file_rules", "pg_ident_file_mappings", "pg_show_all_file_settings",
  "pg_get_aios", "pg_get_backend_memory_contexts", "pg_log_backend_memory_contexts",
  "pg_get_shmem_allocations", "pg_get_shmem_allocations_numa", "pg_stat_have_stats",
  // Full-text helpers that run a query given as text.
  "ts_stat", "ts_rewrite"
])

/**
 * Whole families: large objects (`lo_import`, `lo_export`, ...), dblink, every advisory lock
 * function (`pg_advisory_xact_lock`, `pg_try_advisory_lock_shared`, ...), directory listings,
 * replication origins and statistics resets.
 */
export const DENIED_FUNCTION_PREFIXES: ReadonlyArray<string> = [
  "lo_", "dblink", "pg_advisory_", "pg_try_advisory_", "pg_ls_", "pg_replication_origin_", "pg_stat_reset"
]

/** Whether a function name (its last part, any case) is denied. */
export const isDeniedFunction = (name: string): boolean => {
  const lower = name.toLowerCase()
  return DENIED_FUNCTION_NAMES.has(lower) || DENIED_FUNCTION_PREFIXES.some((prefix) => lower.startsWith(prefix))
}

/**
 * Denied functions the login roles keep on purpose (migration 0004): they set the caller's role
 * and claims, and notify, before the caller's statement runs; no app role may call them.
 */
export const LOGIN_ROLE_GRANTS: ReadonlyArray<string> = [
  "pg_catalog.set_config(text,text,boolean)",
  "pg_catalog.pg_notify(text,text)"
]

/** The roles a request runs as, and the login roles the services connect as. */
export const APP_ROLES: ReadonlyArray<string> = ["owner", "admin", "staff", "member", "anon"]
export const LOGIN_ROLES: ReadonlyArray<string> = ["authenticator", "chat_authenticator"]
