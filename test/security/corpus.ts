/**
 * Hostile SQL for POST /sql, as data: each entry must be refused (400 by the SQL guard or a
 * database error, 403 by the database's privileges), never run. The fixtures it names are
 * created by HostileSql.test.ts: `public.probe` (INSERT/SELECT for the app roles), `public.secrets`
 * (nobody's), `public.ddl_audit` and the event triggers that fill it.
 */

export type Category =
  | "set_config by position"
  | "set_config spellings and targets"
  | "settings written otherwise"
  | "SET / RESET"
  | "DDL"
  | "multi-statement"
  | "utility statements"
  | "transaction control"
  | "server files and large objects"
  | "admin and backend functions"
  | "notify and advisory locks"
  | "SQL smuggled as text"
  | "protected data"

export interface HostileInput {
  readonly category: Category
  readonly sql: string
  readonly params?: ReadonlyArray<unknown>
  /** Owners may legitimately do this through a sys function: not sent when running as owner. */
  readonly ownerMay?: boolean
}

/** A user id that is nobody's: what a forged `app.user_id` would carry. */
export const FORGED_USER_ID = "00000000-0000-4000-8000-00000000beef"

/** Roles the corpus tries to create: none of them may exist afterwards. */
export const HOSTILE_ROLE_NAMES = ["plinth_hostile", "plinth_hostile_user", "plinth_hostile_admin"] as const

/** Records who the statement really ran as: any row whose `who`/`uid` is not the caller's is a breach. */
export const PROBE = "INSERT INTO probe (who, uid) SELECT current_user, current_setting('app.user_id', true)"

/** The settings that carry the caller's identity and limits, each with a value an attacker would want. */
const TARGETS: ReadonlyArray<readonly [string, string]> = [
  ["role", "owner"],
  ["app.user_id", FORGED_USER_ID],
  ["app.app_id", FORGED_USER_ID],
  ["search_path", "pg_temp, public"],
  ["session_authorization", "postgres"],
  ["statement_timeout", "0"],
  ["role", "authenticator"]
]

/** Every way of naming set_config the parser accepts (and a few it resolves to nothing). */
const SPELLINGS = [
  "set_config",
  "pg_catalog.set_config",
  `"set_config"`,
  "SET_CONFIG",
  `pg_catalog."set_config"`,
  "Set_Config",
  String.raw`U&"set\005fconfig"`,
  `"SET_CONFIG"`,
  "public.set_config",
  `PG_CATALOG . set_config`
]

/** The i-th set_config call: spelling, target and is_local rotate, so positions cover them all. */
const call = (i: number): string => {
  const [setting, value] = TARGETS[i % TARGETS.length]!
  return `${SPELLINGS[i % SPELLINGS.length]!}('${setting}', '${value}', ${i % 2 === 0 ? "true" : "false"})`
}

/** set_config in every syntactic position a SELECT/INSERT/UPDATE/DELETE offers. */
const POSITIONS: ReadonlyArray<(x: string) => string> = [
  (x) => `SELECT ${x}`,
  (x) => `SELECT ${x}, 1 AS one`,
  (x) => `WITH c AS (SELECT ${x} AS v) SELECT * FROM c`,
  (x) => `WITH c AS (SELECT ${x} AS v) ${PROBE} FROM c`,
  (x) => `WITH c AS MATERIALIZED (SELECT ${x} AS v) SELECT v FROM c`,
  (x) => `WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT length(${x}) FROM r WHERE n < 1) SELECT * FROM r`,
  (x) => `SELECT * FROM (SELECT ${x} AS v) s`,
  (x) => `SELECT 1 WHERE EXISTS (SELECT ${x})`,
  (x) => `SELECT 1 WHERE ${x} IS NOT NULL`,
  (x) => `SELECT 1 WHERE 'a' IN (SELECT ${x})`,
  (x) => `SELECT 1 WHERE 'a' = ANY (ARRAY[${x}])`,
  (x) => `SELECT (SELECT ${x})`,
  (x) => `VALUES (${x})`,
  (x) => `SELECT * FROM (VALUES (1, ${x})) v(a, b)`,
  (x) => `INSERT INTO probe (who, uid) VALUES (${x}, current_setting('app.user_id', true))`,
  (x) => `INSERT INTO probe (who, uid) SELECT current_user, ${x}`,
  (x) => `INSERT INTO probe (who, uid) SELECT * FROM ROWS FROM (${x}) AS r(v), LATERAL (SELECT current_user::text) u`,
  (x) => `UPDATE probe SET who = ${x}`,
  (x) => `UPDATE probe SET (who, uid) = (SELECT ${x}, 'x')`,
  (x) => `UPDATE probe SET who = who WHERE ${x} IS NULL`,
  (x) => `UPDATE probe SET who = s.v FROM (SELECT ${x} AS v) s`,
  (x) => `DELETE FROM probe WHERE ${x} = ''`,
  (x) => `DELETE FROM probe USING (SELECT ${x} AS v) s WHERE probe.who = s.v`,
  (x) => `INSERT INTO probe (who, uid) SELECT current_user, current_setting('app.user_id', true) RETURNING ${x}`,
  (x) => `UPDATE probe SET who = who WHERE false RETURNING ${x}`,
  (x) => `DELETE FROM probe WHERE false RETURNING ${x}`,
  (x) => `SELECT 1 ORDER BY ${x}`,
  (x) => `SELECT count(*) FROM probe GROUP BY ${x}`,
  (x) => `SELECT count(*) FROM probe GROUP BY GROUPING SETS ((who), (${x}))`,
  (x) => `SELECT count(*) FROM probe GROUP BY ROLLUP (who, ${x})`,
  (x) => `SELECT count(*) FROM probe HAVING ${x} IS NOT NULL`,
  (x) => `SELECT * FROM probe, LATERAL (SELECT ${x}) l`,
  (x) => `SELECT * FROM probe a JOIN LATERAL (SELECT ${x} AS v) b ON true`,
  (x) => `SELECT * FROM probe a JOIN probe b ON ${x} IS NOT NULL`,
  (x) => `SELECT * FROM ${x}`,
  (x) => `SELECT * FROM ROWS FROM (${x}, generate_series(1, 2))`,
  (x) => `SELECT length(${x})`,
  (x) => `SELECT upper(lower(trim(${x})))`,
  (x) => `SELECT substring(${x} FROM 1 FOR 3), position('a' IN ${x})`,
  (x) => `SELECT CASE WHEN true THEN ${x} ELSE 'x' END`,
  (x) => `SELECT CASE ${x} WHEN 'a' THEN 1 END`,
  (x) => `SELECT COALESCE(NULL, ${x})`,
  (x) => `SELECT NULLIF(${x}, ''), GREATEST(${x}, 'a'), LEAST('a', ${x})`,
  (x) => `SELECT ${x}::text`,
  (x) => `SELECT CAST(${x} AS integer)`,
  (x) => `SELECT ${x} COLLATE "C"`,
  (x) => `SELECT ARRAY[${x}]`,
  (x) => `SELECT ARRAY(SELECT ${x})`,
  (x) => `SELECT (ARRAY['a', ${x}])[2]`,
  (x) => `SELECT ROW(${x}, 1)`,
  (x) => `SELECT ROW(1, ${x}) IS NULL`,
  (x) => `SELECT count(*) FILTER (WHERE ${x} IS NOT NULL) FROM probe`,
  (x) => `SELECT string_agg(who, ',' ORDER BY ${x}) FROM probe`,
  (x) => `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY ${x}) FROM probe`,
  (x) => `SELECT count(*) OVER (PARTITION BY ${x}) FROM probe`,
  (x) => `SELECT first_value(${x}) OVER () FROM probe`,
  (x) => `SELECT count(*) OVER w FROM probe WINDOW w AS (ORDER BY ${x})`,
  (x) => `SELECT DISTINCT ON (${x}) who FROM probe`,
  (x) => `SELECT 1 LIMIT length(${x})`,
  (x) => `SELECT 1 OFFSET length(${x})`,
  (x) => `SELECT 'a' UNION SELECT ${x}`,
  (x) => `SELECT 'a' EXCEPT SELECT ${x}`,
  (x) => `SELECT ${x} BETWEEN 'a' AND 'z', ${x} LIKE '%', NOT (${x} = '')`,
  (x) => `SELECT ${x} IS DISTINCT FROM NULL`,
  (x) => `SELECT json_build_object('k', ${x})`,
  (x) => `SELECT JSON_OBJECT('k': ${x}), JSON_ARRAY(${x})`,
  (x) => `SELECT * FROM JSON_TABLE(to_jsonb(${x}), '$' COLUMNS (v text PATH '$')) j`,
  (x) => `SELECT xmlelement(name a, ${x})`,
  (x) => `SELECT xmlforest(${x} AS a)`,
  (x) => `SELECT * FROM probe TABLESAMPLE bernoulli (length(${x}))`,
  (x) => `SELECT * FROM probe FETCH FIRST (length(${x})) ROWS ONLY`,
  (x) => `SELECT current_setting(${x})`
]

/** Named notation and bound parameters: the guard must not care how the arguments arrive. */
const SET_CONFIG_WITH_PARAMS: ReadonlyArray<HostileInput> = [
  { category: "set_config by position", sql: "SELECT set_config($1, $2, true)", params: ["role", "owner"] },
  { category: "set_config by position", sql: "SELECT set_config($1, $2, $3)", params: ["app.user_id", FORGED_USER_ID, false] },
  { category: "set_config by position", sql: "SELECT pg_catalog.set_config($1::text, $2::text, true)", params: ["search_path", "pg_temp"] },
  { category: "set_config by position", sql: `INSERT INTO probe (who, uid) VALUES (set_config('role', $1, true), $2)`, params: ["owner", FORGED_USER_ID] },
  { category: "set_config by position", sql: "SELECT set_config(setting_name => 'role', new_value => 'owner', is_local => true)" },
  { category: "set_config by position", sql: "SELECT set_config(new_value => $1, setting_name => 'app.user_id', is_local => false)", params: [FORGED_USER_ID] },
  { category: "set_config by position", sql: "SELECT set_config(name, 'owner', true) FROM pg_settings WHERE name = $1", params: ["role"] },
  // Column notation: `t.f` is `f(t)` for a function of one composite argument.
  { category: "set_config by position", sql: "SELECT s.set_config FROM (SELECT 'role' AS a, 'owner' AS b, true AS c) s" }
]

const SET_CONFIG_SPELLINGS: ReadonlyArray<HostileInput> = SPELLINGS.flatMap((spelling) =>
  TARGETS.map(([setting, value]): HostileInput => ({
    category: "set_config spellings and targets",
    sql: `SELECT ${spelling}('${setting}', '${value}', false)`
  }))
)

const SETTINGS_WRITTEN_OTHERWISE: ReadonlyArray<string> = [
  // pg_settings' update rule calls set_config(name, setting, false): session-wide, past the transaction.
  "UPDATE pg_settings SET setting = 'owner' WHERE name = 'role'",
  "UPDATE pg_catalog.pg_settings SET setting = 'postgres' WHERE name = 'session_authorization'",
  "UPDATE pg_settings SET setting = '0' WHERE name = 'statement_timeout'",
  "UPDATE pg_settings SET setting = 'pg_temp, public' WHERE name = 'search_path'",
  "UPDATE pg_settings SET setting = 'off' WHERE name = 'row_security'",
  "UPDATE pg_settings SET setting = 'off' WHERE name = 'default_transaction_read_only'",
  "UPDATE pg_settings SET setting = reset_val WHERE name = 'role'",
  "UPDATE pg_settings SET setting = setting",
  "UPDATE pg_settings SET setting = 'owner' WHERE name = 'role' RETURNING current_user",
  `WITH u AS (UPDATE pg_settings SET setting = 'owner' WHERE name = 'role' RETURNING name) ${PROBE} FROM u`,
  `WITH u AS (UPDATE pg_settings SET setting = 'postgres' WHERE name = 'session_authorization' RETURNING name) SELECT * FROM u`,
  "INSERT INTO pg_settings (name, setting) VALUES ('role', 'owner')",
  "DELETE FROM pg_settings WHERE name = 'role'",
  "SELECT current_setting(set_config('role', 'owner', true))",
  "SELECT current_setting('app.user_id') FROM (SELECT set_config('app.user_id', current_setting('app.user_id') || 'x', true)) s",
  "SELECT set_config('role', current_setting('role'), false)",
  "SELECT set_config(name, reset_val, true) FROM pg_settings",
  "SELECT set_config('app.user_id', id::text, true) FROM sys.users LIMIT 1"
]

const SET_AND_RESET: ReadonlyArray<string> = [
  "SET role owner",
  "SET ROLE owner",
  "SET ROLE 'owner'",
  "SET LOCAL ROLE owner",
  "SET SESSION ROLE owner",
  "SET ROLE authenticator",
  "SET ROLE NONE",
  "RESET ROLE",
  "SET SESSION AUTHORIZATION postgres",
  "SET SESSION AUTHORIZATION DEFAULT",
  "RESET SESSION AUTHORIZATION",
  `SET app.user_id = '${FORGED_USER_ID}'`,
  `SET LOCAL app.user_id TO '${FORGED_USER_ID}'`,
  `SET app.app_id = '${FORGED_USER_ID}'`,
  `SET "app.user_id" = 'x'`,
  "SET search_path = pg_temp, public",
  "SET LOCAL search_path TO DEFAULT",
  "SET SCHEMA 'pg_catalog'",
  "SET statement_timeout = 0",
  "SET LOCAL statement_timeout TO '0'",
  "RESET statement_timeout",
  "RESET ALL",
  "SET row_security = off",
  "SET TIME ZONE 'UTC'",
  "SET NAMES 'LATIN1'",
  "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
  "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
  "SET CONSTRAINTS ALL DEFERRED",
  "/* comment */ SET role owner",
  "   set   role   owner   ;",
  "SHOW ALL"
]

const DDL: ReadonlyArray<string> = [
  "CREATE TABLE hostile (a int)",
  "CREATE TABLE public.hostile AS SELECT * FROM probe",
  "CREATE TEMP TABLE hostile (a int)",
  "CREATE UNLOGGED TABLE hostile (a int)",
  "CREATE TABLE hostile (LIKE probe)",
  "SELECT 1 AS a INTO hostile",
  "SELECT * INTO TEMP hostile FROM probe",
  "SELECT * INTO UNLOGGED hostile FROM secrets",
  "ALTER TABLE probe ADD COLUMN evil text",
  "ALTER TABLE probe OWNER TO member",
  "ALTER TABLE probe RENAME TO probe_old",
  "ALTER TABLE probe ENABLE ROW LEVEL SECURITY",
  "ALTER TABLE secrets DISABLE ROW LEVEL SECURITY",
  "DROP TABLE probe",
  "DROP TABLE IF EXISTS secrets CASCADE",
  "DROP TABLE ddl_audit",
  "CREATE VIEW hostile AS SELECT * FROM secrets",
  "CREATE OR REPLACE VIEW hostile AS SELECT 1",
  "CREATE TEMP VIEW hostile AS SELECT 1",
  "DROP VIEW IF EXISTS pg_settings",
  "CREATE MATERIALIZED VIEW hostile AS SELECT * FROM probe",
  "REFRESH MATERIALIZED VIEW hostile",
  "CREATE FUNCTION hostile() RETURNS void LANGUAGE sql SECURITY DEFINER SET role = owner AS 'SELECT 1'",
  "CREATE OR REPLACE FUNCTION public.set_config(text, text, boolean) RETURNS text LANGUAGE sql AS $$SELECT 'x'$$",
  "CREATE FUNCTION pg_temp.hostile() RETURNS int LANGUAGE sql AS 'SELECT 1'",
  "ALTER FUNCTION sys.invite_user(text, text) SECURITY INVOKER",
  "ALTER FUNCTION pg_catalog.set_config(text, text, boolean) OWNER TO member",
  "DROP FUNCTION sys.invite_user(text, text)",
  "CREATE PROCEDURE hostile() LANGUAGE sql AS $$DROP TABLE probe$$",
  "DROP PROCEDURE IF EXISTS hostile()",
  "CREATE TRIGGER hostile BEFORE INSERT ON probe FOR EACH ROW EXECUTE FUNCTION sys.notify_apps_changed()",
  "DROP TRIGGER IF EXISTS hostile ON probe",
  "CREATE ROLE plinth_hostile SUPERUSER LOGIN PASSWORD 'x'",
  "CREATE USER plinth_hostile_user PASSWORD 'x'",
  "CREATE ROLE plinth_hostile_admin IN ROLE owner",
  "ALTER ROLE member SUPERUSER",
  "ALTER ROLE member SET role = owner",
  "ALTER ROLE authenticator PASSWORD 'x'",
  "DROP ROLE owner",
  "GRANT owner TO member",
  "GRANT authenticator TO member",
  "GRANT ALL ON secrets TO member",
  "GRANT SELECT ON sys.users TO PUBLIC",
  "GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO PUBLIC",
  "GRANT CREATE ON SCHEMA public TO member",
  "REVOKE ALL ON probe FROM PUBLIC",
  "REVOKE member FROM authenticator",
  "CREATE SCHEMA hostile",
  "CREATE SCHEMA hostile AUTHORIZATION member",
  "ALTER SCHEMA public OWNER TO member",
  "DROP SCHEMA sys CASCADE",
  "CREATE INDEX ON probe (who)",
  "CREATE INDEX CONCURRENTLY hostile ON probe (uid)",
  "DROP INDEX IF EXISTS hostile",
  "CREATE EXTENSION dblink",
  "CREATE EXTENSION IF NOT EXISTS file_fdw",
  "ALTER EXTENSION plpgsql UPDATE",
  "DROP EXTENSION plpgsql",
  "CREATE POLICY hostile ON probe USING (true)",
  "ALTER POLICY hostile ON probe USING (true)",
  "DROP POLICY IF EXISTS hostile ON probe",
  "CREATE SEQUENCE hostile",
  "ALTER SEQUENCE IF EXISTS hostile RESTART",
  "DROP SEQUENCE IF EXISTS hostile",
  "CREATE TYPE hostile AS (a int)",
  "CREATE TYPE hostile AS ENUM ('a')",
  "DROP TYPE IF EXISTS hostile",
  "CREATE DOMAIN hostile AS int CHECK (VALUE > 0)",
  "CREATE EVENT TRIGGER hostile ON ddl_command_start EXECUTE FUNCTION sys.notify_apps_changed()",
  "ALTER EVENT TRIGGER hostile_sql_ddl_end DISABLE",
  "DROP EVENT TRIGGER hostile_sql_ddl_end",
  "CREATE RULE hostile AS ON INSERT TO probe DO INSTEAD NOTHING",
  "CREATE OR REPLACE RULE hostile AS ON SELECT TO probe DO INSTEAD SELECT * FROM secrets",
  "DROP RULE IF EXISTS hostile ON probe",
  "COMMENT ON TABLE probe IS 'hostile'",
  "COMMENT ON ROLE owner IS 'hostile'",
  "TRUNCATE probe",
  "TRUNCATE TABLE secrets, probe RESTART IDENTITY CASCADE",
  "TRUNCATE sys.magic_links",
  "SECURITY LABEL ON TABLE probe IS 'hostile'",
  "CREATE DATABASE hostile",
  "DROP DATABASE IF EXISTS postgres",
  "ALTER DATABASE postgres SET statement_timeout = 0",
  "ALTER SYSTEM SET statement_timeout = 0",
  "ALTER SYSTEM RESET ALL",
  "CREATE TABLESPACE hostile LOCATION '/tmp'",
  "CREATE SERVER hostile FOREIGN DATA WRAPPER postgres_fdw",
  "CREATE FOREIGN DATA WRAPPER hostile",
  "CREATE PUBLICATION hostile FOR ALL TABLES",
  "CREATE SUBSCRIPTION hostile CONNECTION 'dbname=x' PUBLICATION p",
  "CREATE CAST (text AS int) WITHOUT FUNCTION",
  "CREATE OPERATOR === (LEFTARG = text, RIGHTARG = text, FUNCTION = texteq)",
  "CREATE AGGREGATE hostile (int) (SFUNC = int4pl, STYPE = int)",
  "CREATE COLLATION hostile FROM \"C\"",
  "CREATE LANGUAGE hostile",
  "CREATE STATISTICS hostile ON who, uid FROM probe",
  "CREATE TEXT SEARCH CONFIGURATION hostile (COPY = english)",
  "CREATE ACCESS METHOD hostile TYPE TABLE HANDLER heap_tableam_handler",
  "ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO member",
  "REASSIGN OWNED BY postgres TO member",
  "DROP OWNED BY member",
  "IMPORT FOREIGN SCHEMA public FROM SERVER hostile INTO public",
  "ALTER LARGE OBJECT 1 OWNER TO member"
]

const MULTI_STATEMENT: ReadonlyArray<HostileInput> = [
  ...[
    "select 1; drop table probe",
    "select 1;drop table probe;",
    "select 1 /* ; */; drop table probe",
    "select 1 /* a /* nested ; */ b */; drop table probe",
    "select 1 -- ;\n; drop table probe",
    "select ';'; drop table probe",
    "select ''';'; drop table probe",
    "select 'a'\n';'; drop table probe",
    "select $$;$$; drop table probe",
    "select $tag$;$$;$tag$; drop table probe",
    String.raw`select E'\';'; drop table probe`,
    String.raw`select E'\\'; drop table probe`,
    String.raw`select U&'\0027;'; drop table probe`,
    String.raw`select 1 as U&"\003b"; drop table probe`,
    `select 1 as ";"; drop table probe`,
    `select 1 as "x""; drop"; drop table probe`,
    "select 1/*;*/;/*;*/drop table probe",
    "select 1;; drop table probe",
    "select 1;\n\n\tdrop table probe\n;",
    "select 1;\r\nDROP TABLE probe",
    "drop table probe; select 1",
    "select 1; set role owner",
    `select 1; select set_config('role', 'owner', true); ${PROBE}`,
    `set local role owner; ${PROBE}`,
    "commit; drop table probe; begin",
    `rollback; set role owner; ${PROBE}`,
    `${PROBE}; reset role`,
    "select 1; copy probe to program 'id'",
    "select 1 where ';' = ';'; delete from probe",
    "select 1; select 2",
    `select 1 \\; drop table probe`
  ].map((sql): HostileInput => ({ category: "multi-statement", sql })),
  { category: "multi-statement", sql: "select $1::text; drop table probe", params: [";"] }
]

const UTILITY: ReadonlyArray<string> = [
  "COPY probe TO '/tmp/plinth-hostile'",
  "COPY probe FROM '/etc/passwd'",
  "COPY probe TO PROGRAM 'touch /tmp/plinth-hostile'",
  "COPY probe FROM PROGRAM 'id'",
  "COPY (SELECT * FROM secrets) TO STDOUT",
  "COPY probe FROM STDIN",
  "COPY sys.users TO STDOUT WITH (FORMAT csv)",
  "DO $$ BEGIN PERFORM set_config('role', 'owner', true); END $$",
  "DO LANGUAGE plpgsql 'BEGIN DROP TABLE probe; END'",
  "DO $x$ BEGIN EXECUTE 'SET ROLE owner'; INSERT INTO probe (who) VALUES (current_user); END $x$",
  "CALL hostile()",
  "CALL sys.invite_user('hostile@plinth.test', 'owner')",
  "LISTEN plinth",
  "NOTIFY plinth, 'hostile'",
  "UNLISTEN *",
  "PREPARE hostile AS SELECT * FROM secrets",
  "EXECUTE hostile",
  "DEALLOCATE ALL",
  "DECLARE hostile CURSOR WITH HOLD FOR SELECT * FROM probe",
  "FETCH ALL FROM hostile",
  "MOVE NEXT IN hostile",
  "CLOSE ALL",
  "LOCK TABLE probe IN ACCESS EXCLUSIVE MODE",
  "LOCK secrets",
  "VACUUM",
  "VACUUM FULL probe",
  "ANALYZE",
  "ANALYZE probe",
  "CLUSTER probe",
  "REINDEX TABLE probe",
  "REINDEX DATABASE postgres",
  "CHECKPOINT",
  "EXPLAIN ANALYZE DELETE FROM probe",
  "EXPLAIN (ANALYZE, FORMAT JSON) INSERT INTO probe (who) VALUES ('hostile')",
  "EXPLAIN SELECT * FROM secrets",
  "LOAD 'plpgsql'",
  "LOAD '/tmp/plinth-hostile.so'",
  "DISCARD ALL",
  "DISCARD PLANS",
  "DISCARD TEMP",
  "SHOW role",
  "MERGE INTO probe p USING (SELECT 1) s ON false WHEN NOT MATCHED THEN INSERT (who) VALUES ('hostile')",
  "TABLE secrets \\g"
]

const TRANSACTION_CONTROL: ReadonlyArray<string> = [
  "BEGIN",
  "START TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
  "COMMIT",
  "COMMIT AND CHAIN",
  "END",
  "ROLLBACK",
  "ABORT",
  "SAVEPOINT hostile",
  "RELEASE SAVEPOINT hostile",
  "ROLLBACK TO SAVEPOINT hostile",
  "PREPARE TRANSACTION 'hostile'",
  "COMMIT PREPARED 'hostile'",
  "ROLLBACK PREPARED 'hostile'"
]

const FILES_AND_LARGE_OBJECTS: ReadonlyArray<string> = [
  "SELECT pg_read_file('/etc/passwd')",
  "SELECT pg_read_file('postgresql.conf', 0, 100)",
  "SELECT pg_catalog.pg_read_file('/etc/passwd')",
  `SELECT "pg_read_file"('/etc/passwd')`,
  "SELECT PG_READ_FILE('/etc/passwd')",
  "SELECT length(pg_read_file('/etc/passwd'))",
  "WITH f AS (SELECT pg_read_file('/etc/passwd') AS v) SELECT v FROM f",
  "INSERT INTO probe (who) SELECT pg_read_file('/etc/passwd')",
  "SELECT t.pg_read_file FROM (SELECT '/etc/passwd'::text AS f) t",
  "SELECT pg_read_binary_file('/etc/passwd')",
  "SELECT convert_from(pg_read_binary_file('global/pg_control'), 'SQL_ASCII')",
  "SELECT pg_ls_dir('.')",
  "SELECT * FROM pg_ls_dir('/')",
  "SELECT pg_stat_file('PG_VERSION')",
  "SELECT * FROM pg_ls_logdir()",
  "SELECT * FROM pg_ls_waldir()",
  "SELECT * FROM pg_ls_tmpdir()",
  "SELECT * FROM pg_ls_archive_statusdir()",
  "SELECT lo_import('/etc/passwd')",
  "SELECT lo_import('/etc/passwd', 4242)",
  "SELECT lo_export(4242, '/tmp/plinth-hostile')",
  "SELECT lo_creat(-1)",
  "SELECT lo_create(0)",
  "SELECT lo_from_bytea(0, 'hostile')",
  "SELECT lo_get(4242)",
  "SELECT lo_put(4242, 0, 'x')",
  "SELECT lo_unlink(4242)",
  "SELECT lo_open(4242, 131072)",
  "SELECT loread(0, 10)",
  "SELECT lowrite(0, 'x')",
  "SELECT * FROM pg_largeobject",
  "SELECT pg_file_write('/tmp/plinth-hostile', 'x', false)"
]

const ADMIN: ReadonlyArray<string> = [
  "SELECT pg_terminate_backend(pg_backend_pid())",
  "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()",
  "SELECT pg_cancel_backend(pid) FROM pg_stat_activity",
  "SELECT pg_catalog.pg_cancel_backend(pg_backend_pid())",
  "SELECT pg_signal_backend(pg_backend_pid(), 9)",
  "SELECT pg_reload_conf()",
  "SELECT pg_rotate_logfile()",
  "SELECT pg_switch_wal()",
  "SELECT pg_create_restore_point('hostile')",
  "SELECT pg_promote()",
  "SELECT pg_create_physical_replication_slot('hostile')",
  "SELECT pg_create_logical_replication_slot('hostile', 'pgoutput')",
  "SELECT pg_drop_replication_slot('hostile')",
  "SELECT pg_replication_origin_create('hostile')",
  "SELECT pg_logical_emit_message(true, 'hostile', 'x')",
  "SELECT pg_stat_reset()",
  "SELECT pg_log_backend_memory_contexts(pg_backend_pid())",
  "SELECT pg_backup_start('hostile')"
]

const NOTIFY_AND_LOCKS: ReadonlyArray<string> = [
  "SELECT pg_notify('plinth', 'hostile')",
  "SELECT pg_notify(c, p) FROM (VALUES ('plinth', 'hostile')) v(c, p)",
  `SELECT "PG_NOTIFY"('plinth', 'x')`,
  "SELECT pg_listening_channels()",
  "SELECT pg_advisory_lock(1)",
  "SELECT pg_advisory_lock(1, 2)",
  "SELECT pg_advisory_lock_shared(1)",
  "SELECT pg_try_advisory_lock(1)",
  "SELECT pg_try_advisory_lock_shared(1)",
  "SELECT pg_advisory_unlock(1)",
  "SELECT pg_advisory_unlock_all()",
  "WITH l AS (SELECT pg_advisory_lock(42)) SELECT * FROM l"
]

const SMUGGLED: ReadonlyArray<string> = [
  "SELECT query_to_xml('SELECT * FROM secrets', true, true, '')",
  "SELECT query_to_xml('DROP TABLE probe', true, true, '')",
  "SELECT query_to_xml('SELECT set_config(''role'', ''owner'', true)', true, true, '')",
  "SELECT query_to_xmlschema('SELECT 1', true, true, '')",
  "SELECT query_to_xml_and_xmlschema('SELECT * FROM secrets', true, true, '')",
  "SELECT cursor_to_xml('hostile', 1, true, true, '')",
  "SELECT cursor_to_xmlschema('hostile', true, true, '')",
  "SELECT table_to_xml('public.secrets', true, true, '')",
  "SELECT table_to_xml('sys.users', true, true, '')",
  // ts_stat and ts_rewrite run a query given as text: the guard cannot see into it, privileges must.
  "SELECT * FROM ts_stat('SELECT to_tsvector(v) FROM secrets')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(set_config(''role'', ''owner'', true))')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_read_file(''/etc/passwd''))')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(email) FROM sys.users')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_advisory_lock(7)::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_create_physical_replication_slot(''hostile'')::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_create_logical_replication_slot(''hostile'', ''pgoutput'')::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_drop_replication_slot(''hostile'')::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(lo_import(''/etc/passwd'')::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_notify(''plinth'', ''x'')::text)')",
  "SELECT * FROM ts_stat('SELECT to_tsvector(pg_terminate_backend(pg_backend_pid())::text)')",
  "SELECT ts_rewrite('a'::tsquery, 'SELECT v::tsquery, v::tsquery FROM secrets')",
  "SELECT dblink('dbname=postgres', 'DROP TABLE probe')",
  "SELECT dblink_exec('dbname=postgres', 'CREATE ROLE plinth_hostile SUPERUSER')",
  "SELECT dblink_connect('hostile', 'dbname=postgres user=postgres')"
]

const PROTECTED_DATA: ReadonlyArray<string> = [
  "SELECT * FROM secrets",
  "TABLE secrets",
  "SELECT v FROM public.secrets",
  "SELECT (SELECT v FROM secrets)",
  "WITH s AS (SELECT * FROM secrets) SELECT * FROM s",
  "SELECT 1 WHERE EXISTS (SELECT FROM secrets WHERE v LIKE 'a%')",
  "SELECT count(*) FROM secrets",
  "SELECT * FROM secrets FOR UPDATE",
  "INSERT INTO probe (who) SELECT v FROM secrets",
  "UPDATE secrets SET v = 'hostile'",
  "DELETE FROM secrets",
  "INSERT INTO secrets VALUES ('hostile')",
  "SELECT * FROM probe p JOIN LATERAL (SELECT v FROM secrets) s ON true",
  "DELETE FROM probe",
  "UPDATE probe SET who = 'owner'",
  "SELECT * FROM ddl_audit",
  "DELETE FROM ddl_audit",
  "SELECT * FROM sys.users",
  "SELECT email, password_hash FROM sys.users",
  "SELECT * FROM sys.magic_links",
  "SELECT * FROM sys.apps",
  "UPDATE sys.users SET role = 'owner'",
  "INSERT INTO sys.users (email, role) VALUES ('hostile@plinth.test', 'owner')",
  "DELETE FROM sys.magic_links",
  "SELECT * FROM pg_authid",
  "SELECT rolname, rolpassword FROM pg_catalog.pg_authid",
  "SELECT * FROM pg_shadow",
  "SELECT passwd FROM pg_catalog.pg_shadow WHERE usename = 'authenticator'",
  "SELECT * FROM pg_file_settings",
  "SELECT * FROM pg_hba_file_rules",
  "SELECT * FROM pg_statistic",
  "UPDATE pg_authid SET rolsuper = true WHERE rolname = 'member'",
  "INSERT INTO pg_auth_members (roleid, member, grantor) SELECT 10, oid, 10 FROM pg_roles WHERE rolname = 'member'",
  "SELECT sys.issue_magic_link(id) FROM sys.users",
  "SELECT sys.create_magic_link('owner@plinth.test')",
  "SELECT * FROM sys.login('owner@plinth.test', 'x')",
  "SELECT * FROM sys.verify_magic_link('x')"
]

const entries = (category: Category, sqls: ReadonlyArray<string>): ReadonlyArray<HostileInput> =>
  sqls.map((sql) => ({ category, sql }))

export const corpus: ReadonlyArray<HostileInput> = [
  ...POSITIONS.map((position, i): HostileInput => ({ category: "set_config by position", sql: position(call(i)) })),
  ...SET_CONFIG_WITH_PARAMS,
  ...SET_CONFIG_SPELLINGS,
  ...entries("settings written otherwise", SETTINGS_WRITTEN_OTHERWISE),
  { category: "settings written otherwise", sql: "UPDATE pg_settings SET setting = $1 WHERE name = $2", params: ["owner", "role"] },
  ...entries("SET / RESET", SET_AND_RESET),
  ...entries("DDL", DDL),
  ...MULTI_STATEMENT,
  ...entries("utility statements", UTILITY),
  ...entries("transaction control", TRANSACTION_CONTROL),
  ...entries("server files and large objects", FILES_AND_LARGE_OBJECTS),
  ...entries("admin and backend functions", ADMIN),
  ...entries("notify and advisory locks", NOTIFY_AND_LOCKS),
  ...entries("SQL smuggled as text", SMUGGLED),
  ...entries("protected data", PROTECTED_DATA),
  { category: "protected data", sql: "SELECT sys.invite_user('hostile-invite@plinth.test', 'owner')", ownerMay: true }
]
