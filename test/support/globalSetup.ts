/**
 * Once per test run: a PostgreSQL (the embedded one, or the server behind TEST_DATABASE_URL), a
 * migrated template database, and the login roles' passwords. Each test file then clones the
 * template (test/support/database.ts), so files never see each other's data.
 */
import { Effect, Exit, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import type { TestProject } from "vitest/node"
import { migrateDatabase, setLoginPasswords, withDatabase } from "../../src/layers/Database.ts"
import { startEmbeddedPostgres } from "../../src/layers/EmbeddedPostgres.ts"
import { SqlClient } from "effect/sql"
import { quoteIdentifier } from "../../src/services/SqlIdentifier.ts"
import { freePort } from "./ports.ts"

export const TEMPLATE_DATABASE = "plinth_test_template"

export interface TestDatabaseServer {
  /** Superuser URL of the server's maintenance database (tests swap in their own database's name). */
  readonly serverAdminUrl: string
  readonly passwords: { readonly authenticator: string; readonly chat_authenticator: string }
}

declare module "vitest" {
  export interface ProvidedContext {
    plinthDatabase: TestDatabaseServer
  }
}

export const withDatabaseName = (url: string, database: string) => {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

const recreateTemplate = (serverUrl: string) =>
  withDatabase(serverUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.unsafe(`DROP DATABASE IF EXISTS ${quoteIdentifier(TEMPLATE_DATABASE)} WITH (FORCE)`).unprepared
    yield* sql.unsafe(`CREATE DATABASE ${quoteIdentifier(TEMPLATE_DATABASE)}`).unprepared
  }))

const dropTestDatabases = (serverUrl: string) =>
  withDatabase(serverUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ datname: string }>`SELECT datname FROM pg_database WHERE datname LIKE 'plinth_test_%'`
    for (const { datname } of rows) yield* sql.unsafe(`DROP DATABASE IF EXISTS ${quoteIdentifier(datname)} WITH (FORCE)`).unprepared
  }))

export default async function setup(project: TestProject) {
  const scope = Effect.runSync(Scope.make())
  let dataDir: string | undefined
  let serverUrl: string
  const given = process.env.TEST_DATABASE_URL
  if (given) {
    serverUrl = given
  } else {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-test-"))
    const server = await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres({
      pgData: path.join(dataDir, "pg"),
      port: await freePort(),
      superuserPassword: randomBytes(16).toString("hex")
    })))
    serverUrl = server.adminUrl()
  }
  const passwords = { authenticator: randomBytes(24).toString("hex"), chat_authenticator: randomBytes(24).toString("hex") }
  await Effect.runPromise(Effect.gen(function*() {
    yield* recreateTemplate(serverUrl)
    const templateUrl = withDatabaseName(serverUrl, TEMPLATE_DATABASE)
    yield* migrateDatabase(templateUrl)
    yield* setLoginPasswords(templateUrl, passwords)
  }))
  project.provide("plinthDatabase", { serverAdminUrl: serverUrl, passwords })
  return async () => {
    if (given) await Effect.runPromise(Effect.ignore(dropTestDatabases(serverUrl)))
    await Effect.runPromise(Scope.close(scope, Exit.void))
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true })
  }
}
