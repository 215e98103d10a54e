/**
 * Database faults: PostgreSQL (the test's own embedded server, not the suite's) is stopped and
 * started again under a load of POST /sql, with an open GET /events stream, while the main service
 * keeps running in this process. While the database is down every request must answer 503 with an
 * `{error}` body quickly (nothing hangs past SQL_TIMEOUT) and `/ready` must be 503; within 5 s of
 * the database coming back everything must work again by itself (no restart of Plinth), without a
 * single 500 and without leaking connections. The LISTEN connection killed with
 * `pg_terminate_backend`, before and after such a restart, must be survived with a `resync`.
 * Last, the server is frozen (SIGSTOP) rather than stopped: it stops answering without closing
 * any connection, and still no request may hang past SQL_TIMEOUT.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  adminQuery,
  clock,
  type Load,
  type MainService,
  openRawStream,
  type RawStream,
  type Sample,
  sleep,
  startLoad,
  startMainService,
  startStoppablePostgres,
  type StoppablePostgres,
  timedRequest
} from "./faults.ts"
import { sleepingStatements } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

const SQL_TIMEOUT_MS = 2_000
/** What "quickly" allows on top of SQL_TIMEOUT (a loaded CI machine, the HTTP round trip). */
const MARGIN_MS = 1_000
/** Everything must work again within this long after PostgreSQL accepts connections. */
const RECOVERY_MS = 5_000
/** How long PostgreSQL stays down (long enough that reconnection backoffs have grown). */
const DOWN_MS = 4_000
/** How long PostgreSQL stays frozen: past SQL_TIMEOUT and its margin, so a hang shows. */
const FROZEN_MS = SQL_TIMEOUT_MS + MARGIN_MS + 1_500
/** The main pool (src/layers/Tenancy.ts) plus the tenant's one LISTEN connection (TenantActor, both channels). */
const POOL_SIZE = 20
const LISTEN_CONNECTIONS = 1
const CONCURRENCY = 8
const RESYNC = /event: resync\ndata: \{\}\n\n/

let pg: StoppablePostgres
let main: MainService
let owner: string
let member: string

const signIn = async (email: string, role: string): Promise<string> => {
  const [row] = await adminQuery(pg.adminUrl, (sql) => sql<{ token: string }>`SELECT sys.invite_user(${email}, ${role}) AS token`)
  const response = await fetch(`${main.url}/auth/magic-link/verify`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ token: row!.token })
  })
  const body = (await response.json()) as { token?: string }
  if (response.status !== 200 || body.token === undefined) throw new Error(`sign-in failed: ${response.status} ${JSON.stringify(body)}`)
  return body.token
}

/** POST /sql as the owner; generous client timeout, so that a hang is measured rather than cut. */
const sqlRequest = (sql: string, params: ReadonlyArray<unknown> = [], headers: Record<string, string> = {}) =>
  timedRequest(`${main.url}/sql`, { method: "POST", body: { sql, params }, token: owner, headers }, 20_000)

const readyRequest = () => timedRequest(`${main.url}/ready`, { method: "GET" }, 20_000)

/** Connections of the main service's role (the LISTEN ones show their LISTEN as the last query). */
const authenticatorConnections = () =>
  adminQuery(pg.adminUrl, (sql) =>
    sql<{ total: number; listening: number }>`SELECT count(*)::int AS total,
        count(*) FILTER (WHERE query ILIKE 'LISTEN%')::int AS listening
      FROM pg_stat_activity WHERE usename = 'authenticator'`)
    .then((rows) => rows[0]!)

/** Kills the LISTEN connection (page_change and plinth_catalog); returns how many backends were terminated. */
const killPageListener = () =>
  adminQuery(pg.adminUrl, (sql) =>
    sql<{ n: number }>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE usename = 'authenticator' AND application_name = 'plinth listen'`)
    .then((rows) => rows[0]!.n)

let slugs = 0
const freshSlug = () => `fault-${++slugs}-${Date.now()}`
const pageChange = (slug: string) => new RegExp(`event: page_change\\ndata: \\{"schema":"public","slug":"${slug}"\\}\\n\\n`)

/** Creates a page through /sql (as the owner), failing the test if that does not work. */
const createPage = async (slug: string) => {
  const created = await sqlRequest("SELECT sys.create_page($1, $2, $3)", [slug, "T", ""])
  if (created.status !== 200) throw new Error(`create_page: ${created.status} ${created.text}`)
}

/** A sample as an assertion shows it: when (ms on the test clock), how long, what came back. */
const short = (sample: Sample) => ({
  at: Math.round(sample.start),
  ms: Math.round(sample.end - sample.start),
  status: sample.status,
  body: sample.body,
  ...(sample.code === undefined ? {} : { code: sample.code }),
  ...(sample.status === 200 ? {} : { text: sample.text })
})

/** Identical failures folded into one line with a count (thousands of them would drown the diff). */
const folded = (samples: ReadonlyArray<Sample>) => {
  const groups = new Map<string, { count: number; maxMs: number; first: ReturnType<typeof short> }>()
  for (const sample of samples) {
    const key = `${sample.status} ${sample.body} ${sample.code ?? ""} ${sample.text.replace(/127\.0\.0\.1:\d+/g, "")}`
    const group = groups.get(key)
    if (group === undefined) groups.set(key, { count: 1, maxMs: Math.round(sample.end - sample.start), first: short(sample) })
    else {
      group.count++
      group.maxMs = Math.max(group.maxMs, Math.round(sample.end - sample.start))
    }
  }
  return [...groups.values()]
}

/** Ms from `since` to the first request from which on every request started was answered 200. */
const recoveredAfter = (samples: ReadonlyArray<Sample>, since: number): number | undefined => {
  const lastFailure = Math.max(since, ...samples.filter((s) => s.status !== 200).map((s) => s.start))
  const firstGood = samples.filter((s) => s.start > lastFailure && s.status === 200).map((s) => s.start)
  return firstGood.length === 0 ? undefined : Math.round(Math.min(...firstGood) - since)
}

beforeAll(async () => {
  pg = await startStoppablePostgres()
  // The load is one user's: the per-user bound on statements (StatementAdmission) would answer 429
  // to whatever waited past its second for a slow 503, which is not what these tests are about.
  main = await startMainService(pg.mainUrl, {
    SQL_TIMEOUT: `${SQL_TIMEOUT_MS / 1000}s`,
    EVENTS_HEARTBEAT: "1 second",
    SQL_MAX_CONCURRENT_PER_USER: String(CONCURRENCY + 4)
  })
  owner = await signIn("faults-owner@plinth.test", "owner")
  member = await signIn("faults-member@plinth.test", "member")
}, 60_000)

afterAll(async () => {
  await main?.close()
  await pg?.destroy()
}, 30_000)

/** When a stream opened now sees `resync` after the LISTEN connection is killed. */
const resyncAfterKill = async () => {
  const stream = openRawStream(`${main.url}/events`, member)
  try {
    await stream.waitFor(/: connected\n\n/, 5_000)
    const killedAt = clock()
    const killed = await killPageListener()
    const seen = await stream.waitFor(RESYNC, 15_000).then((at) => at, () => undefined)
    const slug = freshSlug()
    await createPage(slug)
    const delivered = await stream.waitFor(pageChange(slug), 3_000).then(() => true, () => false)
    return { killed, resyncMs: seen === undefined ? undefined : Math.round(seen - killedAt), delivered }
  } finally {
    stream.close()
  }
}

describe("the LISTEN connection killed with pg_terminate_backend, before any outage", () => {
  it("open streams get `resync` within 5 s and later changes flow (the baseline)", async () => {
    const outcome = await resyncAfterKill()
    expect(outcome).toEqual({ killed: 1, resyncMs: expect.any(Number), delivered: true })
    expect(outcome.resyncMs).toBeLessThanOrEqual(RECOVERY_MS)
  }, 30_000)
})

describe("PostgreSQL stopped and restarted under a load of POST /sql", () => {
  /** Times on `clock` of the outage's edges. */
  const at = { stopBegin: 0, stopEnd: 0, startBegin: 0, startEnd: 0, loadEnd: 0 }
  let load: Load
  let ready: Load
  /** Statements still running when PostgreSQL shuts down. */
  let inFlight: Array<Sample> = []
  /** Other endpoints that need the database, asked once while it is down. */
  const probes: Record<string, Sample> = {}
  let before: RawStream
  /** The stream opened before the outage: when it saw `resync`, or the error waiting for it. */
  let resync: { readonly at: number } | { readonly error: string }
  let connectionsBefore: { readonly total: number; readonly listening: number }
  let connections: { readonly total: number; readonly listening: number }

  beforeAll(async () => {
    before = openRawStream(`${main.url}/events`, member)
    await before.waitFor(/: connected\n\n/, 5_000)
    load = startLoad(() => sqlRequest("SELECT 1 AS one"), CONCURRENCY, 5)
    ready = startLoad(readyRequest, 1, 200)
    await sleep(1_000)
    connectionsBefore = await authenticatorConnections()

    // Two statements that are certainly running when the server shuts down (well within SQL_TIMEOUT).
    const sleeping = [sqlRequest("SELECT pg_sleep(1.5)"), sqlRequest("SELECT pg_sleep(1.5)")]
    await eventually(async () => (await sleepingStatements(pg.adminUrl)) === 2, 1_000, 20)
    at.stopBegin = clock()
    await pg.stop()
    at.stopEnd = clock()
    inFlight = await Promise.all(sleeping)

    await sleep(500)
    const [introspect, verify, fn, appSchema] = await Promise.all([
      timedRequest(`${main.url}/`, { method: "POST", body: {}, token: owner }, 20_000),
      timedRequest(`${main.url}/auth/magic-link/verify`, { method: "POST", body: { token: "ab".repeat(32) } }, 20_000),
      timedRequest(`${main.url}/function/now`, { method: "POST", body: [], token: owner }, 20_000),
      sqlRequest("SELECT 1", [], { "x-app-schema": "no_such_app" })
    ])
    Object.assign(probes, { introspect, verify, function: fn, appSchema })
    await sleep(Math.max(0, at.stopEnd + DOWN_MS - clock()))

    at.startBegin = clock()
    await pg.start()
    at.startEnd = clock()

    resync = await before.waitFor(RESYNC, RECOVERY_MS + 5_000).then(
      (seen) => ({ at: seen }),
      (error: Error) => ({ error: error.message })
    )
    await sleep(Math.max(0, at.startEnd + RECOVERY_MS + 2_000 - clock()))
    await Promise.all([load.stop(), ready.stop()])
    at.loadEnd = clock()
    connections = await authenticatorConnections()
  }, 60_000)

  afterAll(() => before?.close())

  const during = (samples: ReadonlyArray<Sample>) => samples.filter((s) => s.start >= at.stopEnd && s.end <= at.startBegin)
  const beforeStop = (samples: ReadonlyArray<Sample>) => samples.filter((s) => s.end <= at.stopBegin)
  const afterRecovery = (samples: ReadonlyArray<Sample>) => samples.filter((s) => s.start >= at.startEnd + RECOVERY_MS)

  it("answers 200 before the outage", () => {
    const samples = beforeStop(load.samples)
    expect(samples.length).toBeGreaterThan(10)
    expect(folded(samples.filter((s) => s.status !== 200))).toEqual([])
    expect(folded(beforeStop(ready.samples).filter((s) => s.status !== 200))).toEqual([])
  })

  it("while PostgreSQL is down, POST /sql answers only 503 with an {error} body", () => {
    const down = during(load.samples)
    expect(down.length).toBeGreaterThan(10)
    expect(folded(down.filter((s) => s.status !== 503 || (s.body !== "plain" && s.body !== "database")))).toEqual([])
  })

  it("no request hangs past SQL_TIMEOUT while PostgreSQL is stopped, and none goes unanswered", () => {
    const slow = [...load.samples, ...inFlight].filter((s) => s.status === 0 || s.end - s.start > SQL_TIMEOUT_MS + MARGIN_MS)
    expect(slow.map(short)).toEqual([])
  })

  it("never answers 500 (only 200 or 503), not even for statements running when the server shuts down", () => {
    const unexpected = [...load.samples, ...inFlight].filter((s) => s.status >= 500 && s.status !== 503)
    expect(folded(unexpected)).toEqual([])
  })

  it("/ready is 503 {error} while PostgreSQL is down, answering quickly", () => {
    const down = during(ready.samples)
    expect(down.length).toBeGreaterThan(3)
    const wrong = down.filter((s) => s.status !== 503 || s.body !== "plain" || s.end - s.start > SQL_TIMEOUT_MS + MARGIN_MS)
    expect(wrong.map(short)).toEqual([])
  })

  it("other endpoints that need the database answer 503 {error} while it is down", () => {
    const answers = Object.fromEntries(Object.entries(probes).map(([name, s]) => [name, {
      status: s.status,
      error: s.body === "plain" || s.body === "database",
      quick: s.end - s.start <= SQL_TIMEOUT_MS + MARGIN_MS
    }]))
    const expected = { status: 503, error: true, quick: true }
    expect(answers).toEqual({ introspect: expected, verify: expected, function: expected, appSchema: expected })
  })

  it("recovers by itself within 5 s of PostgreSQL coming back, and stays up", () => {
    const after = afterRecovery(load.samples)
    expect(after.length).toBeGreaterThan(10)
    expect(folded(after.filter((s) => s.status !== 200))).toEqual([])
    const sql = recoveredAfter(load.samples, at.startEnd)
    const readiness = recoveredAfter(ready.samples, at.startEnd)
    expect({ sql, readiness }).toEqual({ sql: expect.any(Number), readiness: expect.any(Number) })
    expect(Math.max(sql!, readiness!)).toBeLessThanOrEqual(RECOVERY_MS)
  })

  it("leaks no connections: at most the pool plus the LISTEN connections afterwards", () => {
    expect(connectionsBefore.listening).toBe(LISTEN_CONNECTIONS)
    expect(connections.total).toBeLessThanOrEqual(POOL_SIZE + LISTEN_CONNECTIONS)
    expect(connections.listening).toBe(LISTEN_CONNECTIONS)
  })

  it("an /events stream open across the outage is closed or told to resync within 5 s of recovery", () => {
    const ended = before.endedAt()
    if ("at" in resync) expect(Math.round(resync.at - at.startEnd)).toBeLessThanOrEqual(RECOVERY_MS)
    else expect({ closed: ended !== undefined, waiting: resync.error }).toEqual({ closed: true, waiting: expect.any(String) })
  })

  it("a page change after recovery reaches a (re)connected client, and the surviving stream", async () => {
    const fresh = openRawStream(`${main.url}/events`, member)
    try {
      await fresh.waitFor(/: connected\n\n/, 5_000)
      const slug = freshSlug()
      await createPage(slug)
      await fresh.waitFor(pageChange(slug), 3_000)
      if (before.endedAt() === undefined) await before.waitFor(pageChange(slug), 3_000)
    } finally {
      fresh.close()
    }
  })
})

describe("the LISTEN connection killed with pg_terminate_backend after the restart", () => {
  let outcome: Awaited<ReturnType<typeof resyncAfterKill>>

  it("open streams get `resync`, later changes flow, and the one LISTEN connection remains", async () => {
    outcome = await resyncAfterKill()
    expect(outcome).toEqual({ killed: 1, resyncMs: expect.any(Number), delivered: true })
    expect((await authenticatorConnections()).listening).toBe(LISTEN_CONNECTIONS)
  }, 30_000)

  it("the `resync` comes within 5 s, as before the outage", () => {
    expect(outcome.resyncMs).toBeLessThanOrEqual(RECOVERY_MS)
  })
})

describe("PostgreSQL frozen (SIGSTOP): it stops answering but closes no connection", () => {
  /** From when every PostgreSQL process is stopped to when they run again. */
  const at = { frozen: 0, thawed: 0 }
  let load: Load
  let ready: Load
  /** More statements at once than the pool has connections: some wait for one to come free. */
  let burst: Promise<ReadonlyArray<Sample>>
  let connections: { readonly total: number; readonly listening: number }

  beforeAll(async () => {
    // Twelve statements at once leave twelve pooled connections; with only four load workers,
    // requests during the freeze find idle ones (whose backends are frozen too).
    await Promise.all(Array.from({ length: 12 }, () => sqlRequest("SELECT pg_sleep(0.2)")))
    const others = [member, await signIn("faults-burst@plinth.test", "member")]
    load = startLoad(() => sqlRequest("SELECT 1 AS one"), CONCURRENCY / 2, 5)
    ready = startLoad(readyRequest, 1, 200)
    await sleep(500)
    await pg.freeze()
    at.frozen = clock()
    await sleep(200)
    burst = Promise.all(others.flatMap((token) =>
      Array.from({ length: CONCURRENCY + 4 }, () =>
        timedRequest(`${main.url}/sql`, { method: "POST", body: { sql: "SELECT 2 AS two", params: [] }, token }, 20_000))
    ))
    await sleep(FROZEN_MS - 200)
    pg.thaw()
    at.thawed = clock()
    await sleep(RECOVERY_MS + 1_000)
    await Promise.all([load.stop(), ready.stop()])
    connections = await authenticatorConnections()
  }, 60_000)

  afterAll(() => pg?.thaw())

  /** Requests in flight at some point of the freeze. */
  const overlapping = (samples: ReadonlyArray<Sample>) => samples.filter((s) => s.start < at.thawed && s.end > at.frozen)
  /**
   * Of those: each must be answered within `boundMs` (a request sent just before the freeze
   * included), and one sent during the freeze and answered before the thaw must be a 503.
   */
  const misbehaved = (samples: ReadonlyArray<Sample>, boundMs: number) =>
    overlapping(samples).filter((s) =>
      s.status === 0 || s.end - s.start > boundMs || (s.start >= at.frozen && s.end < at.thawed && s.status !== 503)
    )

  it("POST /sql answers within SQL_TIMEOUT (503) instead of hanging", () => {
    expect(overlapping(load.samples).length).toBeGreaterThan(0)
    expect(folded(misbehaved(load.samples, SQL_TIMEOUT_MS + MARGIN_MS))).toEqual([])
  })

  it("a statement waiting for a connection of the exhausted pool answers within SQL_TIMEOUT too (503)", async () => {
    const samples = await burst
    expect(samples.length).toBeGreaterThan(POOL_SIZE)
    expect(folded(misbehaved(samples, SQL_TIMEOUT_MS + MARGIN_MS))).toEqual([])
  })

  it("/ready answers 503 within its 2 s bound", () => {
    expect(overlapping(ready.samples).length).toBeGreaterThan(0)
    expect(misbehaved(ready.samples, 2_000 + MARGIN_MS).map(short)).toEqual([])
  })

  it("recovers within 5 s of thawing, without a 500, and leaks no connections", () => {
    expect(folded(load.samples.filter((s) => s.status >= 500 && s.status !== 503))).toEqual([])
    expect(folded(load.samples.filter((s) => s.start >= at.thawed + RECOVERY_MS && s.status !== 200))).toEqual([])
    expect(recoveredAfter(load.samples, at.thawed)).toBeLessThanOrEqual(RECOVERY_MS)
    expect(connections.total).toBeLessThanOrEqual(POOL_SIZE + LISTEN_CONNECTIONS)
    expect(connections.listening).toBe(LISTEN_CONNECTIONS)
  })
})
