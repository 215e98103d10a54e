/**
 * The two services as layers: routes + tenants (database pools) + HTTP server. Both share one
 * codebase and differ only in their routes and the role they connect as. Both need the process's
 * PageChecker, given by whoever runs them, so that two services in one process share its workers.
 */
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { ConversationActors } from "../actors/ConversationActor.ts"
import { makeSharedRateLimiter, RateLimiter } from "../actors/RateLimiter.ts"
import { ChatRoutes } from "../http/ChatRoutes.ts"
import { serveConsole } from "../http/ConsoleRoutes.ts"
import { makeCorsPolicy } from "../http/Cors.ts"
import { type ListenOptions, serveHttp } from "../http/HttpServerLive.ts"
import { MainRoutes } from "../http/MainRoutes.ts"
import { requestLogSetting } from "../http/RequestLog.ts"
import { ProcessTenant, TenantSelection, TenantSource } from "../http/TenantSelection.ts"
import { sharedClaims } from "../services/Challenge.ts"
import { failAbandoned } from "../services/Conversations.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { warnWithoutTempFileLimit } from "../services/ResourceLimits.ts"
import { SqlGuard } from "../services/SqlGuard.ts"
import { SqlRunner } from "../services/SqlRunner.ts"
import { StatementAdmission } from "../services/StatementAdmission.ts"
import { AccessTokensLive } from "./AccessTokensLive.ts"
import { CONSOLE_OUTPUT_DIR } from "./ConsoleBuild.ts"
import { requireUrl } from "./Database.ts"
import { ChallengeInMemory, challengeLayer, MailerLive, ModelLive } from "./Integrations.ts"
import { tenantSource } from "./Tenancy.ts"

/**
 * Rate limits and bot-check claims: in memory (one process), or in PostgreSQL so that every replica
 * sees the same requests (RATE_LIMIT_STORE) — the default whenever DATABASE_URL is set (several
 * replicas are possible then).
 */
const sharedStore = <A, E, R>(memory: Layer.Layer<A, E, R>, shared: (sql: SqlClient.SqlClient) => Layer.Layer<A, E, R>) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* PlinthConfig
    const store = Option.getOrElse(config.rateLimitStore, () => (Option.isSome(config.databaseUrl) ? "postgres" : "memory"))
    if (store === "memory") return memory
    const source = yield* TenantSource
    return shared(Context.get(source.process, SqlClient.SqlClient))
  }))

const RateLimiterLive = sharedStore(RateLimiter.layer, (sql) => Layer.effect(RateLimiter, makeSharedRateLimiter(sql)))
const ChallengeLive = sharedStore(ChallengeInMemory, (sql) => challengeLayer(sharedClaims(sql)))

/** What the main service's handlers stand on, besides the tenant of each request. */
const MainDependencies = Layer.mergeAll(AccessTokensLive, RateLimiterLive, ChallengeLive, MailerLive, SqlGuard.layer, SqlRunner.layer, StatementAdmission.layer)

/** One warning at start, off the start-up path, when callers' statements have no bound on temporary files. */
const TempFileLimitCheck = Layer.effectDiscard(Effect.gen(function*() {
  const source = yield* TenantSource
  yield* Effect.forkScoped(Effect.provideService(warnWithoutTempFileLimit(), SqlClient.SqlClient, Context.get(source.process, SqlClient.SqlClient)))
}))

const redactedValue = (value: Option.Option<Redacted.Redacted<string>>) => Option.getOrUndefined(Option.map(value, Redacted.value))

/**
 * The main service, connected as `authenticator` (in multi-tenant mode: to the control database),
 * and the console, which answers what no route matches (its files are the same for every tenant).
 */
export const mainService = (listen: ListenOptions, databaseUrl: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* PlinthConfig
    return serveHttp(MainRoutes.pipe(Layer.provide(TenantSelection.layer)), listen, makeCorsPolicy(config.corsOrigins), serveConsole(CONSOLE_OUTPUT_DIR, config)).pipe(
      Layer.provide(Layer.mergeAll(MainDependencies, ProcessTenant, TempFileLimitCheck, requestLogSetting(config.logRequests))),
      Layer.provideMerge(tenantSource(databaseUrl, redactedValue(config.tenantDatabaseUrl)))
    )
  }))

/** What the chat service's handlers stand on, besides the tenant of each request. */
const ChatDependencies = Layer.mergeAll(AccessTokensLive, ModelLive, ConversationActors.layer.pipe(Layer.provideMerge(SqlGuard.layer)))

/** The chat service, connected as `chat_authenticator`. */
export const chatService = (listen: ListenOptions, databaseUrl: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* PlinthConfig
    // Replies a crashed process left pending are closed as each tenant starts.
    const recover = failAbandoned(Duration.toSeconds(config.chatAbandonedAfter)).pipe(
      Effect.tap((count) => (count > 0 ? Effect.logWarning(`marked ${count} abandoned chat replies as error`) : Effect.void)),
      Effect.catchCause((cause) => Effect.logWarning("chat recovery failed", cause)),
      Effect.asVoid
    )
    return serveHttp(ChatRoutes.pipe(Layer.provide(TenantSelection.layer)), listen, makeCorsPolicy(config.corsOrigins)).pipe(
      Layer.provide(Layer.mergeAll(ChatDependencies, ProcessTenant, requestLogSetting(config.logRequests))),
      Layer.provide(tenantSource(databaseUrl, redactedValue(config.tenantChatDatabaseUrl), recover, "chat"))
    )
  }))

/** The main service on `HOST:PORT`. */
export const MainService = Layer.unwrap(Effect.gen(function*() {
  const config = yield* PlinthConfig
  return mainService({ host: config.host, port: config.port, name: "main" }, yield* requireUrl("main"))
}))

/** The chat service on `HOST:CHAT_PORT`. */
export const ChatService = Layer.unwrap(Effect.gen(function*() {
  const config = yield* PlinthConfig
  return chatService({ host: config.host, port: config.chatPort, name: "chat" }, yield* requireUrl("chat"))
}))
