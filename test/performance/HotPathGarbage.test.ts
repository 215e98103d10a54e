/**
 * What a `POST /sql` leaves behind: nothing that outlives it. A request whose objects stay
 * reachable after it ends (through a generator function created per request, say:
 * docs/performance-notes.md) is promoted by V8's young collections to the old generation, where only a full
 * collection frees it: that was ~5 KB and ~60 µs of CPU a request. Counted from V8's own record
 * of each young collection (`--trace-gc-nvp`) in a `plinth serve main` of its own, one request at
 * a time, so that nothing of the client's and (almost) nothing in flight is counted.
 */
import { Duration, Effect, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { Agent, request as httpRequest } from "node:http"
import { afterAll, beforeAll, expect, it } from "vitest"
import { makeAccessTokens } from "../../src/services/AccessTokens.ts"
import { PLINTH_NODE_FLAGS, runPlinth } from "../support/cli.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { freePort } from "../support/ports.ts"
import { TEST_JWT_SECRET } from "../support/services.ts"

const BODY = JSON.stringify({ sql: "SELECT $1::int AS n, 'x' AS label", params: [7] })

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
}, 60_000)
afterAll(() => db?.drop())

/** A member's token, as Plinth issues them. */
const memberToken = () =>
  Effect.runPromise(
    makeAccessTokens({ secret: Redacted.make(TEST_JWT_SECRET), ttl: Duration.minutes(10) })
      .issue({ userId: randomUUID(), role: "member", email: "member@plinth.test" })
  )

/** Bytes promoted by the young collections recorded in `trace` (V8's `--trace-gc-nvp` lines). */
const promotedIn = (trace: string) =>
  [...trace.matchAll(/gc=s .*?promoted=(\d+)/g)].reduce((sum, match) => sum + Number(match[1]), 0)

it("a POST /sql keeps nothing alive after it for the young collections to promote", async () => {
  const port = await freePort()
  const env = { NODE_ENV: "test", JWT_SECRET: TEST_JWT_SECRET, DATABASE_URL: db.mainUrl, PORT: String(port), CHAT_PORT: String(await freePort()), LOG_LEVEL: "Warn" }
  // V8 as in production (npm start: its flags, and its threads; with --single-threaded the service
  // promoted ~14 KB a request even without the fault).
  const plinth = runPlinth(["serve", "main"], env, undefined, ["--no-single-threaded", ...PLINTH_NODE_FLAGS, "--trace-gc-nvp"])
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  try {
    await plinth.waitFor(/Plinth main service: \S+/)
    const token = await memberToken()
    const sqlRequest = () =>
      new Promise<number>((resolve, reject) => {
        const outgoing = httpRequest(`http://127.0.0.1:${port}/sql`, {
          method: "POST",
          agent,
          headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "content-length": Buffer.byteLength(BODY) }
        }, (response) => response.resume().on("end", () => resolve(response.statusCode ?? 0)))
        outgoing.on("error", reject)
        outgoing.end(BODY)
      })
    const batch = async (count: number) => {
      for (let i = 0; i < count; i++) expect(await sqlRequest()).toBe(200)
    }
    await batch(500) // warm: the code compiled, the caches and the pool filled
    const before = plinth.stdout().length
    const requests = 3_000
    await batch(requests)
    const trace = plinth.stdout().slice(before)
    // The requests allocated enough for the young generation to be collected several times.
    expect(trace.match(/gc=s /g)?.length ?? 0).toBeGreaterThanOrEqual(3)
    // One generator function created per request: ~5,300 bytes a request; without: ~50.
    expect(promotedIn(trace) / requests).toBeLessThan(1_000)
  } finally {
    agent.destroy()
    plinth.child.kill("SIGTERM")
    // Without --single-threaded, an exit can hang on a background compile (test/support/cli.ts).
    const killer = setTimeout(() => plinth.child.kill("SIGKILL"), 10_000)
    await plinth.exited
    clearTimeout(killer)
  }
}, 120_000)
