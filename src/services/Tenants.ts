/**
 * The live tenants of a multi-tenant process: one set of tenant services (the tenant's actor with
 * its pools and LISTEN connection, its caches) per tenant, built on first use, shared by every
 * request of that tenant, and released (connections closed) after it has been idle for
 * TENANT_IDLE_TIMEOUT. At most TENANT_MAX_LIVE tenants are live at once; a tenant is built only if
 * the registry (plinth.tenants) lists it. A registry, not an actor: RcMap keeps the entries and
 * their holders, and each tenant's state is its actor's.
 */
import { type Context, type Duration, Effect, Layer, RcMap, Schema, type Scope } from "effect"
import type { SqlError } from "effect/sql"

export class UnknownTenant extends Schema.TaggedError<UnknownTenant>()("UnknownTenant", { name: Schema.String }) {}
export class TenantsExhausted extends Schema.TaggedError<TenantsExhausted>()("TenantsExhausted", { limit: Schema.Int }) {}
export class TenantUnavailable extends Schema.TaggedError<TenantUnavailable>()("TenantUnavailable", { name: Schema.String }) {}

export interface TenantsOptions<Services> {
  /** Whether the registry lists `name`. */
  readonly exists: (name: string) => Effect.Effect<boolean, SqlError.SqlError>
  readonly layerFor: (name: string) => Layer.Layer<Services, unknown>
  readonly idleTimeToLive: Duration.Duration
  readonly capacity: number
}

export interface TenantsShape<Services> {
  /** The tenant's services, held for the caller's scope (a request, or a whole event stream). */
  readonly use: (name: string) => Effect.Effect<Context.Context<Services>, UnknownTenant | TenantsExhausted | TenantUnavailable, Scope.Scope>
}

export const makeTenants = <Services>(options: TenantsOptions<Services>) =>
  Effect.gen(function*() {
    const live = yield* RcMap.make({
      lookup: (name: string) =>
        Effect.gen(function*() {
          const known = yield* options.exists(name).pipe(Effect.mapError(() => new TenantUnavailable({ name })))
          if (!known) return yield* new UnknownTenant({ name })
          // Built in the entry's scope: released when the tenant has been idle long enough.
          return yield* Layer.build(options.layerFor(name)).pipe(
            Effect.tapCause((cause) => Effect.logWarning(`tenant ${name} could not be started`, cause)),
            Effect.mapError(() => new TenantUnavailable({ name }))
          )
        }),
      idleTimeToLive: options.idleTimeToLive,
      capacity: options.capacity
    })
    return {
      use: (name: string) =>
        Effect.gen(function*() {
          // Asked before an entry is made: names that are not tenants must not take the places of live ones.
          if (!(yield* RcMap.has(live, name))) {
            const known = yield* options.exists(name).pipe(Effect.mapError(() => new TenantUnavailable({ name })))
            if (!known) return yield* new UnknownTenant({ name })
          }
          return yield* RcMap.get(live, name).pipe(
            Effect.catchTag("ExceededCapacityError", () => Effect.fail(new TenantsExhausted({ limit: options.capacity })))
          )
        })
    } satisfies TenantsShape<Services>
  })
