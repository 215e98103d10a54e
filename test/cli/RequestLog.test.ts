/**
 * `plinth serve main`'s request lines as a process writes them: JSON on stdout in production,
 * readable on stderr in development, none with LOG_REQUESTS=false or LOG_LEVEL=Warn, and none lost
 * when SIGTERM stops the process (answered just before it, or while it drains).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { inviteAsDatabaseAdmin, verify } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, sleepingStatements, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { freePort } from "../support/ports.ts"

const JWT_SECRET = "a-test-secret-that-is-at-least-32-bytes-long"
let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(() => db?.drop())

const serveMain = async (env: Record<string, string>) => {
  const port = await freePort()
  const plinth = runPlinth(["serve", "main"], { JWT_SECRET, DATABASE_URL: db.mainUrl, PORT: String(port), SQL_TIMEOUT: "60s", ...env })
  await plinth.waitFor(/Plinth main service: \S+/)
  return { plinth, base: `http://127.0.0.1:${port}` }
}

const get = (url: string, requestId: string) => fetch(url, { headers: { "x-request-id": requestId } }).then((response) => response.status)

/** Requests the process answers, then SIGTERM; resolves once it exited 0, with what it wrote. */
const answerThenStop = async (env: Record<string, string>) => {
  const { base, plinth } = await serveMain(env)
  try {
    expect(await get(`${base}/health`, "quiet-1")).toBe(200)
    expect(await get(`${base}/nope?token=t`, "quiet-2")).toBe(404)
    plinth.child.kill("SIGTERM")
    expect(await plinth.exited).toBe(0)
    return { stdout: plinth.stdout(), stderr: plinth.stderr() }
  } finally {
    plinth.child.kill("SIGKILL")
  }
}

/** The JSON lines of `output` that are request lines. */
const requestLines = (output: string) =>
  output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as { message: string; annotations: Record<string, unknown> })
    .filter((entry) => entry.annotations["requestId"] !== undefined)

describe("request lines of plinth serve main", () => {
  it("production: a JSON line on stdout per request, answered just before SIGTERM or while draining, none lost", async () => {
    const { base, plinth } = await serveMain({ NODE_ENV: "production" })
    try {
      const { token } = await verify(base, await inviteAsDatabaseAdmin(db, "drain-log@plinth.test", "member"))
      const draining = Array.from({ length: 4 }, (_, i) =>
        fetch(`${base}/sql`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "x-request-id": `drain-${i}`, connection: "close" },
          body: JSON.stringify({ sql: "SELECT true AS slept FROM pg_sleep(1)" })
        }).then((response) => response.status))
      expect(await eventually(async () => (await sleepingStatements(db.adminUrl)) === 4, 5_000, 50)).toBe(true)
      expect(await get(`${base}/nope?token=never-log-this`, "last-before-stop")).toBe(404)
      plinth.child.kill("SIGTERM")
      expect(await Promise.all(draining)).toEqual([200, 200, 200, 200])
      expect(await plinth.exited).toBe(0)
      const lines = requestLines(plinth.stdout())
      const byId = (id: string) => lines.filter((entry) => entry.annotations["requestId"] === id)
      for (const id of ["last-before-stop", "drain-0", "drain-1", "drain-2", "drain-3"]) expect(byId(id)).toHaveLength(1)
      expect(byId("last-before-stop")[0]!.message).toMatch(/^GET \/nope 404 \d+\.\dms$/)
      expect(byId("drain-0")[0]!.annotations).toMatchObject({ method: "POST", path: "/sql", status: 200 })
      expect(plinth.stdout() + plinth.stderr()).not.toContain("never-log-this")
    } finally {
      plinth.child.kill("SIGKILL")
    }
  }, 60_000)

  it("development: the readable line on stderr", async () => {
    const { stderr, stdout } = await answerThenStop({ NODE_ENV: "development" })
    expect(stderr).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/health 200 \d+\.\dms$/m)
    expect(stderr).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  GET \/nope 404 \d+\.\dms$/m)
    expect(stdout).not.toContain("GET /health")
  }, 60_000)

  it("LOG_REQUESTS=false: no request line, other lines stay", async () => {
    const { stderr, stdout } = await answerThenStop({ NODE_ENV: "production", LOG_REQUESTS: "false" })
    expect(requestLines(stdout)).toEqual([])
    expect(stdout + stderr).not.toMatch(/GET \/(health|nope)/)
    expect(stdout).toContain("Plinth main service:")
  }, 60_000)

  it("LOG_LEVEL=Warn: no request line (they are Info lines)", async () => {
    const { stderr, stdout } = await answerThenStop({ NODE_ENV: "production", LOG_LEVEL: "Warn" })
    expect(requestLines(stdout)).toEqual([])
    expect(stdout + stderr).not.toMatch(/GET \/(health|nope)/)
  }, 60_000)

  it("an invalid LOG_REQUESTS names the variable", async () => {
    const plinth = runPlinth(["serve", "main"], { JWT_SECRET, DATABASE_URL: db.mainUrl, PORT: String(await freePort()), LOG_REQUESTS: "maybe" })
    expect(await plinth.exited).toBe(1)
    expect(plinth.stderr().trim()).toMatch(/^plinth: invalid configuration: LOG_REQUESTS/)
  }, 60_000)
})
