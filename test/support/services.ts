/**
 * Starts a Plinth service in this process on an ephemeral port, wired exactly as in production
 * (same layers), with configuration from an explicit environment map instead of `process.env`.
 */
import { ConfigProvider, Context, Effect, Exit, Layer, Logger, References, Scope } from "effect"
import { HttpServer } from "effect/http"
import { PageChecker, type PageCheckerShape } from "../../src/services/PageChecker.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { chatService, mainService } from "../../src/layers/Services.ts"

export interface RunningService {
  readonly url: string
  readonly close: () => Promise<void>
  /** What the service logged: each entry's message and annotations. */
  readonly logs: ReadonlyArray<LogEntry>
  /** The service's page checker (its own pool of workers, ended when the service closes). */
  readonly pages: PageCheckerShape
}

export interface LogEntry {
  readonly level: string
  readonly message: string
  readonly annotations: Readonly<Record<string, unknown>>
}

/** A logger that keeps entries in memory instead of printing them. */
export const captureLogs = (into: Array<LogEntry>) =>
  Logger.layer([Logger.make(({ fiber, logLevel, message }) => {
    into.push({
      level: logLevel,
      message: (Array.isArray(message) ? message : [message]).map(String).join(" "),
      annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
    })
  })])

/** Signs the tokens of in-process test services (tests forge tokens with it too). */
export const TEST_JWT_SECRET = "plinth-test-secret-0123456789abcdef0123456789"

export const testEnv = (env: Record<string, string> = {}) =>
  ConfigProvider.layer(ConfigProvider.fromEnv({ env: { NODE_ENV: "test", JWT_SECRET: TEST_JWT_SECRET, PLINTH_DATA_DIR: "/nonexistent/plinth-test", ...env } }))

/** A service in this process with its own logger: its URL, and how to close it. */
export const serveInProcess = async (
  which: "main" | "chat",
  name: string,
  databaseUrl: string,
  env: Record<string, string>,
  logger: Layer.Layer<never>
): Promise<{ readonly url: string; readonly close: () => Promise<void>; readonly pages: PageCheckerShape }> => {
  const make = which === "main" ? mainService : chatService
  const layer = make({ host: "127.0.0.1", port: 0, name }, databaseUrl).pipe(
    Layer.provideMerge(PageChecker.layer),
    Layer.provide(PlinthConfig.layer),
    Layer.provide(testEnv(env)),
    Layer.provide(logger)
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(layer, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  const port = address._tag === "UnixPathAddress" ? 0 : address.port
  return { url: `http://127.0.0.1:${port}`, close: () => Effect.runPromise(Scope.close(scope, Exit.void)), pages: Context.get(context, PageChecker) }
}

export const startService = async (
  which: "main" | "chat",
  databaseUrl: string,
  env: Record<string, string> = {}
): Promise<RunningService> => {
  const logs: Array<LogEntry> = []
  return { ...(await serveInProcess(which, which, databaseUrl, env, captureLogs(logs))), logs }
}
