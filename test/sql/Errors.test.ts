/**
 * Spec §7 through POST /sql, with real database errors: the structured body (shape 2), the
 * status of each class, the statement timeout (57014 → 503), and production scrubbing of
 * detail values on real constraint violations.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query, sleepingStatements } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"
import { BUSINESS_FIXTURES, type DatabaseErrorBody, ddl, type SqlResult, sqlRequest } from "./fixtures.ts"
import { eventually } from "../support/eventually.ts"

let stack: AuthStack
let production: RunningService
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ SQL_TIMEOUT: "1s" })
  await ddl(stack, BUSINESS_FIXTURES)
  production = await startService("main", stack.db.mainUrl, { ...stack.env, NODE_ENV: "production", SQL_TIMEOUT: "1s" })
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(async () => {
  await production?.close()
  await stack?.close()
})

const run = <T = DatabaseErrorBody>(sql: string, params?: ReadonlyArray<unknown>) =>
  sqlRequest<T>(stack.main.url, member.token, sql, params)
const runInProduction = <T = DatabaseErrorBody>(sql: string, params?: ReadonlyArray<unknown>) =>
  sqlRequest<T>(production.url, member.token, sql, params)

/** The exact structured body; `detail` may be a matcher. */
const databaseError = (fields: {
  readonly message: unknown
  readonly code: string
  readonly detail?: unknown
  readonly hint?: unknown
  readonly position?: unknown
}) => ({
  error: { message: fields.message, code: fields.code, detail: fields.detail ?? null, hint: fields.hint ?? null, position: fields.position ?? null }
})

describe("class 42: 400 with the position of the error", () => {
  it("a syntax error is 400 42601 with a position", async () => {
    const response = await run("SELECT * FORM items")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: expect.stringContaining("syntax error"), code: "42601", position: 10 }))
  })

  it("a syntax error at the end of the input points past the last character", async () => {
    const response = await run("SELECT 1 +")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: expect.stringContaining("syntax error"), code: "42601", position: 11 }))
  })

  it("an undefined table is 400 42P01 with a position", async () => {
    const response = await run("SELECT * FROM no_such_table")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "relation \"no_such_table\" does not exist", code: "42P01", position: 15 }))
  })

  it("an undefined column is 400 42703 with a position", async () => {
    const response = await run("SELECT id, no_such_column FROM items")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "column \"no_such_column\" does not exist", code: "42703", position: 12 }))
  })

  it("an undefined function is 400 42883 with a hint", async () => {
    const response = await run("SELECT no_such_function(1)")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({
      message: "function no_such_function(integer) does not exist",
      code: "42883",
      hint: expect.any(String),
      position: 8
    }))
  })
})

describe("class 23: 409", () => {
  it("a unique violation is 409 23505 with the key in detail", async () => {
    expect((await run<SqlResult>("INSERT INTO items (name) VALUES ($1)", ["dup-dev"])).status).toBe(200)
    const response = await run("INSERT INTO items (name) VALUES ($1)", ["dup-dev"])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "duplicate key value violates unique constraint \"items_name_key\"",
      code: "23505",
      detail: "Key (name)=(dup-dev) already exists."
    }))
  })

  it("a check violation is 409 23514 with the failing row in detail", async () => {
    const response = await run("INSERT INTO items (name, qty) VALUES ($1, $2)", ["negative-dev", -1])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "new row for relation \"items\" violates check constraint \"items_qty_check\"",
      code: "23514",
      detail: expect.stringMatching(/^Failing row contains \(\d+, negative-dev, null, -1, null, [0-9a-f-]{36}\)\.$/)
    }))
  })

  it("a not-null violation is 409 23502", async () => {
    const response = await run("INSERT INTO items (name) VALUES ($1)", [null])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "null value in column \"name\" of relation \"items\" violates not-null constraint",
      code: "23502",
      detail: expect.stringMatching(/^Failing row contains \(\d+, null, null, null, null, [0-9a-f-]{36}\)\.$/)
    }))
  })

  it("a foreign-key violation is 409 23503", async () => {
    const response = await run("INSERT INTO orders (item_id) VALUES ($1)", [987654])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "insert or update on table \"orders\" violates foreign key constraint \"orders_item_id_fkey\"",
      code: "23503",
      detail: "Key (item_id)=(987654) is not present in table \"items\"."
    }))
  })

  it("a failed statement changes nothing", async () => {
    const response = await run("INSERT INTO items (name) VALUES ($1), ($1)", ["twice-in-one"])
    expect(response.status).toBe(409)
    expect(response.body).toMatchObject({ error: { code: "23505" } })
    const count = await run<SqlResult>("SELECT count(*)::int AS n FROM items WHERE name = $1", ["twice-in-one"])
    expect(count.status).toBe(200)
    expect(count.body).toEqual({ rows: [{ n: 0 }], rowCount: 1 })
  })
})

describe("other classes", () => {
  it("permission denied (a member writing a table it may only read) is 403 42501", async () => {
    const response = await run("INSERT INTO locked (id, label) VALUES ($1, $2)", [1, "x"])
    expect(response.status).toBe(403)
    expect(response.body).toEqual(databaseError({ message: "permission denied for table locked", code: "42501" }))
    const read = await run<SqlResult>("SELECT count(*)::int AS n FROM locked")
    expect(read.status).toBe(200)
    expect(read.body).toEqual({ rows: [{ n: 0 }], rowCount: 1 })
  })

  it("division by zero is 400 22012", async () => {
    const response = await run("SELECT 1 / 0 AS x")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "division by zero", code: "22012" }))
  })

  it("an error after some rows have streamed is still the structured error, with no rows", async () => {
    const response = await run("SELECT 1 / (g - 500) AS x FROM generate_series(1, 1000) AS g")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "division by zero", code: "22012" }))
  })

  it("a parameter that is not valid for its inferred type is 400 22P02", async () => {
    const response = await run("SELECT $1::int AS n", ["abc"])
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "invalid input syntax for type integer: \"abc\"", code: "22P02" }))
  })

  it("RAISE in a function (P0001) is 400 with its message and hint", async () => {
    const response = await run("SELECT fail($1)", ["the order is closed"])
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "the order is closed", code: "P0001", hint: "raised on purpose" }))
  })

  it("a statement over SQL_TIMEOUT is cancelled: 503 57014", async () => {
    const started = Date.now()
    const response = await run("SELECT pg_sleep(3)")
    const elapsed = Date.now() - started
    expect(response.status).toBe(503)
    expect(response.body).toEqual(databaseError({ message: "canceling statement due to statement timeout", code: "57014" }))
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect(elapsed).toBeLessThan(2_500)
    // The connection it ran on is fine afterwards.
    const after = await run<SqlResult>("SELECT 1 AS one")
    expect(after.status).toBe(200)
    expect(after.body).toEqual({ rows: [{ one: 1 }], rowCount: 1 })
  })

  /** Sends `statement` (which sleeps 50 s) to a service with a 60 s timeout, and goes away once it runs. */
  const abandon = async (statement: string) => {
    const patient = await startService("main", stack.db.mainUrl, { ...stack.env, SQL_TIMEOUT: "60s" })
    try {
      const controller = new AbortController()
      const request = fetch(`${patient.url}/sql`, {
        method: "POST",
        headers: { authorization: `Bearer ${member.token}`, "content-type": "application/json" },
        body: JSON.stringify({ sql: statement }),
        signal: controller.signal
      }).catch((error: unknown) => error)
      expect(await eventually(async () => (await sleepingStatements(stack.db.adminUrl)) === 1, 5_000)).toBe(true)
      controller.abort()
      await request
      // Far sooner than the 60 s statement timeout or the 50 s sleep.
      expect(await eventually(async () => (await sleepingStatements(stack.db.adminUrl)) === 0, 10_000)).toBe(true)
      // The service goes on working.
      expect((await sqlRequest(patient.url, member.token, "SELECT 1 AS one")).status).toBe(200)
    } finally {
      await patient.close()
    }
  }

  it("a client that goes away cancels its statement in the database", async () => {
    await abandon("SELECT pg_sleep(50) AS slept")
  })

  it("a client that goes away cancels a pipelined write too, and nothing of it is committed", async () => {
    await abandon("INSERT INTO items (name) SELECT 'abandoned-write' FROM pg_sleep(50)")
    const rows = await query(stack.db.adminUrl, (sql) => sql`SELECT 1 FROM items WHERE name = 'abandoned-write'`)
    expect(rows).toEqual([])
  })
})

describe("production scrubbing (NODE_ENV=production)", () => {
  it("a real unique violation keeps the column and hides the value", async () => {
    expect((await runInProduction<SqlResult>("INSERT INTO items (name) VALUES ($1)", ["secret-name"])).status).toBe(200)
    const response = await runInProduction("INSERT INTO items (name) VALUES ($1)", ["secret-name"])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "duplicate key value violates unique constraint \"items_name_key\"",
      code: "23505",
      detail: "Key (name)=(***) already exists."
    }))
    expect(JSON.stringify(response.body)).not.toContain("secret-name")
  })

  it("a real check violation hides the failing row", async () => {
    const response = await runInProduction("INSERT INTO items (name, qty) VALUES ($1, $2)", ["secret-row", -5])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "new row for relation \"items\" violates check constraint \"items_qty_check\"",
      code: "23514",
      detail: "Failing row contains (***)."
    }))
    expect(JSON.stringify(response.body)).not.toContain("secret-row")
  })

  it("a real foreign-key violation hides the key value", async () => {
    const response = await runInProduction("INSERT INTO orders (item_id) VALUES ($1)", [424242])
    expect(response.status).toBe(409)
    expect(response.body).toEqual(databaseError({
      message: "insert or update on table \"orders\" violates foreign key constraint \"orders_item_id_fkey\"",
      code: "23503",
      detail: "Key (item_id)=(***) is not present in table \"items\"."
    }))
  })

  it("errors without values in detail are unchanged", async () => {
    const response = await runInProduction("SELECT * FROM no_such_table")
    expect(response.status).toBe(400)
    expect(response.body).toEqual(databaseError({ message: "relation \"no_such_table\" does not exist", code: "42P01", position: 15 }))
  })

  it("attack: a stored value read through an error message (title::bool) is scrubbed in production", async () => {
    expect((await runInProduction<SqlResult>("INSERT INTO items (name, meta) VALUES ($1, $2)", ["secret-title", { note: 1 }])).status).toBe(200)
    const castFails = [
      ["SELECT name::bool FROM items WHERE name = 'secret-title'", "invalid input syntax for type boolean: \"***\""],
      ["SELECT name::int FROM items WHERE name = 'secret-title'", "invalid input syntax for type integer: \"***\""],
      ["SELECT name::uuid FROM items WHERE name = 'secret-title'", "invalid input syntax for type uuid: \"***\""],
      ["SELECT name::date FROM items WHERE name = 'secret-title'", "invalid input syntax for type date: \"***\""],
      ["SELECT (name || '0000000000')::int FROM items WHERE name = 'secret-title'", "invalid input syntax for type integer: \"***\""],
      ["SELECT ('9' || length(name) || '000000000000')::int FROM items WHERE name = 'secret-title'", "value \"***\" is out of range for type integer"]
    ]
    for (const [text, message] of castFails) {
      const response = await runInProduction(text!)
      expect(response.status, text).toBe(400)
      expect(response.body.error.message, text).toBe(message)
      expect(JSON.stringify(response.body), text).not.toContain("secret")
    }
    const json = await runInProduction("SELECT name::jsonb FROM items WHERE name = 'secret-title'")
    expect(json.status).toBe(400)
    expect(JSON.stringify(json.body)).not.toContain("secret")
    // Development keeps the value: it is the developer's own data.
    expect((await run("SELECT name::bool FROM items WHERE name = 'secret-title'")).body.error.message)
      .toBe("invalid input syntax for type boolean: \"secret-title\"")
  })

  it("development leaves the same details as they are", async () => {
    const response = await run("INSERT INTO items (name) VALUES ($1)", ["secret-name"])
    expect(response.status).toBe(409)
    expect(response.body).toMatchObject({ error: { code: "23505", detail: "Key (name)=(secret-name) already exists." } })
  })
})
