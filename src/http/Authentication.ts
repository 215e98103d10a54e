/**
 * `Authorization: Bearer <jwt>` → the caller (`CurrentPrincipal`), or 401. Roles narrower than
 * "any signed-in user" are checked by the routes that need them, and again by the database.
 */
import { Effect, Layer, Option, Redacted } from "effect"
import { AccessTokens, type AppRole, type Principal } from "../services/AccessTokens.ts"
import { Authentication, CurrentPrincipal } from "./ApiMiddleware.ts"
import { Forbidden, Unauthorized } from "./Errors.ts"
import { CurrentTenant } from "./TenantSelection.ts"

export { Authentication, CurrentPrincipal } from "./ApiMiddleware.ts"

export const AuthenticationLive = Layer.effect(Authentication, Effect.gen(function*() {
  const tokens = yield* AccessTokens
  return Authentication.of({
    bearer: (httpEffect, { credential }) =>
      Effect.flatMap(authenticate(tokens, Redacted.value(credential)), (principal) => Effect.provideService(httpEffect, CurrentPrincipal, principal))
  })
}))

/**
 * The caller a bearer token names (`""` when none came), as every route authenticates: 401 for a
 * token that is missing, malformed or expired, 403 for another tenant's.
 */
// On every request: untraced, since a span nothing reads is a cost per call (docs/performance-notes.md).
export const authenticate = Effect.fnUntraced(function*(tokens: AccessTokens["Service"], token: string) {
  const principal = yield* Effect.mapError(tokens.verify(token), (error) => new Unauthorized({ error: error.reason }))
  yield* checkTenant(principal)
  return principal
})

/** The credential of `Authorization: Bearer <credential>` (scheme case-insensitive, RFC 9110 §11.1), or `""`. */
export const bearerCredential = (authorization: string | undefined): string => {
  const match = authorization === undefined ? null : BEARER.exec(authorization)
  return match === null ? "" : match[1]!
}
const BEARER = /^bearer +([^ ].*)$/i

/** Spec §5.3: in multi-tenant mode a token is good only for the tenant it was issued for. */
// On every request: untraced, like `authenticate`.
const checkTenant = Effect.fnUntraced(function*(principal: Principal) {
  const tenant = yield* CurrentTenant
  if (Option.isSome(tenant) && principal.tenant !== tenant.value) {
    return yield* new Forbidden({ error: "this token belongs to another tenant" })
  }
})

/** The caller, if their role is one of `roles`; otherwise 403. */
export const requireRole = Effect.fn("Authentication.requireRole")(function*(roles: ReadonlyArray<AppRole>) {
  const principal = yield* CurrentPrincipal
  if (!roles.includes(principal.role)) {
    return yield* new Forbidden({ error: `this needs one of the roles ${roles.join(", ")}` })
  }
  return principal
})
