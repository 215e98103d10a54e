/**
 * What `plinth tenant create|list|migrate` and `plinth invite --tenant` do, as a database
 * administrator: create and migrate a tenant's database and keep the registry of the control
 * database (plinth.tenants) in step.
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { deriveTenantTemplate, RESERVED_TENANT_NAMES, TENANT_NAME, tenantUrl } from "../services/TenantName.ts"
import { ensureDatabase, migrateDatabase, requireUrl, withDatabase } from "./Database.ts"

export class InvalidTenant extends Schema.TaggedError<InvalidTenant>()("InvalidTenant", { message: Schema.String }) {}

/** The administrator's URL of a tenant's database. */
export const tenantAdminUrl = Effect.fn("TenantAdmin.url")(function*(name: string) {
  const config = yield* PlinthConfig
  if (!TENANT_NAME.test(name) || RESERVED_TENANT_NAMES.has(name)) {
    return yield* new InvalidTenant({ message: `invalid tenant name ${JSON.stringify(name)}: a-z, 0-9 and _, starting with a letter, at most 63; not ${[...RESERVED_TENANT_NAMES].join(", ")}` })
  }
  const template = Option.isSome(config.tenantAdminDatabaseUrl)
    ? Redacted.value(config.tenantAdminDatabaseUrl.value)
    : deriveTenantTemplate(yield* requireUrl("admin"))
  return tenantUrl(template, name)
})

const registered = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<{ name: string; created_at: string }>`SELECT name, created_at::text FROM plinth.tenants ORDER BY name`
})

export const listTenants = Effect.fn("TenantAdmin.list")(function*() {
  return yield* withDatabase(yield* requireUrl("admin"), registered)
})

/** Creates the tenant's database (if missing), migrates it, and registers the tenant. */
export const createTenant = Effect.fn("TenantAdmin.create")(function*(name: string) {
  const controlUrl = yield* requireUrl("admin")
  const adminUrl = yield* tenantAdminUrl(name)
  yield* ensureDatabase(controlUrl, decodeURIComponent(new URL(adminUrl).pathname.slice(1)))
  const applied = yield* migrateDatabase(adminUrl)
  yield* withDatabase(controlUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO plinth.tenants (name) VALUES (${name}) ON CONFLICT (name) DO NOTHING`
  }))
  return applied
})

/** Applies pending migrations to every registered tenant; returns what each got. */
export const migrateTenants = Effect.fn("TenantAdmin.migrateAll")(function*() {
  const tenants = yield* listTenants()
  const results: Array<{ readonly name: string; readonly applied: ReadonlyArray<string> }> = []
  for (const tenant of tenants) results.push({ name: tenant.name, applied: yield* migrateDatabase(yield* tenantAdminUrl(tenant.name)) })
  return results
})
