/**
 * POST /sql sends a request's transaction pipelined (src/services/StatementConnections.ts): a
 * statement without rows goes with BEGIN, the settings and COMMIT in one write. That is safe only
 * if the statement never runs before the settings (it would run as the login role, with nobody's
 * user id) and nothing of one request reaches another's transaction. Hammered here with many
 * users at once, writes and reads mixed, failures among them. And the function that cancels a
 * pipelined write whose caller left reaches nothing else. A SELECT is first peeked at in a read-only
 * transaction: one that writes must still run exactly once.
 */
import fc from "fast-check"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { ddl, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
const users: Array<SignIn> = []

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, `
    CREATE TABLE public.pipeline_log (id bigserial PRIMARY KEY, role_seen text NOT NULL, user_seen text NOT NULL, claimed text NOT NULL, timeout_seen text NOT NULL);
    GRANT SELECT, INSERT ON public.pipeline_log TO member, staff;
    GRANT USAGE ON SEQUENCE public.pipeline_log_id_seq TO member, staff;
  `)
  for (const [index, role] of ["member", "staff", "member", "staff", "member", "staff"].entries()) {
    users.push(await signedIn(stack, `pipeline${index}@plinth.test`, role))
  }
}, 60_000)
afterAll(async () => {
  await stack?.close()
})

const RECORD = `INSERT INTO pipeline_log (role_seen, user_seen, claimed, timeout_seen)
  SELECT current_user, current_setting('app.user_id', true), $1, current_setting('statement_timeout')`

describe("pipelined transactions", () => {
  it("every statement runs as its own caller, after its settings, with many callers at once", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ user: fc.nat(users.length - 1), kind: fc.constantFrom("write", "read", "failure") }), { minLength: 20, maxLength: 60 }),
        async (calls) => {
          const answers = await Promise.all(calls.map(async ({ user, kind }) => {
            const caller = users[user]!
            if (kind === "write") return { kind, caller, response: await sqlRequest(stack.main.url, caller.token, RECORD, [caller.user.id]) }
            if (kind === "read") {
              return { kind, caller, response: await sqlRequest(stack.main.url, caller.token, "SELECT current_user AS role_seen, current_setting('app.user_id', true) AS user_seen") }
            }
            return { kind, caller, response: await sqlRequest(stack.main.url, caller.token, "INSERT INTO pipeline_log (role_seen) VALUES (NULL)") }
          }))
          for (const { kind, caller, response } of answers) {
            if (kind === "write") expect(response.status).toBe(200)
            if (kind === "read") expect(response.body).toEqual({ rows: [{ role_seen: caller.user.role, user_seen: caller.user.id }], rowCount: 1 })
            if (kind === "failure") expect(response.status).toBe(409)
          }
        }
      ),
      { numRuns: 15 }
    )
    const rows = await query(stack.db.adminUrl, (sql) => sql<{ role_seen: string; user_seen: string; claimed: string; timeout_seen: string }>`SELECT role_seen, user_seen, claimed, timeout_seen FROM pipeline_log`)
    expect(rows.length).toBeGreaterThan(0)
    const byId = new Map(users.map((user) => [user.user.id, user.user.role]))
    for (const row of rows) {
      expect(row.user_seen).toBe(row.claimed)
      expect(row.role_seen).toBe(byId.get(row.claimed))
      expect(row.timeout_seen).not.toBe("0")
    }
  }, 120_000)

  it("a SELECT that writes runs exactly once: the read-only peek refuses it, and it runs the long way", async () => {
    const [caller] = users
    const values: Array<number> = []
    for (let i = 0; i < 6; i++) {
      // A new text each time, so that none is known to go the long way already.
      const response = await sqlRequest<{ rows: Array<{ n: string }> }>(stack.main.url, caller!.token, `SELECT nextval('pipeline_log_id_seq') AS n, ${i} AS i`)
      expect(response.status).toBe(200)
      values.push(Number(response.body.rows[0]!.n))
    }
    expect(values.slice(1).map((value, index) => value - values[index]!)).toEqual([1, 1, 1, 1, 1])
  })

  it("SELECTs of none, one and many rows answer the same, peeked at or not, the first time and again", async () => {
    const [caller] = users
    for (let round = 0; round < 2; round++) {
      for (const count of [0, 1, 2, 3, 50]) {
        const response = await sqlRequest(stack.main.url, caller!.token, "SELECT n, $2::text AS tag FROM generate_series(1, $1::int) AS n", [count, "t"])
        expect(response.status).toBe(200)
        expect(response.body).toEqual({ rows: Array.from({ length: count }, (_, index) => ({ n: index + 1, tag: "t" })), rowCount: count })
      }
    }
  })

  it("a one-row SELECT of any shape is answered by the peek, exactly as the long way would answer it", async () => {
    const [caller] = users
    // Read-only is the peek's mark: the long way runs in a transaction that may write.
    const ro = "current_setting('transaction_read_only')"
    const shapes: Array<[text: string, rows: Array<Record<string, unknown>>]> = [
      [`SELECT ${ro} AS ro;`, [{ ro: "on" }]],
      [`SELECT ${ro} AS ro ; \n `, [{ ro: "on" }]],
      [`SELECT ${ro} AS ro -- a trailing comment`, [{ ro: "on" }]],
      [`SELECT ${ro} AS ro /* a trailing block comment */`, [{ ro: "on" }]],
      [`SELECT 1 AS n, ${ro}`, [{ n: 1, current_setting: "on" }]],
      [`WITH x AS (SELECT 2 AS n) SELECT n, ${ro} AS ro FROM x`, [{ n: 2, ro: "on" }]],
      [`VALUES (${ro})`, [{ column1: "on" }]],
      [`(SELECT ${ro} AS ro) UNION ALL (SELECT 'x' WHERE false)`, [{ ro: "on" }]],
      [`SELECT n, ${ro} AS ro FROM generate_series(1, 5) AS n ORDER BY n DESC LIMIT 1`, [{ n: 5, ro: "on" }]],
      [`SELECT $1::int + 1 AS n, ${ro} AS ro`, [{ n: 42, ro: "on" }]],
      // Two columns of one name: the later one wins in JSON, as on the long way.
      [`SELECT 1 AS a, 2 AS a, ${ro} AS ro`, [{ a: 2, ro: "on" }]]
    ]
    for (const [text, rows] of shapes) {
      const response = await sqlRequest(stack.main.url, caller!.token, text, text.includes("$1") ? [41] : [])
      expect({ text, status: response.status, body: response.body }).toEqual({ text, status: 200, body: { rows, rowCount: rows.length } })
    }
  })

  it("plinth.cancel_statement is the login role's alone, and reaches only that login's own sessions", async () => {
    for (const role of ["owner", "admin", "staff", "member", "anon", "chat_authenticator"]) {
      const [can] = await query(stack.db.adminUrl, (sql) =>
        sql<{ execute: boolean }>`SELECT has_function_privilege(${role}, 'plinth.cancel_statement(integer)', 'EXECUTE') AS execute`)
      expect(can).toEqual({ execute: false })
    }
    // A member's statement cannot reach it either (EXECUTE is checked against the request's role).
    const [caller] = users
    const refused = await sqlRequest(stack.main.url, caller!.token, "SELECT plinth.cancel_statement(pg_backend_pid())")
    expect(refused.status).toBeGreaterThanOrEqual(400)
    expect(refused.status).toBeLessThan(500)
    // Someone else's session (the administrator's here) is out of its reach.
    const sleeper = query(stack.db.adminUrl, (sql) => sql`SELECT pg_sleep(3), 'admin-sleeper'`)
    let target: { pid: number } | undefined
    expect(await eventually(async () => {
      ;[target] = await query(stack.db.adminUrl, (sql) =>
        sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE query LIKE '%admin-sleeper%' AND pid <> pg_backend_pid() AND state = 'active'`)
      return target !== undefined
    }, 2_500)).toBe(true)
    const [cancelled] = await query(stack.db.mainUrl, (sql) => sql<{ done: boolean }>`SELECT plinth.cancel_statement(${target!.pid}) AS done`)
    expect(cancelled).toEqual({ done: false })
    await expect(sleeper).resolves.toBeDefined()
  })
})
