/**
 * Forward-only migrations: `migrations/NNNN_name.sql`, applied in order, each once, each in its own
 * transaction, recorded in `plinth.schema_migrations`. A transaction-scoped advisory lock makes
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

/** Shipped next to `src/` (and copied next to `dist/src/` by the build). */
export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url))

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/
/** Any constant shared by every Plinth process; it names the lock, nothing more. */
const MIGRATION_LOCK_KEY = 7_270_001

export const readMigrations = Effect.fn("Migrator.read")(function*(dir: string = MIGRATIONS_DIR) {
  const names = yield* Effect.tryPromise({
    try: () => fs.readdir(dir),
    catch: () => new MigrationError({ message: `cannot read migrations from ${dir}` })
  })
  const migrations: Array<Migration> = []
  for (const file of names.filter((name) => name.endsWith(".sql")).sort()) {
    const match = FILE_NAME.exec(file)
    if (!match) return yield* new MigrationError({ message: `${file}: migration files are named NNNN_name.sql` })
    const text = yield* Effect.tryPromise({
      try: () => fs.readFile(path.join(dir, file), "utf8"),
      catch: () => new MigrationError({ message: `cannot read ${file}` })
    })
    const version = Number(match[1])
    if (migrations.some((m) => m.version === version)) {
      return yield* new MigrationError({ message: `${file}: version ${match[1]} is used twice` })
    }
    migrations.push({ version, name: match[2]!, text, checksum: createHash("sha256").update(text).digest("hex") })
  }
  return migrations
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
  for (const migration of migrations) {
    const file = `${String(migration.version).padStart(4, "0")}_${migration.name}.sql`
    const statements = yield* splitStatements(migration.text).pipe(
      Effect.mapError((error) => new MigrationError({ message: `${file}: ${error.message}` }))
    )
    const ran = yield* withLock(sql, Effect.gen(function*() {
      const [done] = yield* sql<{ checksum: string }>`
        SELECT checksum FROM plinth.schema_migrations WHERE version = ${migration.version}`
      if (done) {
        if (done.checksum !== migration.checksum) {
          return yield* new MigrationError({ message: `${file} was changed after it was applied; add a new migration instead` })
        }
        return false
      }
      for (const statement of statements) yield* sql.unsafe(statement).unprepared
      yield* sql`INSERT INTO plinth.schema_migrations (version, name, checksum)
        VALUES (${migration.version}, ${migration.name}, ${migration.checksum})`
      return true
    })).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failed(file)(error))))
    if (ran) applied.push(file)
  }
  return applied
})

/**
 * After the numbered migrations: no Plinth role may execute a function the SQL guard denies
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
