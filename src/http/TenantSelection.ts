/**
 * Which tenant serves a request. Single-tenant: always the process's own. Multi-tenant: the one
 * `X-Tenant` names (for GET /events, which EventSource opens, `?tenant=` too; 400 when missing or
 * malformed, 404 when the registry does not list it, 503 with Retry-After while a move to another
 * cluster fences it), with
 * the tenant's services (pool, event fan-out, caches) provided to the route for the request's
 * lifetime. `/health`, `/ready` and `/openapi.json` need no tenant: they answer for the process.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, type Scope } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { SqlClient } from "effect/sql"
import type { TenantActor } from "../actors/TenantActor.ts"
import type { AppRegistry } from "../services/AppRegistry.ts"
import type { CatalogWatch } from "../services/CatalogWatch.ts"
import type { Introspection } from "../services/Introspection.ts"
import type { StatementConnections } from "../services/StatementConnections.ts"
import type { TenantFailure } from "../services/Tenants.ts"
import { TENANT_NAME } from "../services/TenantName.ts"

/** Everything that is per tenant. */
export type TenantServices = TenantActor | AppRegistry | CatalogWatch | Introspection | SqlClient.SqlClient | PgClient.PgClient | StatementConnections

export class TenantSource extends Context.Service<TenantSource, {
  /** The process's own services (single tenant; the control database in multi-tenant mode). */
  readonly process: Context.Context<TenantServices>
  /** Multi-tenant mode only: a registered tenant's services for the caller's scope. */
  readonly tenant: Option.Option<
    (name: string) => Effect.Effect<Context.Context<TenantServices>, TenantFailure, Scope.Scope>
  >
}>()("plinth/TenantSource") {}

/** The tenant of the current request (multi-tenant mode); JWTs must carry the same name. */
export const CurrentTenant = Context.Reference<Option.Option<string>>("plinth/CurrentTenant", { defaultValue: () => Option.none() })

/**
 * The current request's tenant (multi-tenant mode), held for the caller's scope as well: an event
 * stream outlives its request, and its tenant must not be released as idle while it is open.
 */
export const holdTenant: Effect.Effect<void, never, TenantSource | Scope.Scope> = Effect.gen(function*() {
  const source = yield* TenantSource
  const name = yield* CurrentTenant
  if (Option.isNone(source.tenant) || Option.isNone(name)) return
  // The request holds the tenant already: this only counts one more holder (it fails only when the
  // tenant began a move since, and then the stream is retired with the tenant's other streams).
  yield* Effect.ignore(source.tenant.value(name.value))
})

/** The paths that answer for the process, not a tenant. */
export const PROCESS_PATHS: ReadonlySet<string> = new Set(["/health", "/ready", "/openapi.json"])

/**
 * Single-tenant mode: the process's tenant services in the server's own context, which every
 * request's starts from. Provided per request instead, they would cost each request a copy of its
 * whole context (docs/performance-notes.md). In multi-tenant mode: nothing (TenantSelection
 * provides each request's tenant).
 */
export const ProcessTenant: Layer.Layer<never, never, TenantSource> = Layer.effectContext(
  Effect.map(TenantSource, (source) => (Option.isNone(source.tenant) ? source.process as Context.Context<never> : Context.empty()))
)

/** The event stream, which browsers open with EventSource: it cannot set headers, so its tenant may come as `?tenant=`. */
const EVENTS_PATH = "/events"

const tenantParameter = (url: string): string | undefined => {
  const query = url.indexOf("?")
  return query === -1 ? undefined : new URLSearchParams(url.slice(query + 1)).get("tenant") ?? undefined
}

const plainError = (status: number, error: string) => HttpServerResponse.jsonUnsafe({ error }, { status })

export const TenantSelection = HttpRouter.middleware<{ provides: TenantServices }>()(
  Effect.gen(function*() {
    const source = yield* TenantSource
    const tenant = source.tenant
    // Single-tenant mode: every request is the process's, and its context has the process's
    // services from the start (ProcessTenant): nothing to do per request.
    // (The cast: the router takes these services as this middleware's to provide.)
    if (Option.isNone(tenant)) return (app) => app as Effect.Effect<HttpServerResponse.HttpServerResponse, Effect.Error<typeof app>>
    return (app) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const path = request.url.split("?")[0] ?? "/"
        if (PROCESS_PATHS.has(path)) return yield* Effect.provideContext(app, source.process)
        const name = request.headers["x-tenant"] ?? (path === EVENTS_PATH ? tenantParameter(request.url) : undefined)
        if (name === undefined || name === "") return plainError(400, "X-Tenant is required")
        if (!TENANT_NAME.test(name)) return plainError(400, "invalid X-Tenant")
        const context = yield* tenant.value(name).pipe(Effect.result)
        if (context._tag === "Failure") {
          switch (context.failure._tag) {
            case "UnknownTenant":
              return plainError(404, `unknown tenant: ${name}`)
            case "TenantsExhausted":
              return plainError(503, "too many active tenants; try again later")
            case "TenantUnavailable":
              return plainError(503, "tenant database unavailable")
            case "TenantMoving":
              // The move's fence lasts seconds: the client tries again after one.
              return HttpServerResponse.jsonUnsafe({ error: "tenant is moving to another cluster; try again shortly" }, {
                status: 503,
                headers: { "retry-after": "1" }
              })
          }
        }
        return yield* Effect.provideContext(app, context.success).pipe(Effect.provideService(CurrentTenant, Option.some(name)))
      })
  })
)
