/**
 * Issue #19, finding 2: one member's 40–60 parallel `select pg_sleep(14)` filled the statement
 * pool (20 connections) and an owner's `select 1` waited 12–14.6 s. Now a user runs at most
 * SQL_MAX_CONCURRENT_PER_USER (default 4) statements at once per process; the rest wait briefly,
 * then get 429 with Retry-After, and everyone else is served meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { sleepingStatements } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { type SqlResult, sqlRequest } from "./fixtures.ts"

/** SQL_MAX_CONCURRENT_PER_USER's default. */
const BOUND = 4

let stack: AuthStack
let member: SignIn
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ SQL_TIMEOUT: "30s" })
  member = await signedIn(stack, "flooding-member@plinth.test", "member")
  owner = await signedIn(stack, "patient-owner@plinth.test", "owner")
})
afterAll(async () => {
  await stack?.close()
})

interface Settled {
  readonly status: number
  readonly retryAfter: string | null
  readonly body: unknown
}

/**
 * Sends `count` copies of a request of `member`'s at once; `settled` fills as answers arrive,
 * `stop` aborts the ones still running (their statements are cancelled) and waits for them.
 */
const flood = (count: number, path: string, body: unknown) => {
  const controller = new AbortController()
  const settled: Array<Settled> = []
  const requests = Array.from({ length: count }, () =>
    fetch(`${stack.main.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${member.token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal
    }).then(
      async (response) => {
        settled.push({ status: response.status, retryAfter: response.headers.get("retry-after"), body: await response.json() })
      },
      () => undefined
    ))
  return {
    settled,
    stop: async () => {
      controller.abort()
      await Promise.all(requests)
      expect(await eventually(async () => (await sleepingStatements(stack.db.adminUrl)) === 0, 10_000)).toBe(true)
    }
  }
}

/** Nearest rank, as bench/stats.ts: of 50 samples the p99 is the slowest. */
const percentile = (samples: ReadonlyArray<number>, p: number) => [...samples].sort((a, b) => a - b)[Math.ceil((p / 100) * samples.length) - 1]!

describe("one user cannot starve the others", () => {
  it("attack: a member's 40 parallel pg_sleep starve an owner's select 1", async () => {
    const member40 = flood(40, "/sql", { sql: "SELECT pg_sleep(20) AS slept" })
    try {
      expect(await eventually(async () => (await sleepingStatements(stack.db.adminUrl)) >= BOUND, 10_000)).toBe(true)
      const latencies: Array<number> = []
      for (let i = 0; i < 50; i++) {
        const started = performance.now()
        const response = await sqlRequest<SqlResult>(stack.main.url, owner.token, "SELECT 1 AS one")
        latencies.push(performance.now() - started)
        expect(response.status).toBe(200)
        expect(response.body).toEqual({ rows: [{ one: 1 }], rowCount: 1 })
      }
      // Every answer of the owner's came while the member's sleeps were still running.
      expect(await sleepingStatements(stack.db.adminUrl)).toBe(BOUND)
      console.log(
        `owner's select 1 while a member floods pg_sleep: p50 ${percentile(latencies, 50).toFixed(1)} ms, ` +
          `p99 ${percentile(latencies, 99).toFixed(1)} ms (of ${latencies.length})`
      )

      // The member's statements over the bound are refused once the brief wait is over.
      expect(await eventually(async () => member40.settled.length === 40 - BOUND, 10_000)).toBe(true)
      for (const answer of member40.settled) {
        expect(answer.status).toBe(429)
        expect(answer.retryAfter).toBe("1")
        expect(answer.body).toEqual({ error: expect.stringContaining(`at most ${BOUND}`) })
      }
      expect(await sleepingStatements(stack.db.adminUrl)).toBe(BOUND)
    } finally {
      await member40.stop()
    }
  }, 20_000)

  it("POST /function counts against the same bound as POST /sql", async () => {
    const sleeps = flood(BOUND, "/sql", { sql: "SELECT pg_sleep(20) AS slept" })
    try {
      expect(await eventually(async () => (await sleepingStatements(stack.db.adminUrl)) === BOUND, 10_000)).toBe(true)
      const call = await fetch(`${stack.main.url}/function/pg_sleep`, {
        method: "POST",
        headers: { authorization: `Bearer ${member.token}`, "content-type": "application/json" },
        body: JSON.stringify([20])
      })
      expect(call.status).toBe(429)
      expect(call.headers.get("retry-after")).toBe("1")
      // Another user is not held up by it.
      expect((await sqlRequest(stack.main.url, owner.token, "SELECT 1 AS one")).status).toBe(200)
    } finally {
      await sleeps.stop()
    }
    // Once the member's statements are over, the member is served again.
    expect((await sqlRequest(stack.main.url, member.token, "SELECT 1 AS one")).status).toBe(200)
  }, 20_000)
})
