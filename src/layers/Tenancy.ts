/**
 * Per-tenant services, and where a request's tenant comes from: the process's own database
 * (single-tenant mode), or the registry and a database per tenant (multi-tenant mode).
 */
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { TenantActor } from "../actors/TenantActor.ts"
import { TenantSource } from "../http/TenantSelection.ts"
import { AppRegistry } from "../services/AppRegistry.ts"
import { Introspection } from "../services/Introspection.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { makeTenants } from "../services/Tenants.ts"
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

/**
 * The tenants of a service connected to `databaseUrl`. In multi-tenant mode that database is the
 * control database (the registry), and each tenant's URL comes from `template` with its name.
 */
export const tenantSource = (databaseUrl: string, template: string | undefined, onStart: TenantStart = Effect.void) =>
  Layer.effect(TenantSource, Effect.gen(function*() {
    const config = yield* PlinthConfig
    const process = yield* Layer.build(tenantServices("default", databaseUrl, onStart))
    if (!config.multiTenant) return { process, tenant: Option.none() }
    const sql = Context.get(process, SqlClient.SqlClient)
    const tenants = yield* makeTenants({
      exists: (name) =>
        Effect.map(sql<{ found: number }>`SELECT 1 AS found FROM plinth.tenants WHERE name = ${name}`, (rows) => rows.length > 0),
      layerFor: (name) =>
        tenantServices(name, tenantUrl(template ?? deriveTenantTemplate(databaseUrl), name), onStart).pipe(
          Layer.provide(Layer.succeed(PlinthConfig, config))
        ),
      idleTimeToLive: config.tenantIdleTimeout,
      capacity: config.tenantMaxLive
    })
    return { process, tenant: Option.some(tenants.use) }
  }))
