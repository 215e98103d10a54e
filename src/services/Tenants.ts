/**
 * The live tenants of a multi-tenant process: one set of tenant services (the tenant's actor with
 * its pools and LISTEN connection, its caches) per tenant, built on first use, shared by every
 * request of that tenant, and released (connections closed) after it has been idle for
 * TENANT_IDLE_TIMEOUT. At most TENANT_MAX_LIVE tenants are live at once; a tenant is built only if
 * the registry (plinth.tenants) lists it, against the cluster the registry places it on. A
 * registry, not an actor: RcMap keeps the entries and their holders, and each tenant's state is its
 * actor's.
 *
 * Where a tenant lives is read from the registry and kept for REGISTRY_TTL at most; the registry
 * announces each change (`changed`), and a tenant whose epoch moved on has its services retired
 * (its event streams get `resync` and end) and built again against its new cluster.
 */
import { type Context, Duration, Effect, Layer, Option, RcMap, Schema, type Scope } from "effect"
import type { SqlError } from "effect/sql"

export class UnknownTenant extends Schema.TaggedError<UnknownTenant>()("UnknownTenant", { name: Schema.String }) {}
export class TenantsExhausted extends Schema.TaggedError<TenantsExhausted>()("TenantsExhausted", { limit: Schema.Int }) {}
export class TenantUnavailable extends Schema.TaggedError<TenantUnavailable>()("TenantUnavailable", { name: Schema.String }) {}
/** The tenant is being moved to another cluster and its database is fenced: try again shortly. */
export class TenantMoving extends Schema.TaggedError<TenantMoving>()("TenantMoving", { name: Schema.String }) {}

/** Where the registry places a tenant. */
export interface Placement {
  readonly epoch: number
  readonly state: "active" | "moving"
  /** The tenant's database on its cluster, as this service's login role. */
  readonly url: string
}

/** How long a placement read from the registry is trusted without an announcement. */
export const REGISTRY_TTL = Duration.seconds(2)

export interface TenantsOptions<Services> {
  /** The registry's row of `name`, if it lists it. */
  readonly placementOf: (name: string) => Effect.Effect<Option.Option<Placement>, SqlError.SqlError>
  readonly layerFor: (name: string, url: string) => Layer.Layer<Services, unknown>
  /** Lets go of services of an epoch gone by: their streams are told to resync and end. */
  readonly retire: (services: Context.Context<Services>) => Effect.Effect<void>
  readonly idleTimeToLive: Duration.Duration
  readonly capacity: number
  readonly registryTtl?: Duration.Duration
}

export type TenantFailure = UnknownTenant | TenantsExhausted | TenantUnavailable | TenantMoving

export interface TenantsShape<Services> {
  /** The tenant's services, held for the caller's scope (a request, or a whole event stream). */
  readonly use: (name: string) => Effect.Effect<Context.Context<Services>, TenantFailure, Scope.Scope>
  /** The registry announced a change of `name`: read its row again, and retire services of an older epoch. */
  readonly changed: (name: string) => Effect.Effect<void>
  /** Announcements may have been missed (the registry's LISTEN connection was lost): read every row again. */
  readonly forgetAll: () => Effect.Effect<void>
}

interface Live<Services> {
  readonly epoch: number
  readonly services: Context.Context<Services>
}

export const makeTenants = <Services>(options: TenantsOptions<Services>) =>
  Effect.gen(function*() {
    const ttl = Duration.toMillis(options.registryTtl ?? REGISTRY_TTL)
    const read = new Map<string, { readonly placement: Option.Option<Placement>; readonly at: number }>()
    const built = new Map<string, Live<Services>>()

    // Only registered tenants are kept: names that are not tenants (any X-Tenant a caller sends) must not fill it.
    const readPlacement = (name: string) =>
      options.placementOf(name).pipe(
        Effect.tap((placement) =>
          Effect.sync(() => Option.isSome(placement) ? read.set(name, { placement, at: Date.now() }) : read.delete(name))
        ),
        Effect.mapError(() => new TenantUnavailable({ name }))
      )
    const placementOf = (name: string) =>
      Effect.suspend(() => {
        const known = read.get(name)
        return known !== undefined && Date.now() - known.at < ttl ? Effect.succeed(known.placement) : readPlacement(name)
      })

    const live = yield* RcMap.make({
      lookup: (name: string) =>
        Effect.gen(function*() {
          const placement = yield* placementOf(name)
          if (Option.isNone(placement)) return yield* new UnknownTenant({ name })
          // Built in the entry's scope: released when the tenant has been idle long enough.
          const services = yield* Layer.build(options.layerFor(name, placement.value.url)).pipe(
            Effect.tapCause((cause) => Effect.logWarning(`tenant ${name} could not be started`, cause)),
            Effect.mapError(() => new TenantUnavailable({ name }))
          )
          const entry: Live<Services> = { epoch: placement.value.epoch, services }
          built.set(name, entry)
          yield* Effect.addFinalizer(() => Effect.sync(() => built.get(name) === entry && built.delete(name)))
          return entry
        }),
      idleTimeToLive: options.idleTimeToLive,
      capacity: options.capacity
    })

    /** The entry goes; its holders keep it until they let go (its streams end now, with `resync`). */
    const retire = (name: string) =>
      Effect.suspend(() => {
        const entry = built.get(name)
        if (entry === undefined) return Effect.void
        built.delete(name)
        return Effect.andThen(options.retire(entry.services), RcMap.invalidate(live, name))
      })

    const get = (name: string) =>
      RcMap.get(live, name).pipe(
        Effect.catchTag("ExceededCapacityError", () => Effect.fail(new TenantsExhausted({ limit: options.capacity })))
      )

    // Every request of a tenant runs it: defined once, not a generator written inline per call.
    const use = Effect.fnUntraced(function*(name: string) {
      // Asked before an entry is made: names that are not tenants must not take the places of live ones.
      const placement = yield* placementOf(name)
      if (Option.isNone(placement)) return yield* new UnknownTenant({ name })
      if (placement.value.state === "moving") return yield* new TenantMoving({ name })
      const entry = yield* get(name)
      if (entry.epoch === placement.value.epoch) return entry.services
      // Built for another epoch (the tenant has moved since): retire it and build anew.
      if (built.get(name) === entry) yield* retire(name)
      else yield* RcMap.invalidate(live, name)
      return (yield* get(name)).services
    })

    return {
      use,
      changed: (name: string) =>
        readPlacement(name).pipe(
          Effect.tap((placement) => {
            const entry = built.get(name)
            const epoch = Option.map(placement, (p) => p.epoch)
            return entry !== undefined && !Option.contains(epoch, entry.epoch) ? retire(name) : Effect.void
          }),
          Effect.catch(() => Effect.sync(() => read.delete(name))),
          Effect.asVoid
        ),
      forgetAll: () => Effect.sync(() => read.clear())
    } satisfies TenantsShape<Services>
  })
