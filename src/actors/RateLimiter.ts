/**
 * Request rate limiting (spec §8): POST /auth/magic-link admits 3 requests per mailbox and 10 per
 * client address in any 15 minutes. A refused request carries the whole seconds until a slot frees,
 * which the route sends as `Retry-After`.
 *
 * The in-memory store is an actor: its state belongs to one fiber that takes messages from a
 * bounded mailbox one at a time, so a check-then-record never interleaves with another and no lock
 * is needed. The service interface (`check` on a list of keys) says nothing about where the counts
 * live, so a PostgreSQL-backed store can replace this one behind the same `RateLimiter` tag.
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Queue, Schema, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import { sqlState } from "../services/DatabaseError.ts"

/** At most `limit` admitted requests in any window of length `window` (finite and positive). */
export interface RateLimitRule {
  readonly limit: number
  readonly window: Duration.Duration
}

/** One bucket a request counts against, and the rule that bucket is held to. */
export interface RateLimitKey {
  readonly key: string
  readonly rule: RateLimitRule
}

export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  retryAfterSeconds: Schema.Int
}) {}

export interface RateLimiterShape {
  /** Admits one request, counted against every key, or fails with RateLimited and counts nothing. */
  readonly check: (keys: ReadonlyArray<RateLimitKey>) => Effect.Effect<void, RateLimited>
}

/** The sliding-window log of one key: when its admitted requests happened, oldest first. */
interface Bucket {
  readonly times: Array<number>
  /**
   * The longest window any rule has used with this key. A key is meant to have one rule; if it has
   * several, timestamps are kept as long as the longest one still needs them.
   */
  windowMs: number
}

interface Message {
  readonly keys: ReadonlyArray<RateLimitKey>
  readonly reply: Deferred.Deferred<void, RateLimited>
}

/** Enough for bursts; beyond it callers wait for room (backpressure) instead of growing memory. */
const MAILBOX_CAPACITY = 256
const DEFAULT_MAX_KEYS = 100_000
/** A full sweep costs one pass over every key, so it runs at most this often in normal operation... */
const SWEEP_INTERVAL_MS = 60_000
/**
 * ...and at most this often when the table is full. Sweeping on every new key at the cap would let
 * a flood of fresh keys make each request cost a pass over 100 000 entries.
 */
const FULL_TABLE_SWEEP_INTERVAL_MS = 1_000

/** Drops the timestamps that have left the bucket's window. */
const prune = (bucket: Bucket, now: number): void => {
  const cutoff = now - bucket.windowMs
  let expired = 0
  while (expired < bucket.times.length && bucket.times[expired]! <= cutoff) expired++
  if (expired > 0) bucket.times.splice(0, expired)
}

export const makeRateLimiter = Effect.fn("RateLimiter.make")(function*(options?: { readonly maxKeys?: number }) {
  const maxKeys = Math.max(1, Math.floor(options?.maxKeys ?? DEFAULT_MAX_KEYS))
  // Map order is least recently used first: every use deletes and re-inserts the key.
  const buckets = new Map<string, Bucket>()
  let lastSweep = Number.NEGATIVE_INFINITY
  let lastNow = Number.NEGATIVE_INFINITY

  const sweep = (now: number): void => {
    for (const [key, bucket] of buckets) {
      prune(bucket, now)
      if (bucket.times.length === 0) buckets.delete(key)
    }
    lastSweep = now
  }

  const touch = (key: string, bucket: Bucket): void => {
    buckets.delete(key)
    buckets.set(key, bucket)
  }

  /**
   * Room for a new key. At the cap, after a sweep (if one is allowed), the least recently used key
   * goes: refusing new keys instead would let an attacker who fills the table with junk mailboxes
   * lock every real user out, while evicting only forgets an idle key's count.
   */
  const makeRoom = (now: number): void => {
    if (buckets.size < maxKeys) return
    if (now - lastSweep >= FULL_TABLE_SWEEP_INTERVAL_MS) sweep(now)
    for (const key of buckets.keys()) {
      if (buckets.size < maxKeys) break
      buckets.delete(key)
    }
  }

  /** The decision for one request at `now`; records it only when admitted. */
  const decide = (keys: ReadonlyArray<RateLimitKey>, now: number): Exit.Exit<void, RateLimited> => {
    if (now - lastSweep >= SWEEP_INTERVAL_MS) sweep(now)
    let retryAfterMs = 0
    let full = false
    for (const { key, rule } of keys) {
      const bucket = buckets.get(key)
      if (bucket === undefined) continue // an unknown key is empty, so it has room
      const windowMs = Duration.toMillis(rule.window)
      bucket.windowMs = Math.max(bucket.windowMs, windowMs)
      prune(bucket, now)
      const cutoff = now - windowMs
      const inWindow = bucket.times.filter((t) => t > cutoff).length
      if (inWindow < rule.limit) continue
      full = true
      // Room appears when in-window entries drop to limit - 1: the (inWindow - limit + 1)th oldest
      // in-window timestamp must expire, and the log is sorted, so it sits at length - limit.
      const blocking = bucket.times[bucket.times.length - rule.limit]
      retryAfterMs = Math.max(retryAfterMs, blocking === undefined ? windowMs : blocking + windowMs - now)
    }
    if (full) {
      // A refused key is still in use: keep it from being evicted while it is being hammered.
      for (const { key } of keys) {
        const bucket = buckets.get(key)
        if (bucket !== undefined) touch(key, bucket)
      }
      return Exit.fail(new RateLimited({ retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)) }))
    }
    const recorded = new Set<string>()
    for (const { key, rule } of keys) {
      if (recorded.has(key)) continue // the same key twice in one request counts once
      recorded.add(key)
      const windowMs = Duration.toMillis(rule.window)
      let bucket = buckets.get(key)
      if (bucket === undefined) {
        makeRoom(now)
        bucket = { times: [], windowMs }
      }
      bucket.windowMs = Math.max(bucket.windowMs, windowMs)
      bucket.times.push(now)
      touch(key, bucket)
    }
    return Exit.void
  }

  const mailbox = yield* Queue.bounded<Message>(MAILBOX_CAPACITY)

  // Added before the fiber is forked, so it runs after the fiber has stopped: callers whose
  // messages were never handled are interrupted rather than left waiting forever, and later
  // offers are refused.
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      const stranded: Array<Message> = []
      let taken = Queue.takeUnsafe(mailbox)
      while (taken !== undefined && Exit.isSuccess(taken)) {
        stranded.push(taken.value)
        taken = Queue.takeUnsafe(mailbox)
      }
      Queue.shutdownUnsafe(mailbox)
      for (const message of stranded) yield* Deferred.interrupt(message.reply)
    })
  )

  // Waiting for a message is interruptible; handling one is not, so a message once taken is
  // always answered.
  const handleNext = Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const message = yield* restore(Queue.take(mailbox))
      // The clock may step back (NTP); the log must stay sorted, so time never goes backwards here.
      const now = Math.max(yield* Clock.currentTimeMillis, lastNow)
      lastNow = now
      yield* Deferred.done(message.reply, decide(message.keys, now))
    })
  )
  yield* Effect.forkScoped(Effect.forever(handleNext))

  const check = Effect.fn("RateLimiter.check")(function*(keys: ReadonlyArray<RateLimitKey>) {
    const reply = yield* Deferred.make<void, RateLimited>()
    const accepted = yield* Queue.offer(mailbox, { keys, reply })
    // The limiter's scope is closed: the application is shutting down.
    if (!accepted) return yield* Effect.interrupt
    return yield* Deferred.await(reply)
  })

  const limiter: RateLimiterShape = { check }
  return limiter
})

export class RateLimiter extends Context.Service<RateLimiter, RateLimiterShape>()("plinth/RateLimiter") {
  static readonly layer: Layer.Layer<RateLimiter> = Layer.effect(RateLimiter, makeRateLimiter())
}

/**
 * The mailbox a magic-link request counts against: lower-cased; in the local part, a `+tag` suffix
 * and all dots removed, so `A.b+x@D.com` and `ab@d.com` share one bucket. Otherwise one inbox could
 * be sent unlimited links by varying the spelling of its address.
 */
export const normalizeMailbox = (email: string): string => {
  const lower = email.trim().toLowerCase()
  const at = lower.lastIndexOf("@")
  if (at < 0) return lower
  const local = lower.slice(0, at)
  const plus = local.indexOf("+")
  return `${(plus < 0 ? local : local.slice(0, plus)).replaceAll(".", "")}${lower.slice(at)}`
}

/** The two rules of spec §8 for POST /auth/magic-link. */
export const MAILBOX_RULE: RateLimitRule = { limit: 3, window: Duration.minutes(15) }
export const CLIENT_ADDRESS_RULE: RateLimitRule = { limit: 10, window: Duration.minutes(15) }

/** Convenience: the keys of one magic-link request. */
export const magicLinkKeys = (email: string, clientAddress: string): ReadonlyArray<RateLimitKey> => [
  { key: `mailbox:${normalizeMailbox(email)}`, rule: MAILBOX_RULE },
  { key: `address:${clientAddress}`, rule: CLIENT_ADDRESS_RULE }
]

/**
 * Development's POST /auth/login: password guesses, so per mailbox and per client address like
 * magic links, with room for a developer's typos; buckets of their own, so failed logins do not
 * use up the sign-in links.
 */
export const LOGIN_MAILBOX_RULE: RateLimitRule = { limit: 10, window: Duration.minutes(15) }
export const LOGIN_ADDRESS_RULE: RateLimitRule = { limit: 30, window: Duration.minutes(15) }

export const loginKeys = (email: string, clientAddress: string): ReadonlyArray<RateLimitKey> => [
  { key: `login-mailbox:${normalizeMailbox(email)}`, rule: LOGIN_MAILBOX_RULE },
  { key: `login-address:${clientAddress}`, rule: LOGIN_ADDRESS_RULE }
]

/** POST /auth/change-email mails the new address: per user and per mailbox, like magic links. */
export const EMAIL_CHANGE_USER_RULE: RateLimitRule = { limit: 3, window: Duration.minutes(15) }
export const EMAIL_CHANGE_MAILBOX_RULE: RateLimitRule = { limit: 3, window: Duration.minutes(15) }

export const emailChangeKeys = (userId: string, newEmail: string): ReadonlyArray<RateLimitKey> => [
  { key: `email-change-user:${userId}`, rule: EMAIL_CHANGE_USER_RULE },
  { key: `email-change-mailbox:${normalizeMailbox(newEmail)}`, rule: EMAIL_CHANGE_MAILBOX_RULE }
]

/** SQLSTATE of a lock wait that ran past lock_timeout. */
const LOCK_NOT_AVAILABLE = "55P03"
/** A key's lock is held only for one check, so one that stayed busy frees again soon. */
const LOCK_BUSY_RETRY_SECONDS = 1

/** The sweep of the shared store runs this often (the check itself trims the keys it touches). */
const SHARED_SWEEP_INTERVAL = Duration.minutes(5)

/**
 * The store shared by every replica (RATE_LIMIT_STORE=postgres): one atomic database call per
 * check (plinth.rate_limit_check, sql/sys/10_rate_limits.sql), so a mailbox's fourth request is refused
 * whichever replica it reaches. Same semantics as the in-memory actor.
 */
export const makeSharedRateLimiter = Effect.fn("RateLimiter.makeShared")(function*(sql: SqlClient.SqlClient) {
  const longestWindowSeconds = Math.ceil(Duration.toSeconds(MAILBOX_RULE.window))
  yield* Effect.forkScoped(
    Effect.forever(Effect.andThen(
      Effect.sleep(SHARED_SWEEP_INTERVAL),
      sql`SELECT plinth.rate_limit_sweep(${longestWindowSeconds})`.pipe(Effect.ignore)
    ))
  )
  return {
    check: (keys) => {
      const unique = [...new Map(keys.map((key) => [key.key, key])).values()]
      return sql<{ retry: number }>`SELECT plinth.rate_limit_check(
          ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(unique.map((key) => key.key))}::jsonb)),
          ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(unique.map((key) => key.rule.limit))}::jsonb)::integer),
          ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(unique.map((key) => Math.ceil(Duration.toSeconds(key.rule.window))))}::jsonb)::integer)
        ) AS retry`.pipe(
        Effect.catchTag("SqlError", (error) =>
          sqlState(error) === LOCK_NOT_AVAILABLE
            // Another check held a key past the function's lock_timeout (0014): busy, not unavailable.
            ? Effect.succeed([{ retry: LOCK_BUSY_RETRY_SECONDS }])
            // A store that cannot be asked does not lock everyone out: admit, and say so.
            : Effect.as(Effect.logWarning("rate limit store unavailable; request admitted", error), [{ retry: 0 }])),
        Effect.flatMap(([row]) => ((row?.retry ?? 0) > 0 ? Effect.fail(new RateLimited({ retryAfterSeconds: row!.retry })) : Effect.void))
      )
    }
  } satisfies RateLimiterShape
})
