/**
 * Issue #19, finding 3: a caller's statement has bounded temporary files (`temp_file_limit`) and
 * sort/hash memory (`work_mem`), set for the login roles by migration 0015; the caller cannot raise
 * them; hitting the bound is a clear 503 with PostgreSQL's message; a server where the migration
 * could not set the bound gets one warning as the main service starts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { TEMP_FILE_LIMIT_WARNING } from "../../src/services/ResourceLimits.ts"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"
import { type DatabaseErrorBody, type SqlResult, sqlRequest } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn
const started: Array<RunningService> = []

beforeAll(async () => {
  stack = await startAuthStack()
  member = await signedIn(stack, "limits-member@plinth.test", "member")
})
afterAll(async () => {
  for (const service of started) await service.close()
  await stack?.close()
})

/** Sets (or with null, drops) a login role's setting in the test's own database only; new sessions pick it up. */
const setForThisDatabase = (name: "temp_file_limit", value: string | null) =>
  query(stack.db.adminUrl, (sql) =>
    sql.unsafe(
      value === null
        ? `ALTER ROLE authenticator IN DATABASE "${stack.db.name}" RESET ${name}`
        : `ALTER ROLE authenticator IN DATABASE "${stack.db.name}" SET ${name} = '${value}'`
    ).unprepared)

/** A main service started now: its pools open new sessions, with the role settings of this moment. */
const freshService = async (env: Record<string, string> = {}) => {
  const service = await startService("main", stack.db.mainUrl, { ...stack.env, ...env })
  started.push(service)
  return service
}

/** Sorts more than work_mem holds: spills to temporary files. */
const SPILLING_SORT = "SELECT x FROM generate_series(1, 2000000) AS x ORDER BY x DESC OFFSET 1999999"

describe("temporary files and memory per statement", () => {
  it("attack: a member's statement writes gigabytes of temporary files: it runs with temp_file_limit 1GB and work_mem 4MB", async () => {
    const response = await sqlRequest<SqlResult>(
      stack.main.url,
      member.token,
      "SELECT current_setting('temp_file_limit') AS temp_file_limit, current_setting('work_mem') AS work_mem"
    )
    expect(response.body).toEqual({ rows: [{ temp_file_limit: "1GB", work_mem: "4MB" }], rowCount: 1 })
    expect(stack.main.logs.filter((entry) => entry.message === TEMP_FILE_LIMIT_WARNING)).toEqual([])
  })

  it("a member cannot raise either bound", async () => {
    for (
      const statement of [
        "SELECT set_config('temp_file_limit', '-1', true)",
        "SELECT set_config('work_mem', '1GB', true)",
        "SET work_mem = '1GB'",
        "SET LOCAL temp_file_limit = -1",
        "UPDATE pg_settings SET setting = '1GB' WHERE name = 'work_mem'",
        "SELECT 1 FROM (SELECT set_config('work_mem', '1GB', true)) AS s"
      ]
    ) {
      const response = await sqlRequest(stack.main.url, member.token, statement)
      expect([400, 403], `${statement}: ${response.status} ${JSON.stringify(response.body)}`).toContain(response.status)
    }
    const after = await sqlRequest<SqlResult>(stack.main.url, member.token, "SELECT current_setting('work_mem') AS work_mem")
    expect(after.body.rows).toEqual([{ work_mem: "4MB" }])
  })

  it("a sort past the bound (lowered to 1MB in this database) is a clear 503 with PostgreSQL's message, not a 500", async () => {
    await setForThisDatabase("temp_file_limit", "1MB")
    try {
      const service = await freshService()
      const bound = await sqlRequest<SqlResult>(service.url, member.token, "SELECT current_setting('temp_file_limit') AS limit")
      expect(bound.body.rows).toEqual([{ limit: "1MB" }])
      const response = await sqlRequest<DatabaseErrorBody>(service.url, member.token, SPILLING_SORT)
      expect({ status: response.status, body: response.body }).toEqual({
        status: 503,
        body: { error: { message: "temporary file size exceeds \"temp_file_limit\" (1024kB)", code: "53400", detail: null, hint: null, position: null } }
      })
      // The connection lives on: the next statement is answered.
      expect((await sqlRequest(service.url, member.token, "SELECT 1 AS one")).body).toEqual({ rows: [{ one: 1 }], rowCount: 1 })
    } finally {
      await setForThisDatabase("temp_file_limit", null)
    }
  })

  it("without a temp_file_limit (a managed server the migration could not set it on) the main service warns once at start", async () => {
    await setForThisDatabase("temp_file_limit", "-1")
    try {
      const service = await freshService()
      const warned = () => service.logs.filter((entry) => entry.message === TEMP_FILE_LIMIT_WARNING)
      expect(await eventually(async () => warned().length > 0, 5_000)).toBe(true)
      expect(warned().map((entry) => entry.level)).toEqual(["Warn"])
      // Requests do not repeat it.
      await sqlRequest(service.url, member.token, "SELECT 1")
      expect(warned()).toHaveLength(1)
    } finally {
      await setForThisDatabase("temp_file_limit", null)
    }
  })
})
