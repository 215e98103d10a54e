/**
 * The two services as layers: routes + database pool + HTTP server. Both share one codebase and
 * differ only in their routes and the role they connect as.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { ChatRoutes } from "../http/ChatRoutes.ts"
import { type ListenOptions, serveHttp } from "../http/HttpServerLive.ts"
import { MainRoutes } from "../http/MainRoutes.ts"
import { RateLimiter } from "../actors/RateLimiter.ts"
import { TenantActor } from "../actors/TenantActor.ts"
import { Challenge } from "../services/Challenge.ts"
import { Mailer } from "../services/Mailer.ts"
import { AppRegistry } from "../services/AppRegistry.ts"
import { CatalogWatch } from "../services/CatalogWatch.ts"
import { Introspection } from "../services/Introspection.ts"
import { makeJsonColumnTypes } from "../services/JsonColumnTypes.ts"
import { SqlGuard } from "../services/SqlGuard.ts"
import { AccessTokensLive } from "./AccessTokensLive.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { requireUrl } from "./Database.ts"

const POOL_SIZE = 20

const pool = (url: string) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections: POOL_SIZE, applicationName: "plinth", types: makeJsonColumnTypes() })

/** What the main service's handlers stand on, besides its database pool. */
const MainDependencies = Layer.mergeAll(
  AccessTokensLive,
  RateLimiter.layer,
  Challenge.layer,
  Mailer.layer,
  SqlGuard.layer,
  // One LISTEN connection tells both caches when the catalog changes.
  Layer.mergeAll(AppRegistry.layer, Introspection.layer).pipe(Layer.provide(CatalogWatch.layer))
)

/** The tenant of a single-tenant process: its LISTEN connection and event fan-out. */
const SingleTenant = Layer.unwrap(Effect.gen(function*() {
  const config = yield* PlinthConfig
  return TenantActor.layer({ name: "default", maxStreamsPerUser: config.eventsMaxStreamsPerUser })
}))

/** The main service, connected as `authenticator`. */
export const mainService = (listen: ListenOptions, databaseUrl: string) =>
  serveHttp(MainRoutes, listen).pipe(
    Layer.provide(Layer.mergeAll(MainDependencies, SingleTenant)),
    Layer.provide(pool(databaseUrl))
  )

/** The chat service, connected as `chat_authenticator`. */
export const chatService = (listen: ListenOptions, databaseUrl: string) =>
  serveHttp(ChatRoutes, listen).pipe(Layer.provide(pool(databaseUrl)))

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
