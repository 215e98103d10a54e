/**
 * The bot check of spec §5.6: a challenge token from the client is verified with a
 * Turnstile-compatible siteverify endpoint before a sign-in is allowed to proceed.
 *
 * Without CHALLENGE_SECRET the check is skipped. A token is accepted at most once: it is claimed
 * (hashed) from the moment its verification starts, so neither a replay nor two concurrent requests
 * with the same token get through. Claims live in memory (bounded), or in PostgreSQL when every
 * replica must see them (`sharedClaims`). The secret and the tokens are never logged.
 */
import { Cause, Clock, Context, Effect, Redacted, Schema } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "effect/http"
import type { SqlClient } from "effect/sql"
import { createHash } from "node:crypto"
import { MAX_TOKEN_LENGTH } from "./ChallengeToken.ts"

export { MAX_TOKEN_LENGTH } from "./ChallengeToken.ts"

export class ChallengeFailed extends Schema.TaggedError<ChallengeFailed>()("ChallengeFailed", {
  reason: Schema.String
}) {}

export class Challenge extends Context.Service<Challenge, {
  /** Passes when no CHALLENGE_SECRET is configured. */
  readonly verify: (token: string | undefined, remoteIp: string | undefined) => Effect.Effect<void, ChallengeFailed>
}>()("plinth/Challenge") {
  /** No CHALLENGE_SECRET: every call passes. */
  static readonly skipped = Challenge.of({ verify: () => Effect.void })

  /** Verified with a siteverify endpoint, each token claimed once in `options.claims`. */
  static readonly siteverify = (options: VerifyOptions) =>
    Challenge.of({ verify: makeVerify({ ...options, client: options.client.pipe(HttpClient.filterStatusOk) }) })
}

const VERIFY_TIMEOUT = "5 seconds"
/** Turnstile tokens live 300 s, so a token cannot come back usefully after this. */
const REPLAY_TTL_MILLIS = 5 * 60 * 1000
const REPLAY_CAPACITY = 10_000

// ---------------------------------------------------------------------------------------------
// Replay memory

export interface ReplayGuard {
  /** Claims `key` until `now + ttl`; false when it is already claimed and not expired. */
  readonly reserve: (key: string, now: number) => boolean
  /** Forgets a claim whose verification ended without a verdict, so the user may try the token again. */
  readonly release: (key: string) => void
  readonly size: () => number
}

/**
 * A Map keeps insertion order, and every entry gets the same lifetime, so the oldest entries are
 * the first to expire: the sweep stops at the first live one, and at the cap the first is dropped.
 */
export const makeReplayGuard = (ttlMillis: number, capacity: number): ReplayGuard => {
  const expiries = new Map<string, number>()
  return {
    reserve: (key, now) => {
      for (const [entry, expiresAt] of expiries) {
        if (expiresAt > now) break
        expiries.delete(entry)
      }
      const existing = expiries.get(key)
      if (existing !== undefined && existing > now) return false
      expiries.delete(key) // an expired straggler (the clock went back) is re-added at the end
      while (expiries.size >= capacity) {
        const oldest = expiries.keys().next()
        if (oldest.done) break
        expiries.delete(oldest.value)
      }
      expiries.set(key, now + ttlMillis)
      return true
    },
    release: (key) => {
      expiries.delete(key)
    },
    size: () => expiries.size
  }
}

/** Where claimed tokens are remembered. */
export interface ClaimStore {
  /** Claims `key` for the replay lifetime; false when it is already claimed (a replay). */
  readonly claim: (key: string) => Effect.Effect<boolean, ChallengeFailed>
  readonly release: (key: string) => Effect.Effect<void>
}

/** Claims remembered by this process only. */
export const memoryClaims = (guard: ReplayGuard = makeReplayGuard(REPLAY_TTL_MILLIS, REPLAY_CAPACITY)): ClaimStore => ({
  claim: (key) => Effect.map(Clock.currentTimeMillis, (now) => guard.reserve(key, now)),
  release: (key) => Effect.sync(() => guard.release(key))
})

/**
 * Claims in PostgreSQL (plinth.challenge_claim, sql/sys/11_challenge_claims.sql), one atomic call each, so a token
 * is accepted once whichever replica sees it. A store that cannot be asked claims nothing: the
 * request is refused, as a sign-in could not proceed without the database anyway.
 */
export const sharedClaims = (sql: SqlClient.SqlClient): ClaimStore => ({
  claim: (key) =>
    sql<{ claimed: boolean }>`SELECT plinth.challenge_claim(${key}, ${REPLAY_TTL_MILLIS / 1000}) AS claimed`.pipe(
      Effect.map(([row]) => row?.claimed === true),
      Effect.catchTag("SqlError", (error) =>
        Effect.andThen(
          Effect.logWarning("challenge claim store unavailable", error),
          new ChallengeFailed({ reason: "challenge verification unavailable" })
        ))
    ),
  release: (key) => sql`SELECT plinth.challenge_release(${key})`.pipe(Effect.ignore)
})

/** Only a digest is kept: 10 000 tokens of up to 2 KiB each would otherwise be 20 MB of memory. */
const tokenKey = (token: string): string => createHash("sha256").update(token).digest("base64")

// ---------------------------------------------------------------------------------------------
// Verification

const SiteverifyAnswer = Schema.Struct({
  success: Schema.Boolean,
  "error-codes": Schema.optionalKey(Schema.Array(Schema.String))
})

type Outcome =
  | { readonly _tag: "Verdict"; readonly success: boolean; readonly errorCodes: ReadonlyArray<string> }
  | { readonly _tag: "NoVerdict"; readonly why: string }

/** What went wrong, in words that cannot contain the token or the secret (both travel in the request body). */
const whyNoVerdict = (error: HttpClientError.HttpClientError | Schema.SchemaError | Cause.TimeoutError): string => {
  if (Cause.isTimeoutError(error)) return `no answer within ${VERIFY_TIMEOUT}`
  if (Schema.isSchemaError(error)) return "unexpected answer"
  switch (error.reason._tag) {
    case "StatusCodeError":
      return `HTTP ${error.reason.response.status}`
    case "TransportError":
      return "service unreachable"
    case "DecodeError":
    case "EmptyBodyError":
      return "unreadable answer"
    default:
      return "request failed"
  }
}

/** Error codes are the service's words; keep only well-formed ones so a hostile answer cannot flood logs. */
const safeCodes = (codes: ReadonlyArray<string>): ReadonlyArray<string> =>
  codes.filter((code) => /^[a-z0-9-]{1,64}$/.test(code)).slice(0, 5)

export interface VerifyOptions {
  readonly client: HttpClient.HttpClient
  readonly secret: Redacted.Redacted<string>
  readonly verifyUrl: URL
  /** Production: a verification that gets no verdict refuses the request. */
  readonly failClosed: boolean
  readonly claims: ClaimStore
}

const makeVerify = (options: VerifyOptions) => {
  const { client, secret, verifyUrl, failClosed, claims } = options

  const siteverify = (token: string, remoteIp: string | undefined): Effect.Effect<Outcome> =>
    client.execute(
      HttpClientRequest.post(verifyUrl).pipe(
        HttpClientRequest.acceptJson,
        HttpClientRequest.bodyUrlParams({
          secret: Redacted.value(secret),
          response: token,
          ...(remoteIp ? { remoteip: remoteIp } : {})
        })
      )
    ).pipe(
      Effect.flatMap(HttpClientResponse.schemaBodyJson(SiteverifyAnswer)),
      // Over the whole exchange, body included: a service that stalls mid-answer is as bad as a silent one.
      Effect.timeout(VERIFY_TIMEOUT),
      Effect.map((answer): Outcome => ({ _tag: "Verdict", success: answer.success, errorCodes: answer["error-codes"] ?? [] })),
      Effect.catch((error) => Effect.succeed<Outcome>({ _tag: "NoVerdict", why: whyNoVerdict(error) }))
    )

  return Effect.fn("Challenge.verify")(function*(token: string | undefined, remoteIp: string | undefined) {
    if (token === undefined || token.trim() === "") return yield* new ChallengeFailed({ reason: "missing challenge token" })
    if (token.length > MAX_TOKEN_LENGTH) return yield* new ChallengeFailed({ reason: "challenge token too long" })

    const key = tokenKey(token)
    // Claimed before the network call, atomically with the check: a concurrent request with the
    // same token finds the claim and is refused, whatever the service later says.
    if (!(yield* claims.claim(key))) {
      return yield* new ChallengeFailed({ reason: "replayed" })
    }

    const outcome = yield* siteverify(token, remoteIp).pipe(
      Effect.onInterrupt(() => claims.release(key))
    )
    if (outcome._tag === "Verdict") {
      if (outcome.success) return
      const codes = safeCodes(outcome.errorCodes)
      return yield* new ChallengeFailed({ reason: codes.length > 0 ? `rejected (${codes.join(", ")})` : "rejected" })
    }

    // No verdict (timeout, network, non-2xx, unparseable answer). Production fails closed: a bot
    // check that lets everyone through while the service is down is no check. Development fails
    // open, so a developer without network access (or behind a proxy) can still sign in.
    if (failClosed) {
      yield* Effect.logWarning(`challenge verification failed (${outcome.why}): request refused`)
      // The service never judged this token, so the user may present it again.
      yield* claims.release(key)
      return yield* new ChallengeFailed({ reason: "challenge verification unavailable" })
    }
    yield* Effect.logWarning(`challenge verification failed (${outcome.why}): passing because NODE_ENV is not production`)
  })
}
