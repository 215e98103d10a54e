/**
 * Per-tenant services, and where a request's tenant comes from: the process's own database
 * (single-tenant mode), or the registry and a database per tenant (multi-tenant mode).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Queue } from "effect"
import { SqlClient } from "effect/sql"
import { TenantActor } from "../actors/TenantActor.ts"
import { TenantSource } from "../http/TenantSelection.ts"
import { AppRegistry } from "../services/AppRegistry.ts"
import { Introspection } from "../services/Introspection.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { makeTenants, type Placement } from "../services/Tenants.ts"
import { deriveTenantTemplate, tenantUrl } from "../services/TenantName.ts"

/** Connections of each of a tenant's pools (the caller pool, the statement connections). */
const POOL_SIZE = 20

/** Work a service does on a tenant's database as the tenant starts (the chat service's recovery). */
export type TenantStart = Effect.Effect<void, never, SqlClient.SqlClient>

/** One tenant: its actor (which owns the pools and the LISTEN connection) and its catalog caches. */
export const tenantServices = (name: string, databaseUrl: string, onStart: TenantStart = Effect.void) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* PlinthConfig
    return Layer.mergeAll(AppRegistry.layer, Introspection.layer, Layer.effectDiscard(onStart)).pipe(
      Layer.provideMerge(TenantActor.layer({
        name,
        url: databaseUrl,
        poolSize: POOL_SIZE,
        maxResponseBytes: config.sqlMaxResponseBytes,
        maxStreamsPerUser: config.eventsMaxStreamsPerUser,
        heartbeat: config.eventsHeartbeat
      }))
    )
  }))

/** The registry's channel: each change of a tenant's row is announced with its name (sql/sys/16_tenant_registry.sql). */
export const TENANTS_CHANNEL = "plinth_tenants"

interface PlacementRow {
  readonly epoch: number
  readonly state: "active" | "moving"
  /** The cluster's runtime template for this service; NULL on the control cluster (`default`). */
  readonly template: string | null
}

/**
 * The tenants of a service connected to `databaseUrl`. In multi-tenant mode that database is the
 * control database (the registry), and each tenant's URL comes from its cluster's runtime template
 * for `service` (the control cluster's: `template`, or one derived from `databaseUrl`) with its name.
 */
export const tenantSource = (databaseUrl: string, template: string | undefined, onStart: TenantStart = Effect.void, service: "main" | "chat" = "main") =>
  Layer.effect(TenantSource, Effect.gen(function*() {
    const config = yield* PlinthConfig
    const process = yield* Layer.build(tenantServices("default", databaseUrl, onStart))
    if (!config.multiTenant) return { process, tenant: Option.none() }
    const sql = Context.get(process, SqlClient.SqlClient)
    const controlTemplate = template ?? deriveTenantTemplate(databaseUrl)
    // Each service may read its own column of the clusters' templates only (migration 0025).
    const rowOf = (name: string) =>
      service === "main"
        ? sql<PlacementRow>`SELECT t.epoch, t.state, c.url_template AS template
            FROM plinth.tenants t JOIN plinth.clusters c ON c.name = t.cluster WHERE t.name = ${name}`
        : sql<PlacementRow>`SELECT t.epoch, t.state, c.chat_url_template AS template
            FROM plinth.tenants t JOIN plinth.clusters c ON c.name = t.cluster WHERE t.name = ${name}`
    const tenants = yield* makeTenants({
      placementOf: (name) =>
        Effect.map(rowOf(name), (rows) =>
          Option.map(Option.fromNullishOr(rows[0]), (row): Placement => ({
            epoch: row.epoch,
            state: row.state,
            url: tenantUrl(row.template ?? controlTemplate, name)
          }))),
      layerFor: (name, url) => tenantServices(name, url, onStart).pipe(Layer.provide(Layer.succeed(PlinthConfig, config))),
      retire: (services) => Effect.sync(() => Context.get(services, TenantActor).retire()),
      idleTimeToLive: config.tenantIdleTimeout,
      capacity: config.tenantMaxLive
    })
    // The registry's announcements, on a connection of their own, opened again when lost; once it
    // listens (again), what was read before may be stale, so every placement is read anew.
    const pg = Context.get(process, PgClient.PgClient)
    const listenOnce = Effect.scoped(Effect.gen(function*() {
      const changes = yield* pg.listen(TENANTS_CHANNEL)
      yield* tenants.forgetAll()
      return yield* Effect.forever(Effect.flatMap(Queue.take(changes), (change) => tenants.changed(change.payload)))
    }))
    yield* Effect.forkScoped(Effect.forever(listenOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning("tenant registry: LISTEN connection lost; reconnecting", cause)),
      Effect.andThen(Effect.sleep(Duration.seconds(1)))
    )))
    return { process, tenant: Option.some(tenants.use) }
  }))
