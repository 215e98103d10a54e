/**
 * Issue #19, findings 4, 8 and 10, over real HTTP against a real database: advisory transaction
 * locks (a member held the rate limiter's lock for a mailbox), deep expressions (the guard's
 * recursive walks overflowed into a 500, and so can PostgreSQL's parser in WebAssembly), MERGE
 * inside WITH, and the *_to_xml functions that build a whole schema or database in memory.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { normalizeMailbox } from "../../src/actors/RateLimiter.ts"
import { sqlState } from "../../src/services/DatabaseError.ts"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query, runSql } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

/** The lock key namespace of plinth.rate_limit_check (sql/sys/10_rate_limits.sql). */
const RATE_LIMIT_LOCK_SPACE = 7270002

let stack: AuthStack
let member: SignIn

beforeAll(async () => {
  // The rate limits in PostgreSQL, as in production (DATABASE_URL set).
  stack = await startAuthStack({ RATE_LIMIT_STORE: "postgres" })
  await query(stack.db.adminUrl, (sql) =>
    sql.withTransaction(Effect.forEach([
      "CREATE TABLE public.gap_items (id int PRIMARY KEY, name text)",
      "INSERT INTO public.gap_items VALUES (1, 'one')",
      "GRANT SELECT, INSERT, UPDATE, DELETE ON public.gap_items TO member"
    ], (statement) => sql.unsafe(statement).unprepared, { discard: true })))
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(() => stack?.close())

const sqlAs = (user: SignIn, sql: string) => post(stack.main.url, "/sql", { sql }, { token: user.token })

/**
 * Runs `statement` on the main service's own login as `member`, past the guard: what the
 * database's privileges alone answer. Resolves to the SQLSTATE, or "ok".
 */
const asMemberPastTheGuard = (statement: string) =>
  runSql(stack.db.mainUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.andThen(
      sql`SELECT set_config('role', 'member', true)`,
      sql.unsafe(statement)
    )).pipe(Effect.as("ok"), Effect.catchTag("SqlError", (error) => Effect.succeed(sqlState(error) ?? "no code")))
  }))

const expectRefused = (answer: { readonly status: number; readonly body: unknown }, message: string) => {
  expect(answer.status).toBe(400)
  expect(answer.body).toEqual({ error: message })
}

describe("finding 4: advisory transaction locks", () => {
  const mailbox = "victim@plinth.test"
  // `<tenant>/mailbox:<mailbox>`, the tenant empty in single-tenant mode (AuthRoutes.ts).
  const key = `/mailbox:${normalizeMailbox(mailbox)}`

  it("attack: a member takes the rate limiter's lock for a mailbox through /sql", async () => {
    for (const call of [
      `pg_advisory_xact_lock(hashtextextended('${key}', ${RATE_LIMIT_LOCK_SPACE}))`,
      `pg_advisory_xact_lock_shared(hashtextextended('${key}', ${RATE_LIMIT_LOCK_SPACE}))`,
      `pg_try_advisory_xact_lock(hashtextextended('${key}', ${RATE_LIMIT_LOCK_SPACE}))`,
      `pg_try_advisory_xact_lock_shared(1, 2)`,
      `pg_catalog.pg_advisory_xact_lock(1, 2)`
    ]) {
      const name = call.slice(call.startsWith("pg_catalog.") ? 11 : 0, call.indexOf("("))
      expectRefused(await sqlAs(member, `SELECT ${call}, pg_sleep(0)`), `function ${name} is not allowed`)
      // And the database refuses it too, should the guard ever miss one.
      expect(await asMemberPastTheGuard(`SELECT ${call}`), call).toBe("42501")
    }
  })

  it("attack: a lock held on a mailbox's key does not hold up POST /auth/magic-link for it", async () => {
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    // Held the way the member held it, by a session that does not let go until told to.
    const holder = runSql(stack.db.adminUrl, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql.withTransaction(Effect.andThen(
        sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, ${RATE_LIMIT_LOCK_SPACE}))`,
        Effect.promise(() => released)
      ))
    }))
    try {
      expect(await eventually(async () => {
        const [row] = await query(stack.db.adminUrl, (sql) =>
          sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
        return row!.n > 0
      })).toBe(true)
      // Answered while the lock is still held: the check gave up waiting, and says "try again soon".
      const busy = await post(stack.main.url, "/auth/magic-link", { email: mailbox })
      expect(busy.status).toBe(429)
      expect(busy.body).toEqual({ error: expect.any(String) })
      expect(busy.headers.get("retry-after")).toBe("1")
    } finally {
      release()
      await holder
    }
    const after = await post(stack.main.url, "/auth/magic-link", { email: mailbox })
    expect(after.status).toBe(200)
    expect(after.body).toEqual({ sent: true })
  })
})

describe("finding 8: deep expressions", () => {
  const sum = (terms: number, tail = "") => `SELECT ${Array.from({ length: terms }, () => "1").join("+")}${tail} AS n`
  const nested = (depth: number) => `SELECT ${"abs(".repeat(depth)}1${")".repeat(depth)} AS n`

  it("attack: SELECT 1+1+… with 3,000 terms is answered, not a 500", async () => {
    expect(await sqlAs(member, sum(3_000))).toEqual({ status: 200, headers: expect.anything(), body: { rows: [{ n: 3_000 }], rowCount: 1 } })
  })

  it("attack: 3,000 nested calls are answered, not a 500", async () => {
    expect(await sqlAs(member, nested(3_000))).toEqual({ status: 200, headers: expect.anything(), body: { rows: [{ n: 1 }], rowCount: 1 } })
  })

  it("deeper than PostgreSQL's stack is PostgreSQL's 400 (54001)", async () => {
    const answer = await sqlAs(member, sum(5_000))
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ error: { code: "54001" } })
  })

  it("attack: statements too deep for the parser are 400, again and again, and the service keeps parsing", async () => {
    for (let i = 0; i < 30; i++) {
      expectRefused(await sqlAs(member, sum(20_000, ` + ${i}`)), "the statement is nested too deeply")
      expect((await sqlAs(member, `SELECT ${i} AS i`)).body).toEqual({ rows: [{ i }], rowCount: 1 })
    }
    expectRefused(await sqlAs(member, "SELECT set_config('role', 'owner', true)"), "function set_config is not allowed")
  })

  it("nesting past the parser's own limit is a 400 syntax error", async () => {
    const answer = await sqlAs(member, nested(12_000))
    expect(answer.status).toBe(400)
    expect(answer.body).toMatchObject({ error: { code: "42601" } })
  })

  it("a result value nested too deeply for JSON is a 400 that says to cast it", async () => {
    const answer = await sqlAs(member, `SELECT '${"[".repeat(5_000)}${"]".repeat(5_000)}'::jsonb AS j`)
    expectRefused(answer, "a result value is nested too deeply to send as JSON; cast it to text")
    expect(await sqlAs(member, `SELECT length('${"[".repeat(5_000)}${"]".repeat(5_000)}'::jsonb::text) AS n`))
      .toMatchObject({ status: 200, body: { rows: [{ n: 10_000 }] } })
  })

  it("POST /function/:name: deep arguments are 400 (its statement is Plinth's own, one level deep)", async () => {
    const deep = `${"[".repeat(10_000)}${"]".repeat(10_000)}`
    const answer = await post(stack.main.url, "/function/abs", `[${deep}]`, { token: member.token })
    expect(answer.status).toBe(400)
    expect(answer.body).toEqual({ error: expect.stringContaining("nested deeper than") })
    expect(await post(stack.main.url, "/function/abs", [-3], { token: member.token }))
      .toMatchObject({ status: 200, body: { rows: [{ abs: 3 }], rowCount: 1 } })
  })
})

describe("finding 10: guard gaps", () => {
  it("attack: MERGE inside WITH writes through /sql", async () => {
    const merges = [
      "WITH m AS (MERGE INTO gap_items t USING (SELECT 2 AS id) s ON t.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, 'merged') RETURNING t.*) SELECT * FROM m",
      "WITH m AS (MERGE INTO gap_items t USING gap_items s ON t.id = s.id WHEN MATCHED THEN UPDATE SET name = 'merged') SELECT 1",
      "WITH m AS (MERGE INTO gap_items t USING gap_items s ON t.id = s.id WHEN MATCHED THEN DELETE RETURNING 1) SELECT count(*) FROM m"
    ]
    for (const text of merges) expectRefused(await sqlAs(member, text), "MERGE statements are not allowed")
    expect(await sqlAs(member, "SELECT id, name FROM gap_items ORDER BY id"))
      .toMatchObject({ status: 200, body: { rows: [{ id: 1, name: "one" }], rowCount: 1 } })
    // The table is the member's to write: the plain INSERT/UPDATE/DELETE CTEs still work.
    expect(await sqlAs(member, "WITH i AS (INSERT INTO gap_items VALUES (3, 'three') RETURNING id) SELECT id FROM i"))
      .toMatchObject({ status: 200, body: { rows: [{ id: 3 }] } })
  })

  it("attack: database_to_xml, schema_to_xml and table_to_xml build whole results in memory", async () => {
    for (const [name, args] of [
      ["database_to_xml", "true, true, ''"],
      ["database_to_xmlschema", "true, true, ''"],
      ["database_to_xml_and_xmlschema", "true, true, ''"],
      ["schema_to_xml", "'public', true, true, ''"],
      ["schema_to_xmlschema", "'public', true, true, ''"],
      ["schema_to_xml_and_xmlschema", "'public', true, true, ''"],
      ["table_to_xml", "'gap_items', true, true, ''"],
      ["table_to_xmlschema", "'gap_items', true, true, ''"],
      ["table_to_xml_and_xmlschema", "'gap_items', true, true, ''"]
    ] as const) {
      expectRefused(await sqlAs(member, `SELECT ${name}(${args})`), `function ${name} is not allowed`)
      expect(await asMemberPastTheGuard(`SELECT ${name}(${args})`), name).toBe("42501")
      const called = await post(stack.main.url, `/function/${name}`, [true, true, ""], { token: member.token })
      expect(called.status, name).toBe(403)
    }
  })
})
