/**
 * Per-tenant services, and where a request's tenant comes from: the process's own database
 * (single-tenant mode), or the registry and a database per tenant (multi-tenant mode).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TenantActor } from "../actors/TenantActor.ts"
import { makeTenants } from "../actors/Tenants.ts"
import { TenantSource } from "../http/TenantSelection.ts"
import { AppRegistry } from "../services/AppRegistry.ts"
import { CatalogWatch } from "../services/CatalogWatch.ts"
import { Introspection } from "../services/Introspection.ts"
import { makeJsonColumnTypes } from "../services/JsonColumnTypes.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { StatementConnections } from "../services/StatementConnections.ts"
import { deriveTenantTemplate, tenantUrl } from "../services/TenantName.ts"

const POOL_SIZE = 20

export const pool = (url: string) =>
  PgClient.layer({ url: Redacted.make(url), maxConnections: POOL_SIZE, applicationName: "plinth", types: makeJsonColumnTypes() })

/** Work a service does on a tenant's database as the tenant starts (the chat service's recovery). */
export type TenantStart = Effect.Effect<void, never, SqlClient.SqlClient>

/** One tenant's pool, event fan-out and catalog caches (one LISTEN connection each for both). */
export const tenantServices = (name: string, databaseUrl: string, onStart: TenantStart = Effect.void) =>
  Layer.unwrap(Effect.gen(function*() {
    const config = yield* PlinthConfig
    return Layer.mergeAll(
      TenantActor.layer({ name, maxStreamsPerUser: config.eventsMaxStreamsPerUser, heartbeat: config.eventsHeartbeat }),
      AppRegistry.layer,
      Introspection.layer,
      Layer.effectDiscard(onStart)
    ).pipe(
      // Opened lazily: a service that runs no caller statements (chat) never connects it.
      Layer.provideMerge(StatementConnections.layer(databaseUrl, POOL_SIZE, config.sqlMaxResponseBytes)),
      Layer.provideMerge(CatalogWatch.layer),
      Layer.provideMerge(pool(databaseUrl))
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
