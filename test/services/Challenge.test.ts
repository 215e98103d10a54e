/**
 * The bot check with its production HTTP client against a local Turnstile-compatible siteverify:
 * verdicts, token bounds, replay protection (also under concurrency and over time), and the
 * fail-closed (production) / fail-open (development) behaviour when the service gives no verdict.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Logger } from "effect"
import { TestClock } from "effect/testing"
import { ChallengeInMemory } from "../../src/layers/Integrations.ts"
import { Challenge, makeReplayGuard, MAX_TOKEN_LENGTH } from "../../src/services/Challenge.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { type FakeSiteverify, startFakeSiteverify } from "../support/FakeSiteverify.ts"

const SECRET = "0x4AAAAAAA-turnstile-secret-key"
const PRODUCTION = { NODE_ENV: "production", JWT_SECRET: "p".repeat(32) }
const DEVELOPMENT = { NODE_ENV: "development" }

let fake: FakeSiteverify
beforeAll(async () => {
  fake = await startFakeSiteverify()
})
afterAll(async () => {
  await fake?.close()
})
beforeEach(() => {
  fake.calls.length = 0
})

const challengeEnv = (mode: Record<string, string>): Record<string, string> => ({
  ...mode,
  CHALLENGE_SECRET: SECRET,
  CHALLENGE_VERIFY_URL: fake.url
})

type Log = { readonly level: string; readonly message: string }

/** Builds one Challenge (one replay memory) from `env` and runs `use` with the logger captured. */
const withChallenge = <A, E>(env: Record<string, string>, use: (challenge: Challenge["Service"]) => Effect.Effect<A, E>) => {
  const logs: Array<Log> = []
  const logger = Logger.layer([Logger.make(({ logLevel, message }) => {
    logs.push({ level: logLevel, message: (Array.isArray(message) ? message : [message]).map(String).join(" ") })
  })])
  const layer = ChallengeInMemory.pipe(
    Layer.provide(PlinthConfig.layer),
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
  )
  return Effect.map(Challenge.use(use), (value) => ({ value, logs })).pipe(Effect.provide(layer), Effect.provide(logger))
}

const outcome = <E extends { readonly reason: string }>(effect: Effect.Effect<void, E>) =>
  Effect.match(effect, { onSuccess: () => "passed", onFailure: (error) => `failed: ${error.reason}` })

const expectNoSecrets = (logs: ReadonlyArray<Log>, token: string) => {
  const text = JSON.stringify(logs)
  expect(text).not.toContain(SECRET)
  expect(text).not.toContain(token)
}

describe("without CHALLENGE_SECRET", () => {
  it.live("every call passes and the service is never asked", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge({ ...PRODUCTION, CHALLENGE_VERIFY_URL: fake.url }, (challenge) =>
        Effect.all([
          outcome(challenge.verify(undefined, undefined)),
          outcome(challenge.verify("", "203.0.113.7")),
          outcome(challenge.verify("fail-whatever", undefined)),
          outcome(challenge.verify("fail-whatever", undefined))
        ]))
      expect(value).toEqual(["passed", "passed", "passed", "passed"])
      expect(fake.calls).toEqual([])
    }))
})

describe("with CHALLENGE_SECRET", () => {
  it.live("a good token passes; secret, token and remote IP are sent", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        outcome(challenge.verify("pass-1", "203.0.113.7")))
      expect(value).toBe("passed")
      expect(fake.calls).toEqual([{ secret: SECRET, response: "pass-1", remoteip: "203.0.113.7" }])
    }))

  it.live("without a known remote IP, no remoteip field is sent", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        outcome(challenge.verify("pass-2", undefined)))
      expect(value).toBe("passed")
      expect(fake.calls).toEqual([{ secret: SECRET, response: "pass-2", remoteip: undefined }])
    }))

  it.live.each([["production", PRODUCTION], ["development", DEVELOPMENT]] as const)(
    "%s: a rejected token fails with the service's error code",
    ([, mode]) =>
      Effect.gen(function*() {
        const { value, logs } = yield* withChallenge(challengeEnv(mode), (challenge) =>
          outcome(challenge.verify("bot-token", undefined)))
        expect(value).toBe("failed: rejected (invalid-input-response)")
        expect(fake.calls).toHaveLength(1)
        expectNoSecrets(logs, "bot-token")
      })
  )

  it.live("a missing or empty token fails without calling the service", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.all([outcome(challenge.verify(undefined, "203.0.113.7")), outcome(challenge.verify("", undefined))]))
      expect(value).toEqual(["failed: missing challenge token", "failed: missing challenge token"])
      expect(fake.calls).toEqual([])
    }))

  it.live("a token longer than 2048 characters fails without calling the service; 2048 is fine", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.all([
          outcome(challenge.verify("pass".padEnd(MAX_TOKEN_LENGTH + 1, "x"), undefined)),
          outcome(challenge.verify("pass".padEnd(MAX_TOKEN_LENGTH, "x"), undefined))
        ]))
      expect(value).toEqual(["failed: challenge token too long", "passed"])
      expect(fake.calls).toHaveLength(1)
      expect(fake.calls[0]!.response).toHaveLength(MAX_TOKEN_LENGTH)
    }))

  it.live("a verified token presented again is refused as replayed, without a second call", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.all([
          outcome(challenge.verify("pass-replay", "203.0.113.7")),
          outcome(challenge.verify("pass-replay", "198.51.100.1")),
          outcome(challenge.verify("rejected-replay", undefined)),
          outcome(challenge.verify("rejected-replay", undefined))
        ]))
      expect(value).toEqual([
        "passed",
        "failed: replayed",
        "failed: rejected (invalid-input-response)",
        "failed: replayed"
      ])
      expect(fake.calls.map((call) => call.response)).toEqual(["pass-replay", "rejected-replay"])
    }))

  it.live("two concurrent requests with the same token: exactly one passes, one call is made", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.all(Array.from({ length: 5 }, () => outcome(challenge.verify("pass-concurrent", undefined))), {
          concurrency: "unbounded"
        }))
      expect(value.filter((result) => result === "passed")).toHaveLength(1)
      expect(value.filter((result) => result === "failed: replayed")).toHaveLength(4)
      expect(fake.calls).toHaveLength(1)
    }))

  it.effect("a token is remembered for 5 minutes, then forgotten (TestClock)", () =>
    Effect.gen(function*() {
      const { value } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.gen(function*() {
          const first = yield* outcome(challenge.verify("pass-ttl", undefined))
          yield* TestClock.adjust("299 seconds")
          const within = yield* outcome(challenge.verify("pass-ttl", undefined))
          yield* TestClock.adjust("2 seconds")
          const after = yield* outcome(challenge.verify("pass-ttl", undefined))
          return [first, within, after]
        }))
      expect(value).toEqual(["passed", "failed: replayed", "passed"])
      expect(fake.calls).toHaveLength(2)
    }))
})

describe("no verdict: production fails closed, development fails open", () => {
  it.live("production: a timeout (> 5 s) refuses the request", () =>
    Effect.gen(function*() {
      const started = Date.now()
      const { value, logs } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        outcome(challenge.verify("slow-prod", undefined)))
      const elapsed = Date.now() - started
      expect(value).toBe("failed: challenge verification unavailable")
      expect(elapsed).toBeGreaterThanOrEqual(4_900)
      expect(elapsed).toBeLessThan(5_900)
      expect(logs.some((entry) => entry.level === "Warn" && entry.message.includes("5 seconds"))).toBe(true)
      expectNoSecrets(logs, "slow-prod")
    }), 15_000)

  it.live("development: a timeout passes with a warning", () =>
    Effect.gen(function*() {
      const { value, logs } = yield* withChallenge(challengeEnv(DEVELOPMENT), (challenge) =>
        outcome(challenge.verify("slow-dev", undefined)))
      expect(value).toBe("passed")
      expect(logs.some((entry) => entry.level === "Warn" && entry.message.includes("not production"))).toBe(true)
      expectNoSecrets(logs, "slow-dev")
    }), 15_000)

  it.live("production: a 500 refuses the request; the token may be presented again", () =>
    Effect.gen(function*() {
      const { value, logs } = yield* withChallenge(challengeEnv(PRODUCTION), (challenge) =>
        Effect.all([
          outcome(challenge.verify("broken-prod", undefined)),
          outcome(challenge.verify("broken-prod", undefined))
        ]))
      expect(value).toEqual(["failed: challenge verification unavailable", "failed: challenge verification unavailable"])
      expect(fake.calls).toHaveLength(2)
      expect(logs.some((entry) => entry.message.includes("HTTP 500"))).toBe(true)
      expectNoSecrets(logs, "broken-prod")
    }))

  it.live("development: a 500 passes with a warning (and the token is then spent)", () =>
    Effect.gen(function*() {
      const { value, logs } = yield* withChallenge(challengeEnv(DEVELOPMENT), (challenge) =>
        Effect.all([
          outcome(challenge.verify("broken-dev", undefined)),
          outcome(challenge.verify("broken-dev", undefined))
        ]))
      expect(value).toEqual(["passed", "failed: replayed"])
      expect(logs.filter((entry) => entry.level === "Warn")).toHaveLength(1)
      expectNoSecrets(logs, "broken-dev")
    }))

  it.live.each([["production", PRODUCTION, "failed: challenge verification unavailable"], ["development", DEVELOPMENT, "passed"]] as const)(
    "%s: an answer that is not JSON",
    ([, mode, expected]) =>
      Effect.gen(function*() {
        const { value } = yield* withChallenge(challengeEnv(mode), (challenge) =>
          outcome(challenge.verify("garbled-answer", undefined)))
        expect(value).toBe(expected)
      })
  )

  it.live.each([["production", PRODUCTION, "failed: challenge verification unavailable"], ["development", DEVELOPMENT, "passed"]] as const)(
    "%s: an unreachable service",
    ([, mode, expected]) =>
      Effect.gen(function*() {
        const closed = yield* Effect.promise(() => startFakeSiteverify())
        yield* Effect.promise(() => closed.close())
        const { value, logs } = yield* withChallenge({ ...mode, CHALLENGE_SECRET: SECRET, CHALLENGE_VERIFY_URL: closed.url }, (challenge) =>
          outcome(challenge.verify("pass-unreachable", undefined)))
        expect(value).toBe(expected)
        expect(logs.some((entry) => entry.message.includes("unreachable"))).toBe(true)
      })
  )
})

describe("replay memory", () => {
  it("drops the oldest entry at the cap", () => {
    const guard = makeReplayGuard(1_000, 3)
    expect(["a", "b", "c", "d"].map((key) => guard.reserve(key, 0))).toEqual([true, true, true, true])
    expect(guard.size()).toBe(3)
    expect(guard.reserve("b", 1)).toBe(false)
    expect(guard.reserve("a", 1)).toBe(true) // "a" was dropped to make room for "d"
  })

  it("sweeps expired entries", () => {
    const guard = makeReplayGuard(1_000, 100)
    guard.reserve("a", 0)
    guard.reserve("b", 500)
    expect(guard.reserve("c", 1_000)).toBe(true)
    expect(guard.size()).toBe(2) // "a" expired at 1000
    expect(guard.reserve("b", 1_499)).toBe(false)
    expect(guard.reserve("b", 1_500)).toBe(true)
  })
})
