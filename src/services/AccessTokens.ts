/**
 * Access tokens: HS256 JWTs whose claims are exactly `sub, role, email, iat, exp` (spec §2.2;
 * `tenant` joins them in multi-tenant mode). Verification accepts nothing else: another
 * algorithm (`none` included), a wrong signature, an expired token or one issued in the future
 * (30 s leeway each way), a role outside the four, a missing claim, or a `tenant` claim in
 * single-tenant mode.
 */
import { Context, Duration, Effect, Redacted, Schema } from "effect"
import { errors, jwtVerify, SignJWT } from "jose"
import { AppRole } from "./AppRole.ts"
import { UUID } from "./Uuid.ts"

export { AppRole } from "./AppRole.ts"

const Uuid = Schema.String.pipe(Schema.check(Schema.isPattern(UUID)))

export const Claims = Schema.Struct({
  sub: Uuid,
  role: AppRole,
  email: Schema.String,
  iat: Schema.Int,
  exp: Schema.Int,
  tenant: Schema.optionalKey(Schema.String)
})
export type Claims = typeof Claims.Type

/** Who a token speaks for, as the rest of Plinth sees it. */
export interface Principal {
  readonly userId: string
  readonly role: AppRole
  readonly email: string
  readonly tenant?: string
}

export class InvalidToken extends Schema.TaggedError<InvalidToken>()("InvalidToken", {
  reason: Schema.String
}) {}

const CLOCK_TOLERANCE_SECONDS = 30
/**
 * Verified tokens are remembered until they expire: clients send the same token with every
 * request, and the HMAC plus the claim decoding is a measurable share of a small request.
 */
const VERIFIED_CACHE_SIZE = 10_000
/** Longer is not a token Plinth issued; refusing early bounds the work an attacker can ask for. */
const MAX_TOKEN_LENGTH = 4096

export class AccessTokens extends Context.Service<AccessTokens, {
  readonly issue: (principal: Principal) => Effect.Effect<string>
  readonly verify: (token: string) => Effect.Effect<Principal, InvalidToken>
}>()("plinth/AccessTokens") {}

const decodeClaims = Schema.decodeUnknownEffect(Claims)

export const makeAccessTokens = (options: {
  readonly secret: Redacted.Redacted<string>
  readonly ttl: Duration.Duration
  /** Only then may a token carry `tenant`; in single-tenant mode such a token was not issued here. */
  readonly multiTenant?: boolean
}) => {
  const multiTenant = options.multiTenant ?? false
  const key = new TextEncoder().encode(Redacted.value(options.secret))
  const ttlSeconds = Math.max(1, Math.floor(Duration.toSeconds(options.ttl)))

  const issue = Effect.fn("AccessTokens.issue")(function*(principal: Principal) {
    const now = Math.floor((yield* Effect.clockWith((clock) => clock.currentTimeMillis)) / 1000)
    const claims = { role: principal.role, email: principal.email, ...(principal.tenant === undefined ? {} : { tenant: principal.tenant }) }
    return yield* Effect.promise(() =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setSubject(principal.userId)
        .setIssuedAt(now)
        .setExpirationTime(now + ttlSeconds)
        .sign(key)
    )
  })

  const verified = new Map<string, { readonly principal: Principal; readonly expiresAtMs: number }>()

  // On every request: untraced, since a span nothing reads is a cost per call (docs/performance-notes.md).
  const verify = Effect.fnUntraced(function*(token: string) {
    if (token.length === 0) return yield* new InvalidToken({ reason: "missing bearer token" })
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const known = verified.get(token)
    if (known !== undefined) {
      if (now < known.expiresAtMs) return known.principal
      verified.delete(token)
    }
    if (token.length > MAX_TOKEN_LENGTH) return yield* new InvalidToken({ reason: "malformed token" })
    const { payload } = yield* Effect.tryPromise({
      try: () =>
        jwtVerify(token, key, {
          algorithms: ["HS256"],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
          requiredClaims: ["sub", "iat", "exp"],
          // Effect's clock, as for the cache: one notion of "now".
          currentDate: new Date(now)
        }),
      catch: (cause) => new InvalidToken({ reason: cause instanceof errors.JWTExpired ? "token expired" : "invalid token" })
    })
    const claims = yield* decodeClaims(payload).pipe(Effect.mapError(() => new InvalidToken({ reason: "invalid token claims" })))
    // jose checks `iat` only against a maximum age, so a token dated ahead would outlive its issuer's intent.
    if (claims.iat * 1000 > now + CLOCK_TOLERANCE_SECONDS * 1000) return yield* new InvalidToken({ reason: "token issued in the future" })
    if (claims.tenant !== undefined && !multiTenant) return yield* new InvalidToken({ reason: "invalid token claims" })
    const principal: Principal = {
      userId: claims.sub,
      role: claims.role,
      email: claims.email,
      ...(claims.tenant === undefined ? {} : { tenant: claims.tenant })
    }
    if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!)
    verified.set(token, { principal, expiresAtMs: (claims.exp + CLOCK_TOLERANCE_SECONDS) * 1000 })
    return principal
  })

  return AccessTokens.of({ issue, verify })
}
