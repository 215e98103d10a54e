/**
 * What `plinth tenant create|list|migrate` and `plinth invite --tenant` do, as a database
 * administrator: create and migrate a tenant's database on its cluster and keep the registry of the
 * control database (plinth.tenants) in step.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { RESERVED_TENANT_NAMES, TENANT_NAME, tenantUrl } from "../services/TenantName.ts"
import { adminTemplateOf, chooseCluster, DEFAULT_CLUSTER, onControl, readCluster, serverUrlOf } from "./Clusters.ts"
import { ensureDatabase, migrateDatabase, requireUrl, withDatabase } from "./Database.ts"

/** Names the advisory lock placement holds; any constant of Plinth's own. */
const PLACEMENT_LOCK = 7_270_028

export class InvalidTenant extends Schema.TaggedError<InvalidTenant>()("InvalidTenant", { message: Schema.String }) {}

const checkName = (name: string) =>
  !TENANT_NAME.test(name) || RESERVED_TENANT_NAMES.has(name)
    ? Effect.fail(new InvalidTenant({ message: `invalid tenant name ${JSON.stringify(name)}: a-z, 0-9 and _, starting with a letter, at most 63; not ${[...RESERVED_TENANT_NAMES].join(", ")}` }))
    : Effect.void

export interface TenantRow {
  readonly name: string
  readonly created_at: string
  readonly cluster: string
  readonly state: "active" | "moving"
  readonly epoch: number
  readonly moving_to: string | null
  readonly previous_cluster: string | null
}

/** The registry's row of `name`, if it lists it. */
export const readTenant = (name: string) =>
  onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<TenantRow>`SELECT name, created_at::text, cluster, state, epoch, moving_to, previous_cluster FROM plinth.tenants WHERE name = ${name}`)).pipe(
    Effect.map((rows) => Option.fromNullishOr(rows[0]))
  )

/** The administrator's URL of a tenant's database, on the cluster the registry places it on. */
export const tenantAdminUrl = Effect.fn("TenantAdmin.url")(function*(name: string) {
  yield* checkName(name)
  const row = yield* readTenant(name)
  const cluster = yield* readCluster(Option.isSome(row) ? row.value.cluster : DEFAULT_CLUSTER)
  return tenantUrl(yield* adminTemplateOf(cluster), name)
})

const registered = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<TenantRow>`SELECT name, created_at::text, cluster, state, epoch, moving_to, previous_cluster FROM plinth.tenants ORDER BY name`
})

export const listTenants = Effect.fn("TenantAdmin.list")(function*() {
  return yield* withDatabase(yield* requireUrl("admin"), registered)
})

/**
 * Creates the tenant's database (if missing) on `cluster`, or on the cluster placement chooses,
 * migrates it, and registers the tenant. Again for a registered tenant: its database is migrated
 * where it is.
 */
export const createTenant = Effect.fn("TenantAdmin.create")(function*(name: string, cluster: Option.Option<string> = Option.none()) {
  yield* checkName(name)
  // One placement at a time (held until this one is registered): two at once could both take a cluster's last place.
  const control = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(yield* requireUrl("admin")), maxConnections: 1 })), SqlClient.SqlClient)
  yield* control`SELECT pg_advisory_lock(${PLACEMENT_LOCK})`
  const existing = yield* readTenant(name)
  const target = Option.isSome(existing) ? yield* readCluster(existing.value.cluster) : yield* chooseCluster(name, cluster)
  const adminUrl = tenantUrl(yield* adminTemplateOf(target), name)
  yield* ensureDatabase(yield* serverUrlOf(target), decodeURIComponent(new URL(adminUrl).pathname.slice(1)))
  const applied = yield* migrateDatabase(adminUrl)
  yield* onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO plinth.tenants (name, cluster) VALUES (${name}, ${target.name}) ON CONFLICT (name) DO NOTHING`))
  return { applied, cluster: target.name }
}, Effect.scoped)

/** Applies pending migrations to every registered tenant; returns what each got. */
export const migrateTenants = Effect.fn("TenantAdmin.migrateAll")(function*() {
  const tenants = yield* listTenants()
  const results: Array<{ readonly name: string; readonly applied: ReadonlyArray<string> }> = []
  for (const tenant of tenants) results.push({ name: tenant.name, applied: yield* migrateDatabase(yield* tenantAdminUrl(tenant.name)) })
  return results
})
