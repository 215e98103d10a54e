/**
 * Graceful shutdown of the main service under load: SIGTERM stops accepting connections, lets the
 * requests already running finish with their real answers, and the process exits 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { inviteAsDatabaseAdmin, verify } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, sleepingStatements, type TestDatabase } from "../support/database.ts"
import { freePort } from "../support/ports.ts"
import { eventually } from "../support/eventually.ts"

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(() => db?.drop())

const JWT_SECRET = "a-test-secret-that-is-at-least-32-bytes-long"

const serveMain = async () => {
  const port = await freePort()
  // One user's 8 statements in flight at once: the per-user bound (default 4) must not refuse them.
  const plinth = runPlinth(["serve", "main"], {
    JWT_SECRET,
    DATABASE_URL: db.mainUrl,
    PORT: String(port),
    SQL_TIMEOUT: "60s",
    SQL_MAX_CONCURRENT_PER_USER: "8"
  })
  await plinth.waitFor(/Plinth main service: \S+/)
  return { plinth, base: `http://127.0.0.1:${port}` }
}

const sqlAs = (base: string, token: string, sql: string, params: ReadonlyArray<unknown> = []) =>
  fetch(`${base}/sql`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", connection: "close" },
    body: JSON.stringify({ sql, params })
  }).then(async (response) => ({ status: response.status, body: await response.json() as unknown }))

describe("SIGTERM under load (plinth serve main)", () => {
  it("in-flight requests finish with 200, new connections are refused, exit 0", async () => {
    const { plinth, base } = await serveMain()
    try {
      const { token } = await verify(base, await inviteAsDatabaseAdmin(db, "drain@plinth.test", "member"))
      const inFlight = Array.from({ length: 8 }, (_, i) => sqlAs(base, token, "SELECT $1::int AS i, true AS slept FROM pg_sleep(1.5)", [i]))
      // Every request reaches the database before the signal.
      expect(await eventually(async () => (await sleepingStatements(db.adminUrl)) === 8, 5_000, 50)).toBe(true)
      plinth.child.kill("SIGTERM")
      // The listener closes at once, while the requests in flight still run.
      let late: number | string = 0
      await eventually(async () => (late = await fetch(`${base}/health`).then((r) => r.status, () => "refused")) === "refused", 1_200, 50)

      expect(await Promise.all(inFlight)).toEqual(
        Array.from({ length: 8 }, (_, i) => ({ status: 200, body: { rows: [{ i, slept: true }], rowCount: 1 } }))
      )
      expect(late).toBe("refused")
      expect(await plinth.exited).toBe(0)
    } finally {
      plinth.child.kill("SIGKILL")
    }
  }, 60_000)

  it("the drain is bounded: a request that outlasts it gets 503, does not hold the process, and its statement ends", async () => {
    const { plinth, base } = await serveMain()
    try {
      const { token } = await verify(base, await inviteAsDatabaseAdmin(db, "long@plinth.test", "member"))
      const sleeping = () => sleepingStatements(db.adminUrl)
      const long = sqlAs(base, token, "SELECT true AS slept FROM pg_sleep(40)")
      expect(await eventually(async () => (await sleeping()) === 1, 5_000, 100)).toBe(true)
      const stopping = Date.now()
      plinth.child.kill("SIGTERM")
      expect(await plinth.exited).toBe(0)
      // The drain bound is 3 s; far below the 40 s statement.
      expect(Date.now() - stopping).toBeLessThan(15_000)
      // Cut off at the bound, it still gets an answer: 503, not a dropped connection.
      expect(await long).toEqual({ status: 503, body: { error: "service unavailable" } })
      // Cancelled before the exit: it ends at once, not in 40 s.
      expect(await eventually(async () => (await sleeping()) === 0, 2_000, 100)).toBe(true)
    } finally {
      plinth.child.kill("SIGKILL")
    }
  }, 60_000)
})
