/**
 * A database of the test file's own, cloned from the migrated template of globalSetup, with URLs
 * for each of the roles Plinth connects as.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { inject } from "vitest"
import { withDatabase } from "../../src/layers/Database.ts"
import { quoteIdentifier } from "../../src/services/SqlIdentifier.ts"
import { TEMPLATE_DATABASE, withDatabaseName } from "./globalSetup.ts"

export interface TestDatabase {
  readonly name: string
  /** Superuser: migrations, fixtures, catalog checks. */
  readonly adminUrl: string
  /** As `authenticator` (the main service). */
  readonly mainUrl: string
  /** As `chat_authenticator` (the chat service). */
  readonly chatUrl: string
  readonly drop: () => Promise<void>
}

const asRole = (url: string, role: string, password: string) => {
  const parsed = new URL(url)
  parsed.username = role
  parsed.password = password
  return parsed.toString()
}

/** Creates a fresh database: from the migrated template, or empty (`{ migrated: false }`). */
export const createTestDatabase = async (options: { readonly migrated?: boolean } = {}): Promise<TestDatabase> => {
  const { serverAdminUrl, passwords } = inject("plinthDatabase")
  const name = `plinth_test_${randomBytes(6).toString("hex")}`
  const template = options.migrated === false ? "template0" : TEMPLATE_DATABASE
  await Effect.runPromise(withDatabase(serverAdminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Two files cloning the template at the same instant can collide; a retry settles it.
    yield* sql.unsafe(`CREATE DATABASE ${quoteIdentifier(name)} TEMPLATE ${quoteIdentifier(template)}`).unprepared.pipe(
      Effect.retry({ times: 5 })
    )
  })))
  const adminUrl = withDatabaseName(serverAdminUrl, name)
  return {
    name,
    adminUrl,
    mainUrl: asRole(adminUrl, "authenticator", passwords.authenticator),
    chatUrl: asRole(adminUrl, "chat_authenticator", passwords.chat_authenticator),
    drop: () =>
      Effect.runPromise(withDatabase(serverAdminUrl, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql.unsafe(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`).unprepared
      })))
  }
}

/** Runs `effect` with a SqlClient connected to `url`. */
export const runSql = <A, E>(url: string, effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.runPromise(withDatabase(url, effect))

/** Runs `run` with a SqlClient connected to `url`: `query(url, (sql) => sql\`SELECT 1\`)`. */
export const query = <A, E>(url: string, run: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  runSql(url, Effect.gen(function*() {
    return yield* run(yield* SqlClient.SqlClient)
  }))

/**
 * How many statements are sleeping in `pg_sleep` in the database of `adminUrl`: found by wait event,
 * since a peeked SELECT runs wrapped in a subquery and its text is then not the caller's.
 */
export const sleepingStatements = (adminUrl: string) =>
  query(adminUrl, (sql) =>
    sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE state = 'active' AND wait_event = 'PgSleep' AND datname = current_database() AND pid <> pg_backend_pid()`)
    .then((rows) => rows[0]!.n)
