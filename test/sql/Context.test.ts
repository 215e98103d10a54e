/**
 * Who a statement runs as (spec §4.4, §5.2): the caller's role, app.user_id, app.app_id, the
 * search path and SQL_TIMEOUT, all set for the request's transaction only, so that the next
 * request on a pooled connection never inherits them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { ddl, type PlainErrorBody, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn
let staff: SignIn
let owner: SignIn
let appId: string

beforeAll(async () => {
  stack = await startAuthStack({ SQL_TIMEOUT: "2s" })
  await ddl(stack, "CREATE SCHEMA ctx; GRANT USAGE ON SCHEMA ctx TO owner, admin, staff, member")
  const [app] = await query(stack.db.adminUrl, (sql) =>
    sql<{ id: string }>`INSERT INTO sys.apps (schema_name, display_name) VALUES ('ctx', 'Context') RETURNING id::text AS id`)
  appId = app!.id
  ;[member, staff, owner] = await Promise.all([
    signedIn(stack, "member@plinth.test", "member"),
    signedIn(stack, "staff@plinth.test", "staff"),
    signedIn(stack, "owner@plinth.test", "owner")
  ])
})
afterAll(() => stack?.close())

const SETTINGS = `SELECT current_user AS role, session_user AS session,
  current_setting('app.user_id') AS user_id,
  current_setting('app.app_id', true) AS app_id,
  current_setting('search_path') AS search_path,
  current_setting('statement_timeout') AS statement_timeout,
  $1::text AS tag`

interface Settings {
  readonly role: string
  readonly session: string
  readonly user_id: string
  readonly app_id: string | null
  readonly search_path: string
  readonly statement_timeout: string
  readonly tag: string
}

const settingsOf = (who: SignIn, tag: string, headers?: Record<string, string>) =>
  sqlRequest<SqlResult<Settings>>(stack.main.url, who.token, SETTINGS, [tag], headers)

describe("the caller's role and claims", () => {
  it.each([
    ["member", () => member],
    ["staff", () => staff],
    ["owner", () => owner]
  ])("as %s: current_user, app.user_id, no app, the public search path and SQL_TIMEOUT", async (role, who) => {
    const response = await settingsOf(who(), role)
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{
        role,
        session: "authenticator",
        user_id: who().user.id,
        app_id: "",
        search_path: "public, pg_catalog",
        statement_timeout: "2s",
        tag: role
      }],
      rowCount: 1
    })
  })

  it("with X-App-Schema the app's id and search path are set too", async () => {
    const response = await settingsOf(staff, "app", { "x-app-schema": "ctx" })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{
        role: "staff",
        session: "authenticator",
        user_id: staff.user.id,
        app_id: appId,
        search_path: "\"ctx\", public, pg_catalog",
        statement_timeout: "2s",
        tag: "app"
      }],
      rowCount: 1
    })
  })

  it("a caller cannot change its own role or claims", async () => {
    for (const sql of [
      "SELECT set_config('app.user_id', '00000000-0000-0000-0000-000000000000', false)",
      "SELECT pg_catalog.set_config('role', 'owner', true)",
      "SELECT SET_CONFIG('statement_timeout', '0', true)",
      "SET ROLE owner",
      "SET app.user_id = '00000000-0000-0000-0000-000000000000'",
      "RESET ROLE"
    ]) {
      const response = await sqlRequest<PlainErrorBody>(stack.main.url, member.token, sql)
      expect(response.status, sql).toBe(400)
      expect(response.body, sql).toEqual({ error: expect.any(String) })
    }
    const after = await settingsOf(member, "after")
    expect(after.status).toBe(200)
    expect(after.body.rows[0]).toMatchObject({ role: "member", user_id: member.user.id, statement_timeout: "2s" })
  })

  it("of 50 concurrent requests by three callers, each answer carries its own caller's settings", async () => {
    const callers = [
      { who: member, role: "member", headers: undefined, appId: "", searchPath: "public, pg_catalog" },
      { who: staff, role: "staff", headers: { "x-app-schema": "ctx" }, appId, searchPath: "\"ctx\", public, pg_catalog" },
      { who: owner, role: "owner", headers: undefined, appId: "", searchPath: "public, pg_catalog" }
    ] as const
    const plan = Array.from({ length: 50 }, (_, index) => callers[index % 2 === 0 ? 0 : index % 3 === 0 ? 2 : 1])
    const responses = await Promise.all(plan.map((caller, index) => settingsOf(caller.who, `req-${index}`, caller.headers)))
    responses.forEach((response, index) => {
      const caller = plan[index]!
      expect(response.status, `request ${index}`).toBe(200)
      expect(response.body, `request ${index}`).toEqual({
        rows: [{
          role: caller.role,
          session: "authenticator",
          user_id: caller.who.user.id,
          app_id: caller.appId,
          search_path: caller.searchPath,
          statement_timeout: "2s",
          tag: `req-${index}`
        }],
        rowCount: 1
      })
    })
  })

  it("after a failed statement the next request on the pool is clean too", async () => {
    const failures = await Promise.all(Array.from({ length: 10 }, () =>
      sqlRequest(stack.main.url, staff.token, "SELECT 1 / 0", [], { "x-app-schema": "ctx" })))
    for (const failure of failures) expect(failure).toMatchObject({ status: 400, body: { error: { code: "22012" } } })
    const responses = await Promise.all(Array.from({ length: 10 }, (_, index) => settingsOf(member, `clean-${index}`)))
    for (const [index, response] of responses.entries()) {
      expect(response.status).toBe(200)
      expect(response.body).toEqual({
        rows: [{
          role: "member",
          session: "authenticator",
          user_id: member.user.id,
          app_id: "",
          search_path: "public, pg_catalog",
          statement_timeout: "2s",
          tag: `clean-${index}`
        }],
        rowCount: 1
      })
    }
  })
})
