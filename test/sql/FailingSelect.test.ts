/**
 * Issue #19, finding 6: a SELECT that failed in its one-round-trip peek was run again the long
 * way, so `select 1/(select 0 from pg_sleep(14))` took 28 s against SQL_TIMEOUT + 0.5 s. Now only
 * a peek that says "more than one row" or "writes" (25006) goes the long way, with what is left of
 * the statement timeout; any other failure of the peek is the answer.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query, runSql } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { startService } from "../support/services.ts"
import { BUSINESS_FIXTURES, type DatabaseErrorBody, ddl, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ SQL_TIMEOUT: "5s" })
  await ddl(stack, `${BUSINESS_FIXTURES}
    CREATE TABLE public.gate (n int);
    GRANT SELECT ON public.gate TO member;
  `)
  member = await signedIn(stack, "failing-select@plinth.test", "member")
})
afterAll(async () => {
  await stack?.close()
})

/**
 * An administrator's transaction holding `gate` exclusively: `locked` once it has the lock (a
 * second one queues behind whoever holds or waits for it), `release` commits.
 */
const holdGate = () => {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let signal!: () => void
  const locked = new Promise<void>((resolve) => (signal = resolve))
  const done = runSql(stack.db.adminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`LOCK TABLE public.gate IN ACCESS EXCLUSIVE MODE`
      signal()
      yield* Effect.promise(() => released)
    }))
  }))
  return { locked, release: () => (release(), done) }
}

/** Statements of this database waiting for a lock. */
const waitingForLocks = () =>
  query(stack.db.adminUrl, (sql) =>
    sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`)
    .then((rows) => rows[0]!.n)

describe("a SELECT that fails in its peek", () => {
  it("attack: a failing SELECT runs twice (select 1/(select 0 from pg_sleep(14)) took 28 s)", async () => {
    // The SELECT reads `gate` and fails (division by zero) only once it has read it. Held in
    // lock-step: `first` holds the table while the SELECT waits for it, `second` queues behind the
    // SELECT and takes the table the moment the SELECT's transaction ends. A second run of the
    // SELECT would then wait behind `second` until its statement timeout (503 57014).
    const first = holdGate()
    await first.locked
    const answer = sqlRequest<DatabaseErrorBody>(stack.main.url, member.token, "SELECT 1 / count(*)::int AS x FROM gate")
    expect(await eventually(async () => (await waitingForLocks()) === 1, 5_000)).toBe(true)
    const second = holdGate()
    try {
      expect(await eventually(async () => (await waitingForLocks()) === 2, 5_000)).toBe(true)
      await first.release()
      await second.locked
      const response = await answer
      expect(response.status).toBe(400)
      expect(response.body).toEqual({ error: { message: "division by zero", code: "22012", detail: null, hint: null, position: null } })
      expect(await waitingForLocks()).toBe(0)
    } finally {
      await second.release()
    }
  })

  it("the peek's error keeps the caller's own position", async () => {
    const response = await sqlRequest<DatabaseErrorBody>(stack.main.url, member.token, "SELECT id, no_such_column FROM items")
    expect(response.status).toBe(400)
    expect(response.body.error).toMatchObject({ code: "42703", position: 12 })
  })

  it("a SELECT that writes goes the long way with only what is left of SQL_TIMEOUT", async () => {
    // The peek sleeps 2 s, then is refused its write (25006); the long way has ~1 s of the 3 left,
    // so its sleep is cancelled by the statement timeout. With a fresh 3 s it would answer 200.
    const service = await startService("main", stack.db.mainUrl, { ...stack.env, SQL_TIMEOUT: "3s" })
    try {
      const before = await query(stack.db.adminUrl, (sql) => sql`SELECT last_value, is_called FROM public.items_id_seq`)
      const response = await sqlRequest<DatabaseErrorBody>(service.url, member.token, "SELECT pg_sleep(2) AS slept, nextval('items_id_seq') AS n")
      // The statement timeout (57014), or on a stalled machine the caller's deadline just past it.
      expect(response.status).toBe(503)
      // Neither run got as far as its write.
      const after = await query(stack.db.adminUrl, (sql) => sql`SELECT last_value, is_called FROM public.items_id_seq`)
      expect(after).toEqual(before)
    } finally {
      await service.close()
    }
  })

  it("a SELECT that writes still runs once, the long way", async () => {
    const response = await sqlRequest<SqlResult>(stack.main.url, member.token, "SELECT nextval('items_id_seq') AS n")
    expect(response.status).toBe(200)
    const [row] = await query(stack.db.adminUrl, (sql) => sql<{ n: string }>`SELECT last_value::text AS n FROM public.items_id_seq`)
    expect(response.body.rows).toEqual([{ n: row!.n }])
  })
})
