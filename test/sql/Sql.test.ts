/**
 * POST /sql (spec §4.4) over real HTTP against a real database: CRUD with bound parameters of
 * every JSON kind, the request's bounds and validation (plain `{error: string}`), and the
 * response size limit (SQL_MAX_RESPONSE_BYTES).
 */
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { BUSINESS_FIXTURES, ddl, type PlainErrorBody, type SqlResult, sqlRequest } from "./fixtures.ts"

const MAX_RESPONSE_BYTES = 10_000

let stack: AuthStack
let base: string
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ SQL_TIMEOUT: "1s", SQL_MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES) })
  base = stack.main.url
  await ddl(stack, BUSINESS_FIXTURES)
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(() => stack?.close())

const run = <T = SqlResult>(sql: unknown, params?: ReadonlyArray<unknown>) => sqlRequest<T>(base, member.token, sql, params)

const expectPlainError = (response: { status: number; body: unknown }, status = 400) => {
  expect(response.status).toBe(status)
  expect(response.body).toEqual({ error: expect.any(String) })
  expect((response.body as PlainErrorBody).error.length).toBeGreaterThan(0)
}

describe("CRUD with parameters", () => {
  it("INSERT … RETURNING answers the inserted row and rowCount 1", async () => {
    const response = await run(
      "INSERT INTO items (name, price, qty) VALUES ($1, $2, $3) RETURNING id, name, price, qty, meta, created_by",
      ["crud-returning", 9.99, 3]
    )
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{ id: expect.any(Number), name: "crud-returning", price: "9.99", qty: 3, meta: null, created_by: member.user.id }],
      rowCount: 1
    })
  })

  it("INSERT stores the bound values and the caller's id as created_by", async () => {
    expect(await run("INSERT INTO items (name, price, qty) VALUES ($1, $2, $3)", ["crud-plain", 9.99, 3]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
    const response = await run("SELECT name, price, qty, meta, created_by FROM items WHERE name = $1", ["crud-plain"])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{ name: "crud-plain", price: "9.99", qty: 3, meta: null, created_by: member.user.id }],
      rowCount: 1
    })
  })

  it("INSERT without RETURNING answers rows [] and the number of rows inserted", async () => {
    const response = await run("INSERT INTO items (name, qty) VALUES ($1, 1), ($2, 2), ($3, 3)", ["crud-a", "crud-b", "crud-c"])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [], rowCount: 3 })
  })

  it("SELECT with $1 and $2 filters by the bound values", async () => {
    await run("INSERT INTO items (name, qty) VALUES ($1, 10), ($2, 20), ($3, 30)", ["sel-1", "sel-2", "sel-3"])
    const response = await run("SELECT name, qty FROM items WHERE name LIKE $1 AND qty >= $2 ORDER BY qty", ["sel-%", 20])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ name: "sel-2", qty: 20 }, { name: "sel-3", qty: 30 }], rowCount: 2 })
  })

  it("UPDATE and DELETE answer rows [] and the number of rows they touched", async () => {
    await run("INSERT INTO items (name, qty) VALUES ($1, 1), ($2, 1), ($3, 1), ($4, 1)", ["upd-1", "upd-2", "upd-3", "keep-1"])
    expect(await run("UPDATE items SET qty = qty + $1 WHERE name LIKE $2", [4, "upd-%"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 3 } })
    expect(await run("UPDATE items SET qty = 0 WHERE name = $1", ["no-such-item"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 0 } })
    expect(await run("SELECT name, qty FROM items WHERE name LIKE 'upd-%' OR name = 'keep-1' ORDER BY name"))
      .toMatchObject({
        status: 200,
        body: { rows: [{ name: "keep-1", qty: 1 }, { name: "upd-1", qty: 5 }, { name: "upd-2", qty: 5 }, { name: "upd-3", qty: 5 }], rowCount: 4 }
      })
    expect(await run("DELETE FROM items WHERE name LIKE $1", ["upd-%"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 3 } })
    expect(await run("DELETE FROM items WHERE name = $1", ["no-such-item"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 0 } })
    expect(await run("SELECT name FROM items WHERE name LIKE 'upd-%' OR name = 'keep-1'"))
      .toMatchObject({ status: 200, body: { rows: [{ name: "keep-1" }], rowCount: 1 } })
  })

  it("UPDATE … RETURNING and DELETE … RETURNING answer the rows they touched", async () => {
    await run("INSERT INTO items (name, qty) VALUES ($1, 5)", ["ret-1"])
    const updated = await run("UPDATE items SET qty = qty * 2 WHERE name = $1 RETURNING name, qty", ["ret-1"])
    expect(updated.status).toBe(200)
    expect(updated.body).toEqual({ rows: [{ name: "ret-1", qty: 10 }], rowCount: 1 })
    const deleted = await run("DELETE FROM items WHERE name = $1 RETURNING name, qty", ["ret-1"])
    expect(deleted.status).toBe(200)
    expect(deleted.body).toEqual({ rows: [{ name: "ret-1", qty: 10 }], rowCount: 1 })
  })
})

describe("parameters of each JSON kind", () => {
  let tags = 0
  /** Inserts one row of `numbers` from five parameters and reads it back. */
  const roundTrip = async (params: ReadonlyArray<unknown>) => {
    const tag = `kind-${++tags}`
    const inserted = await run("INSERT INTO numbers (tag, n, d, t, b, j) VALUES ($1, $2, $3, $4, $5, $6)", [tag, ...params])
    expect(inserted.status).toBe(200)
    expect(inserted.body).toEqual({ rows: [], rowCount: 1 })
    return run("SELECT n, d, t, b, j FROM numbers WHERE tag = $1", [tag])
  }

  it("a number fills an int, a numeric and a text column; a boolean a boolean column; an object a jsonb column", async () => {
    const response = await roundTrip([42, 1.5, 7, true, { a: [1, "x", null], b: { c: false } }])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ n: 42, d: "1.5", t: "7", b: true, j: { a: [1, "x", null], b: { c: false } } }], rowCount: 1 })
  })

  it("an array fills a jsonb column; a boolean a text column; a string an int and a numeric column", async () => {
    const response = await roundTrip(["-17", "0.1", false, false, [1, [2, 3], { x: "y" }]])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ n: -17, d: "0.1", t: "false", b: false, j: [1, [2, 3], { x: "y" }] }], rowCount: 1 })
  })

  it("null binds as SQL NULL in every column", async () => {
    const response = await roundTrip([null, null, null, null, null])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ n: null, d: null, t: null, b: null, j: null }], rowCount: 1 })
    const isNull = await run("SELECT $1::text IS NULL AS text_null, $2::jsonb IS NULL AS jsonb_null", [null, null])
    expect(isNull.status).toBe(200)
    expect(isNull.body).toEqual({ rows: [{ text_null: true, jsonb_null: true }], rowCount: 1 })
  })

  it("a string is bound as a value, never as SQL", async () => {
    const hostile = "x'); DROP TABLE items; --"
    const response = await run("SELECT $1::text AS s, length($1::text) AS n", [hostile])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ s: hostile, n: hostile.length }], rowCount: 1 })
    expect(await run("SELECT count(*)::int >= 0 AS present FROM items"))
      .toMatchObject({ status: 200, body: { rows: [{ present: true }], rowCount: 1 } })
  })

  it("objects and arrays bind as JSON: $1::jsonb, operators on it, and round trips", async () => {
    const doc = { name: "Ada", tags: ["x", "y"], nested: { deep: [1.5, true, null] }, unicode: "ünï 😀" }
    const response = await run("SELECT $1::jsonb AS doc, $1::jsonb ->> 'name' AS name, jsonb_array_length($2::jsonb) AS len", [doc, [1, 2, 3]])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ doc, name: "Ada", len: 3 }], rowCount: 1 })
  })

  it("a numeric with many digits survives as a string parameter, and a number within 2^53 as a number", async () => {
    const digits = "12345678901234567890.123456789012345678"
    const params = [digits, 9007199254740991, -0.000001]
    expect(await run("INSERT INTO numbers (tag, d) VALUES ('big-1', $1), ('big-2', $2), ('big-3', $3)", params))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 3 } })
    const response = await run("SELECT d FROM numbers WHERE tag LIKE 'big-%' ORDER BY tag")
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ d: digits }, { d: "9007199254740991" }, { d: "-0.000001" }], rowCount: 3 })
    const arithmetic = await run("SELECT $1::numeric + 1 AS plus_one, $2::numeric AS max_safe", [digits, 9007199254740991])
    expect(arithmetic.status).toBe(200)
    expect(arithmetic.body).toEqual({ rows: [{ plus_one: "12345678901234567891.123456789012345678", max_safe: "9007199254740991" }], rowCount: 1 })
  })

  it("params omitted is the same as []", async () => {
    const omitted = await run("SELECT 1 AS one, 'two' AS two")
    expect(omitted.status).toBe(200)
    expect(omitted.body).toEqual({ rows: [{ one: 1, two: "two" }], rowCount: 1 })
    const empty = await run("SELECT 1 AS one, 'two' AS two", [])
    expect(empty.status).toBe(200)
    expect(empty.body).toEqual(omitted.body)
  })

  it("1000 parameters are accepted", async () => {
    const params = Array.from({ length: 1000 }, (_, index) => index + 1)
    const text = `SELECT ${params.map((_, index) => `$${index + 1}::int`).join(" + ")} AS total`
    const response = await run(text, params)
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ total: (1000 * 1001) / 2 }], rowCount: 1 })
  })
})

describe("request validation: 400 with a plain {error: string}", () => {
  it("1001 parameters", async () => {
    const params = Array.from({ length: 1001 }, (_, index) => index)
    expectPlainError(await run("SELECT $1::int AS one", params))
  })

  it("sql of 100 001 characters; 100 000 characters still run", async () => {
    const head = "SELECT 1 AS one -- "
    expectPlainError(await run(head + "x".repeat(100_001 - head.length)))
    const atLimit = await run(head + "x".repeat(100_000 - head.length))
    expect(atLimit.status).toBe(200)
    expect(atLimit.body).toEqual({ rows: [{ one: 1 }], rowCount: 1 })
  })

  it("sql empty, blank, missing, or not a string", async () => {
    expectPlainError(await run(""))
    expectPlainError(await run("   "))
    expectPlainError(await run(42))
    expectPlainError(await run(null))
    expectPlainError(await run(["SELECT 1"]))
    expectPlainError(await post(base, "/sql", { params: [] }, { token: member.token }))
  })

  it("params not an array", async () => {
    expectPlainError(await post(base, "/sql", { sql: "SELECT $1::int AS one", params: { 0: 1 } }, { token: member.token }))
    expectPlainError(await post(base, "/sql", { sql: "SELECT $1::int AS one", params: "1" }, { token: member.token }))
  })

  it("a body that is not JSON, or not an object", async () => {
    expectPlainError(await post(base, "/sql", "{not json", { token: member.token }))
    expectPlainError(await post(base, "/sql", "[]", { token: member.token }))
    expectPlainError(await post(base, "/sql", "\"SELECT 1\"", { token: member.token }))
  })

  it("DDL and several statements are refused before the database", async () => {
    expectPlainError(await run("DROP TABLE items"))
    expectPlainError(await run("CREATE TABLE t (x int)"))
    expectPlainError(await run("SELECT 1; DELETE FROM items"))
    expect(await run("SELECT count(*)::int >= 0 AS present FROM items")).toMatchObject({ status: 200, body: { rows: [{ present: true }] } })
  })

  it("without a token the answer is 401 {error}", async () => {
    const response = await post(base, "/sql", { sql: "SELECT 1" })
    expectPlainError(response, 401)
  })
})

/** One POST /sql over node:http, the body written as `write` does; the status and the body. */
const rawPost = (headers: Record<string, string>, write: (request: ReturnType<typeof httpRequest>) => void) =>
  new Promise<{ status: number; body: unknown; connection: string | undefined }>((resolve, reject) => {
    const request = httpRequest(`${base}/sql`, { method: "POST", headers: { authorization: `Bearer ${member.token}`, "content-type": "application/json", ...headers } }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text), connection: response.headers.connection }))
    })
    request.on("error", reject)
    write(request)
  })

describe("the request body (read straight from Node's request)", () => {
  const body = JSON.stringify({ sql: "SELECT 1 AS one" })

  it("sent in chunks (no Content-Length) it is read whole", async () => {
    const response = await rawPost({}, (request) => {
      for (const piece of body.match(/.{1,4}/g)!) request.write(piece)
      request.end()
    })
    expect(response).toMatchObject({ status: 200, body: { rows: [{ one: 1 }] } })
  })

  it("chunked past 1 MiB it is 413 {error}, and the connection is closed", async () => {
    const response = await rawPost({}, (request) => {
      request.on("error", () => {}) // the server may close while we still write
      for (let i = 0; i < 20; i++) request.write("x".repeat(64 * 1024))
      request.end()
    })
    expectPlainError(response, 413)
  })

  it("a Content-Length past 1 MiB is 413 {error} before the body is read", async () => {
    const response = await rawPost({ "content-length": String(2 * 1024 * 1024) }, (request) => {
      request.on("error", () => {})
      request.write("{")
    })
    expectPlainError(response, 413)
    expect(response.connection).toBe("close")
  })

  it("a UTF-8 byte order mark is not part of the text, and multi-byte characters split across chunks survive", async () => {
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ sql: "SELECT $1::text AS t", params: ["ü€😀"] }))])
    const response = await rawPost({}, (request) => {
      for (let at = 0; at < bytes.length; at += 3) request.write(bytes.subarray(at, at + 3))
      request.end()
    })
    expect(response).toMatchObject({ status: 200, body: { rows: [{ t: "ü€😀" }] } })
  })

  it("Expect: 100-continue is answered, then the body is read", async () => {
    const response = await rawPost({ expect: "100-continue", "content-length": String(Buffer.byteLength(body)) }, (request) => {
      request.on("continue", () => request.end(body))
    })
    expect(response).toMatchObject({ status: 200, body: { rows: [{ one: 1 }] } })
  })

  it("a client that goes away mid-body leaves the server answering others", async () => {
    await new Promise<void>((resolve) => {
      const request = httpRequest(`${base}/sql`, {
        method: "POST",
        headers: { authorization: `Bearer ${member.token}`, "content-type": "application/json", "content-length": "1000" }
      })
      request.on("error", () => resolve())
      request.write("{\"sql\": \"SELE")
      setTimeout(() => {
        request.destroy()
        resolve()
      }, 100)
    })
    expect(await run("SELECT 1 AS one")).toMatchObject({ status: 200, body: { rows: [{ one: 1 }] } })
  })
})

describe("SQL_MAX_RESPONSE_BYTES", () => {
  it("a result over the limit is 400 {error} naming the limit", async () => {
    const response = await run<PlainErrorBody>("SELECT repeat('x', 100) AS s FROM generate_series(1, 1000)")
    expectPlainError(response)
    expect(response.body.error).toContain(String(MAX_RESPONSE_BYTES))
  })

  it("a small result is still 200, and the pool is usable after results over the limit", async () => {
    const small = await run("SELECT repeat('x', 100) AS s FROM generate_series(1, 10)")
    expect(small.status).toBe(200)
    expect(small.body).toEqual({ rows: Array.from({ length: 10 }, () => ({ s: "x".repeat(100) })), rowCount: 10 })

    const large = await Promise.all(Array.from({ length: 6 }, () => run("SELECT repeat('x', 100) AS s FROM generate_series(1, 100000)")))
    for (const response of large) expectPlainError(response)
    const after = await Promise.all(Array.from({ length: 20 }, (_, index) => run("SELECT $1::int AS n", [index])))
    after.forEach((response, index) => {
      expect(response.status).toBe(200)
      expect(response.body).toEqual({ rows: [{ n: index }], rowCount: 1 })
    })
  })

  it("the limit counts bytes, not characters", async () => {
    const response = await run<PlainErrorBody>("SELECT repeat('é', 6000) AS s")
    expectPlainError(response)
    expect(response.body.error).toContain(String(MAX_RESPONSE_BYTES))
  })

  it("the limit also bounds RETURNING", async () => {
    const response = await run<PlainErrorBody>(
      "INSERT INTO items (name) SELECT 'big-' || g || repeat('y', 100) FROM generate_series(1, 200) AS g RETURNING name"
    )
    expectPlainError(response)
    // The statement failed as a whole: nothing was inserted.
    expect(await run("SELECT count(*)::int AS n FROM items WHERE name LIKE 'big-%'"))
      .toMatchObject({ status: 200, body: { rows: [{ n: 0 }], rowCount: 1 } })
  })
})
