/**
 * A second PostgreSQL cluster for the tests of tenants across clusters (issue #27): an embedded
 * server of its own (data directory and port), started once by the test file that needs it and
 * stopped (its data removed) after. Small: few connections, small shared buffers.
 */
import { Effect, Exit, Layer, Scope } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { inject } from "vitest"
import { DatabaseUrls } from "../../src/layers/Database.ts"
import { startEmbeddedPostgres } from "../../src/layers/EmbeddedPostgres.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { freePort } from "./ports.ts"
import { testEnv } from "./services.ts"

export interface TestCluster {
  /** Superuser URL of database `database` (default `postgres`). */
  readonly adminUrl: (database?: string) => string
  /** The `{tenant}` templates `plinth cluster add` takes: the superuser, and the two login roles with the suite's passwords. */
  readonly templates: { readonly admin: string; readonly url: string; readonly chat: string }
  readonly stop: () => Promise<void>
}

export const startTestCluster = async (settings: Readonly<Record<string, string>> = {}): Promise<TestCluster> => {
  const { passwords } = inject("plinthDatabase")
  const scope = Effect.runSync(Scope.make())
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-cluster-"))
  const server = await Effect.runPromise(Scope.provide(scope)(startEmbeddedPostgres({
    pgData: path.join(dataDir, "pg"),
    port: await freePort(),
    superuserPassword: randomBytes(16).toString("hex"),
    settings: { shared_buffers: "16MB", max_connections: "60", ...settings }
  })))
  const at = (role: string, password: string) => `postgres://${role}:${password}@127.0.0.1:${server.port}/{tenant}`
  return {
    adminUrl: (database = "postgres") => server.adminUrl(database),
    templates: {
      admin: server.adminUrl("{tenant}"),
      url: at("authenticator", passwords.authenticator),
      chat: at("chat_authenticator", passwords.chat_authenticator)
    },
    stop: async () => {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await fs.rm(dataDir, { recursive: true, force: true })
    }
  }
}

/**
 * Runs what a `plinth` command runs, in this process (a child process per step costs seconds): with
 * the configuration of `env` and the database URLs it names.
 */
export const runAdmin = <A, E>(effect: Effect.Effect<A, E, DatabaseUrls | PlinthConfig>, env: Record<string, string>) =>
  Effect.runPromise(effect.pipe(Effect.provide(adminLayer(env))))

/** What runAdmin provides, for an effect run some other way (forked, to be interrupted). */
export const adminLayer = (env: Record<string, string>) => DatabaseUrls.layer.pipe(Layer.provideMerge(PlinthConfig.layer), Layer.provide(testEnv(env)))

/** GET /events of `tenant` at `url` as the holder of `token`: what it has received, and whether it has ended. */
export const openTenantStream = (url: string, token: string, tenant: string) => {
  let text = ""
  let ended = false
  const request = http.get(new URL(`/events?token=${token}`, url), { headers: { "x-tenant": tenant }, agent: false }, (response) => {
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => (text += chunk))
    response.on("end", () => (ended = true))
  })
  request.on("error", () => undefined)
  return { text: () => text, ended: () => ended, close: () => request.destroy() }
}
