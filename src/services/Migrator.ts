/**
 * Forward-only migrations: `migrations/NNNN_name.sql`, applied in order, each once, each in its own
 * transaction, recorded in `plinth.schema_migrations`; they hold tables, types, grants on tables and
 * data changes. Then the sys SQL: `sql/sys/NN_concern.sql`, the one definition of each function,
 * view and trigger, applied again whenever its text changed (Flyway's repeatable migrations), each
 * in its own transaction, recorded in `plinth.sys_sql`. A transaction-scoped advisory lock makes
 * concurrent starters wait for each other instead of applying a file twice.
 */
import { Effect, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describeFailure } from "./DatabaseError.ts"
import { APP_ROLES, DENIED_FUNCTION_NAMES, DENIED_FUNCTION_PREFIXES, LOGIN_ROLE_GRANTS, LOGIN_ROLES } from "./DeniedFunctions.ts"
import { splitStatements } from "./SqlParser.ts"

export class MigrationError extends Schema.TaggedError<MigrationError>()("MigrationError", {
  message: Schema.String
}) {}

export interface Migration {
  readonly version: number
  readonly name: string
  readonly text: string
  readonly checksum: string
}

export interface SysSqlFile {
  /** The file name, e.g. `03_tables.sql`: the files apply in the order of their names. */
  readonly name: string
  readonly text: string
  readonly checksum: string
}

/** Shipped next to `src/` (and copied next to `dist/src/` by the build). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url))
/** Shipped next to `src/` (and copied next to `dist/src/` by the build). */
export const SYS_SQL_DIR = fileURLToPath(new URL("../../sql/sys/", import.meta.url))

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/
const SYS_FILE_NAME = /^\d{2}_[a-z0-9_]+\.sql$/
/** Any constant shared by every Plinth process; it names the lock, nothing more. */
const MIGRATION_LOCK_KEY = 7_270_001

/**
 * The migrations rewritten when their functions moved to `sql/sys/` (issue #20), with the checksum
 * a database migrated before records for each and the checksum of its rewritten text. That one
 * change is accepted (and recorded); the sys SQL then replaces the functions the old text created.
 */
const REWRITTEN: ReadonlyArray<{ readonly version: number; readonly previous: string; readonly current: string }> = [
  { version: 2, previous: "9d77e2ef6b7dc0000149e5ce7e9ccf9f044e3369c624eee5624cb58dbda268fd", current: "c9a88f82adbd7568fa85edcc84fd8bac18a7a9e66eb93ccc19899faaf25741f8" },
  { version: 3, previous: "4a89b1f5bae42f2c09f48f17e4bb8470912fff8bce5f56ca3c7587f10ebd501f", current: "26e2cf6a1c0d80c2c9b7eaaf91045b9a1ee1e070b124cdb84582acfbe56123bc" },
  { version: 5, previous: "5e5bf16f167e9d6431d90c7df72444c6dda1882f322b944ecf78d38f6ed0fa11", current: "ee071d50746cc8ce71e95294c8e396fe75b242edeaec1b1eaaa4a0a59c1b93c4" },
  { version: 6, previous: "06f942ab7d929149a29a2cb708b91aea654d32deb2e32f2e31c539ddd5bdec83", current: "df8f6688b722819032fc3af2522f8f5dd3ea2ba7448c65666bc2e060fac8a32c" },
  { version: 7, previous: "d17775c13e8b078fd663fed76d170d833cf7405cf8f8e90e8bff4e7cf8050dd5", current: "9a3ab032c058b3a65d97d1e38c5aafba235e8441f695c54f16b8bbde3c65fd4b" },
  { version: 9, previous: "af9bf614bf31aba0165ed77156b5576a8533cd214f9e0c0c86e30fa066d80452", current: "3cda0d669fd9f786224bf2e5c0b7966cea9e75046d99dcbc36e8f44aa8748274" },
  { version: 10, previous: "824c1ce28c22b0351bb94a4736372186389b379196598f58b2b58cab455b0cb8", current: "80d94d917199b56f6cd51a93b9d98272d6dd5f62c1466e1ba95aec3a4eac0af3" },
  { version: 11, previous: "9636678c01cf813acda2fefb1921d7184d7315932c9a601156bc76056469b06e", current: "8addf3016d78ed63cc3d2f4a23c5f385ee37ef18e80678aa9e620c40a25ec77d" },
  { version: 12, previous: "12fb0cbae7b6280dc29cd6f81039889ba7bc9411b0971e78789e195ac975da82", current: "8cc89bab409560d83478ba25f1494adb9eb9f84c1ad86879e47434829592fc89" },
  { version: 13, previous: "4f141b1fb65371786201b33269f95ea4351e2c1a72197b9485ec5af98090c0e9", current: "154b31df02fd2956861a1ac70cc81aedc7e547dfc264b5974e7daa67775aef7a" },
  { version: 14, previous: "c90b6491e6c57b37a0387649239943f42170d6a64543deab8786495cb057c232", current: "3ac05648551d7b204c9b8b2f16c72fe6ed89aa9724b1efbb8c8bdd7e9298e8af" },
  { version: 15, previous: "cbaf7e495f716adf1a62a57f31ef64595355588b5488dc639d794f56ae8c6dc6", current: "b887fbb8c40fc4d0fab6df3cd230c8896b9d147856622da7247e96715e0968d0" },
  { version: 16, previous: "51c8c16b2163403aa1114f213a9ab71be6e0cd0fcd42fc6c4aea328daf577d37", current: "1f86d84dfe276e73ad1d3cbd78a96992c57b1458f2ee672fbe2981a837dbd725" }
]

const checksumOf = (text: string) => createHash("sha256").update(text).digest("hex")

const readSqlFiles = (dir: string, what: string) =>
  Effect.gen(function*() {
    const names = yield* Effect.tryPromise({
      try: () => fs.readdir(dir),
      catch: () => new MigrationError({ message: `cannot read ${what} from ${dir}` })
    })
    const files: Array<{ readonly file: string; readonly text: string }> = []
    for (const file of names.filter((name) => name.endsWith(".sql")).sort()) {
      const text = yield* Effect.tryPromise({
        try: () => fs.readFile(path.join(dir, file), "utf8"),
        catch: () => new MigrationError({ message: `cannot read ${file}` })
      })
      files.push({ file, text })
    }
    return files
  })

export const readMigrations = Effect.fn("Migrator.read")(function*(dir: string = MIGRATIONS_DIR) {
  const migrations: Array<Migration> = []
  for (const { file, text } of yield* readSqlFiles(dir, "migrations")) {
    const match = FILE_NAME.exec(file)
    if (!match) return yield* new MigrationError({ message: `${file}: migration files are named NNNN_name.sql` })
    const version = Number(match[1])
    if (migrations.some((m) => m.version === version)) {
      return yield* new MigrationError({ message: `${file}: version ${match[1]} is used twice` })
    }
    migrations.push({ version, name: match[2]!, text, checksum: checksumOf(text) })
  }
  return migrations
})

export const readSysSql = Effect.fn("Migrator.readSysSql")(function*(dir: string = SYS_SQL_DIR) {
  const files: Array<SysSqlFile> = []
  for (const { file, text } of yield* readSqlFiles(dir, "sys SQL")) {
    if (!SYS_FILE_NAME.test(file)) return yield* new MigrationError({ message: `${file}: sys SQL files are named NN_name.sql` })
    files.push({ name: file, text, checksum: checksumOf(text) })
  }
  return files
})

const withLock = <A, E, R>(sql: SqlClient.SqlClient, body: Effect.Effect<A, E, R>) =>
  sql.withTransaction(Effect.andThen(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY}::bigint)`, body))

/** Applies what is pending; returns the file names it applied (empty when up to date). */
export const migrate = Effect.fn("Migrator.migrate")(function*(migrations: ReadonlyArray<Migration>) {
  const sql = yield* SqlClient.SqlClient
  const failed = (what: string) => (cause: unknown) => new MigrationError({ message: `${what}: ${describeFailure(cause)}` })
  yield* withLock(sql, Effect.gen(function*() {
    yield* sql`CREATE SCHEMA IF NOT EXISTS plinth`
    yield* sql`CREATE TABLE IF NOT EXISTS plinth.schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      checksum text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`
  })).pipe(Effect.mapError(failed("cannot prepare the migrations table")))

  const applied: Array<string> = []
  const rewrites: Array<string> = []
  for (const migration of migrations) {
    const file = `${String(migration.version).padStart(4, "0")}_${migration.name}.sql`
    const statements = yield* splitStatements(migration.text).pipe(
      Effect.mapError((error) => new MigrationError({ message: `${file}: ${error.message}` }))
    )
    const ran = yield* withLock(sql, Effect.gen(function*() {
      const [done] = yield* sql<{ checksum: string }>`
        SELECT checksum FROM plinth.schema_migrations WHERE version = ${migration.version}`
      if (done) {
        if (done.checksum === migration.checksum) return false
        const rewritten = REWRITTEN.some((r) =>
          r.version === migration.version && r.previous === done.checksum && r.current === migration.checksum
        )
        if (!rewritten) {
          return yield* new MigrationError({ message: `${file} was changed after it was applied; add a new migration instead` })
        }
        yield* sql`UPDATE plinth.schema_migrations SET checksum = ${migration.checksum} WHERE version = ${migration.version}`
        rewrites.push(file)
        return false
      }
      for (const statement of statements) yield* sql.unsafe(statement).unprepared
      yield* sql`INSERT INTO plinth.schema_migrations (version, name, checksum)
        VALUES (${migration.version}, ${migration.name}, ${migration.checksum})`
      return true
    })).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failed(file)(error))))
    if (ran) applied.push(file)
  }
  if (rewrites.length > 0) {
    yield* Effect.logInfo(`recorded the rewritten text of ${rewrites.join(", ")} (their functions moved to sql/sys/)`)
  }
  return applied
})

/**
 * After the numbered migrations: the sys SQL files, in name order, each in its own transaction
 * under the migrations' lock. A file runs when its checksum differs from the one recorded, and also
 * when migrations were applied since it last ran (a migration may have dropped or changed what it
 * defines: a view over a column whose type changed), so every file must be safe to run again
 * (CREATE OR REPLACE, GRANT and REVOKE). Returns the names of the files it ran.
 */
export const applySysSql = Effect.fn("Migrator.applySysSql")(function*(files: ReadonlyArray<SysSqlFile>) {
  const sql = yield* SqlClient.SqlClient
  yield* withLock(sql, sql`CREATE TABLE IF NOT EXISTS plinth.sys_sql (
      name text PRIMARY KEY,
      checksum text NOT NULL,
      -- How many migrations were recorded when the file ran.
      migrations integer NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`).pipe(Effect.mapError((error) => new MigrationError({ message: `cannot prepare the sys SQL table: ${describeFailure(error)}` })))
  const applied: Array<string> = []
  for (const file of files) {
    const statements = yield* splitStatements(file.text).pipe(
      Effect.mapError((error) => new MigrationError({ message: `sql/sys/${file.name}: ${error.message}` }))
    )
    const ran = yield* withLock(sql, Effect.gen(function*() {
      const [state] = yield* sql<{ checksum: string | null; recorded: number; migrations: number | null }>`
        SELECT (SELECT checksum FROM plinth.sys_sql WHERE name = ${file.name}) AS checksum,
          (SELECT migrations FROM plinth.sys_sql WHERE name = ${file.name}) AS migrations,
          (SELECT count(*)::int FROM plinth.schema_migrations) AS recorded`
      if (state!.checksum === file.checksum && state!.migrations === state!.recorded) return false
      for (const statement of statements) yield* sql.unsafe(statement).unprepared
      yield* sql`INSERT INTO plinth.sys_sql (name, checksum, migrations) VALUES (${file.name}, ${file.checksum}, ${state!.recorded})
        ON CONFLICT (name) DO UPDATE SET checksum = excluded.checksum, migrations = excluded.migrations, applied_at = now()`
      return true
    })).pipe(Effect.catchTag("SqlError", (error) =>
      Effect.fail(new MigrationError({ message: `sql/sys/${file.name}: ${describeFailure(error)}` }))))
    if (ran) applied.push(file.name)
  }
  return applied
})

/**
 * After the numbered migrations and the sys SQL: no Plinth role may execute a function the SQL guard denies
 * (DeniedFunctions.ts), in any schema, whatever a migration, an extension or an administrator
 * granted, except what the login roles keep on purpose (LOGIN_ROLE_GRANTS). Runs every time, so
 * new functions of a denied name (an extension installed later) are caught on the next start;
 * revokes only what is still granted, so a database already in order is not written to. Where the
 * migrating role neither is a superuser nor owns a function (managed PostgreSQL), that revoke is
 * impossible: it is skipped and counted in the result, for the caller to warn about.
 */
export const revokeDeniedFunctions = Effect.fn("Migrator.revokeDeniedFunctions")(function*() {
  const sql = yield* SqlClient.SqlClient
  const roles = [...APP_ROLES, ...LOGIN_ROLES]
  return yield* withLock(sql, Effect.gen(function*() {
    const granted = yield* sql<{ fn: string; kept: boolean; revocable: boolean }>`
      WITH kept AS (
        SELECT to_regprocedure(f) AS oid FROM jsonb_array_elements_text(${JSON.stringify(LOGIN_ROLE_GRANTS)}::jsonb) AS f
      )
      SELECT DISTINCT p.oid::regprocedure::text AS fn, p.oid IN (SELECT oid FROM kept) AS kept,
        (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) OR pg_catalog.pg_has_role(p.proowner, 'USAGE') AS revocable
      FROM pg_catalog.pg_proc p
      CROSS JOIN pg_catalog.pg_roles r
      WHERE r.rolname IN (SELECT jsonb_array_elements_text(${JSON.stringify(roles)}::jsonb))
        AND (p.proname IN (SELECT jsonb_array_elements_text(${JSON.stringify([...DENIED_FUNCTION_NAMES])}::jsonb))
          OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(${JSON.stringify(DENIED_FUNCTION_PREFIXES)}::jsonb) AS prefix
                     WHERE starts_with(p.proname::text, prefix)))
        AND pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE')
        AND NOT (p.oid IN (SELECT oid FROM kept) AND r.rolname IN (SELECT jsonb_array_elements_text(${JSON.stringify(LOGIN_ROLES)}::jsonb)))
      ORDER BY 1`
    for (const { fn, kept } of granted.filter((row) => row.revocable)) {
      // The function as the catalog prints it (quoted where needed); the roles are constants.
      const from = ["PUBLIC", ...(kept ? APP_ROLES : roles).map((role) => `"${role}"`)]
      yield* sql.unsafe(`REVOKE EXECUTE ON FUNCTION ${fn} FROM ${from.join(", ")}`).unprepared
    }
    return { notRevocable: granted.filter((row) => !row.revocable).map((row) => row.fn) }
  })).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(new MigrationError({ message: `cannot revoke denied functions: ${describeFailure(error)}` }))))
})
