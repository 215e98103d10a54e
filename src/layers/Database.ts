/**
 * Where the database is: the configured URLs (DATABASE_URL and its siblings), or an embedded
 * PostgreSQL 18 in the data directory. This is the only module that decides between the two.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import * as path from "node:path"
import { describeFailure } from "../services/DatabaseError.ts"
import { applySysSql, migrate, readMigrations, readSysSql, revokeDeniedFunctions } from "../services/Migrator.ts"
import { quoteIdentifier } from "../services/SqlIdentifier.ts"
import { InvalidConfig, PlinthConfig } from "../services/PlinthConfig.ts"
import { startEmbeddedPostgres } from "./EmbeddedPostgres.ts"
import { loadLocalSecrets } from "./LocalSecrets.ts"

export class DatabaseSetupError extends Schema.TaggedError<DatabaseSetupError>()("DatabaseSetupError", {
  message: Schema.String
}) {}

export interface DatabaseUrlsShape {
  /** Migrations, tenant creation, `plinth invite`. */
  readonly admin: Option.Option<Redacted.Redacted<string>>
  /** The main service, as `authenticator`. */
  readonly main: Option.Option<Redacted.Redacted<string>>
  /** The chat service, as `chat_authenticator`. */
  readonly chat: Option.Option<Redacted.Redacted<string>>
  /** True when this process started PostgreSQL itself (and has migrated it). */
  readonly embedded: boolean
}

/** The embedded cluster's database for Plinth (the cluster's `postgres` database stays untouched). */
export const EMBEDDED_DATABASE = "plinth"

const setupFailed = (what: string) => (cause: unknown) => new DatabaseSetupError({ message: `${what}: ${describeFailure(cause)}` })

/** Runs `effect` on a short-lived connection pool to `url`. */
export const withDatabase = <A, E, R>(url: string, effect: Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.provide(effect, PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })))

/** Creates database `name` on the server behind `serverUrl` unless it exists. */
export const ensureDatabase = Effect.fn("Database.ensure")(function*(serverUrl: string, name: string, template?: string) {
  yield* withDatabase(serverUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const found = yield* sql`SELECT 1 FROM pg_catalog.pg_database WHERE datname = ${name}`
    if (found.length > 0) return
    const from = template === undefined ? "" : ` TEMPLATE ${quoteIdentifier(template)}`
    yield* sql.unsafe(`CREATE DATABASE ${quoteIdentifier(name)}${from}`).unprepared
  })).pipe(Effect.mapError(setupFailed(`cannot create database ${name}`)))
})

/**
 * Applies pending migrations with an administrator's URL, then the sys SQL files that changed (the
 * functions, views and triggers of `sql/sys/`), then revokes what the SQL guard denies (every run,
 * also when nothing was pending); returns the migration files applied.
 */
export const migrateDatabase = Effect.fn("Database.migrate")(function*(adminUrl: string) {
  const migrations = yield* readMigrations()
  const sysFiles = yield* readSysSql()
  return yield* withDatabase(adminUrl, Effect.gen(function*() {
    const applied = yield* migrate(migrations)
    const sysApplied = yield* applySysSql(sysFiles)
    if (sysApplied.length > 0) yield* Effect.logInfo(`applied sys SQL: ${sysApplied.join(", ")}`)
    const { notRevocable } = yield* revokeDeniedFunctions()
    if (notRevocable.length > 0) {
      yield* Effect.logWarning(
        `${notRevocable.length} functions the SQL guard refuses stay executable by Plinth's roles: the migrating role does not own them, so only the guard keeps callers from them (${notRevocable.slice(0, 5).join(", ")}${notRevocable.length > 5 ? ", ..." : ""})`
      )
    }
    return applied
  })).pipe(
    Effect.catchTag("SqlError", setupFailed("cannot connect to migrate"))
  )
})

const GeneratedPassword = /^[0-9a-f]{32,128}$/

/** Gives the login roles the passwords the embedded install generated (cluster-wide). */
export const setLoginPasswords = Effect.fn("Database.setLoginPasswords")(
  function*(adminUrl: string, passwords: { readonly authenticator: string; readonly chat_authenticator: string }) {
    yield* withDatabase(adminUrl, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      for (const [role, password] of Object.entries(passwords)) {
        // ALTER ROLE takes no parameters; these passwords are our own hex strings, checked here.
        if (!GeneratedPassword.test(password)) return yield* new DatabaseSetupError({ message: `malformed password for ${role}` })
        yield* sql.unsafe(`ALTER ROLE ${quoteIdentifier(role)} WITH LOGIN PASSWORD '${password}'`).unprepared
      }
    })).pipe(Effect.catchTag("SqlError", setupFailed("cannot set login passwords")))
  }
)

export const loginUrl = (port: number, role: string, password: string, database: string) =>
  `postgres://${role}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`

export class DatabaseUrls extends Context.Service<DatabaseUrls, DatabaseUrlsShape>()("plinth/DatabaseUrls") {
  /** URLs from the environment when `DATABASE_URL` is set; otherwise the embedded PostgreSQL. */
  static readonly layer = Layer.effect(DatabaseUrls, Effect.gen(function*() {
    const config = yield* PlinthConfig
    if (Option.isSome(config.databaseUrl)) {
      return {
        admin: config.adminDatabaseUrl,
        main: config.databaseUrl,
        chat: config.chatDatabaseUrl,
        embedded: false
      }
    }
    const dataDir = path.resolve(config.dataDir)
    const secrets = yield* loadLocalSecrets(dataDir)
    const server = yield* startEmbeddedPostgres({
      pgData: path.join(dataDir, "pg"),
      port: config.pgPort,
      superuserPassword: secrets.postgres
    })
    yield* ensureDatabase(server.adminUrl(), EMBEDDED_DATABASE)
    const adminUrl = server.adminUrl(EMBEDDED_DATABASE)
    const applied = yield* migrateDatabase(adminUrl)
    if (applied.length > 0) yield* Effect.logInfo(`applied migrations: ${applied.join(", ")}`)
    yield* setLoginPasswords(adminUrl, { authenticator: secrets.authenticator, chat_authenticator: secrets.chat_authenticator })
    return {
      admin: Option.some(Redacted.make(adminUrl)),
      main: Option.some(Redacted.make(loginUrl(server.port, "authenticator", secrets.authenticator, EMBEDDED_DATABASE))),
      chat: Option.some(Redacted.make(loginUrl(server.port, "chat_authenticator", secrets.chat_authenticator, EMBEDDED_DATABASE))),
      embedded: true
    }
  }))
}

/** The URL a command needs, or a one-line configuration error naming the variable to set. */
const urlVariable = { admin: "DATABASE_ADMIN_URL", main: "DATABASE_URL", chat: "CHAT_DATABASE_URL" } as const

/** The URL a command needs, or a one-line configuration error naming the variable to set. */
export const requireUrl = Effect.fn("Database.requireUrl")(function*(which: keyof typeof urlVariable) {
  const urls = yield* DatabaseUrls
  const url = urls[which]
  if (Option.isNone(url)) {
    return yield* new InvalidConfig({
      message: `invalid configuration: ${urlVariable[which]}: required when DATABASE_URL is set`
    })
  }
  return Redacted.value(url.value)
})
