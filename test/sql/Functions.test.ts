/**
 * POST /function/:name (spec §4.5): a JSON array of positional arguments, the answer
 * `{rows, rowCount}`; sys.* and the catalogs are blocked (403); a name that is not a plain
 * `name` or `schema.name` is 400 `{error}`; database errors come back in the §7 shape.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { BUSINESS_FIXTURES, type DatabaseErrorBody, ddl, type PlainErrorBody, type SqlResult } from "./fixtures.ts"

let stack: AuthStack
let member: SignIn
let owner: SignIn

const FUNCTION_FIXTURES = `
  CREATE FUNCTION public.describe_doc(doc jsonb) RETURNS TABLE (key text, kind text)
    LANGUAGE sql IMMUTABLE AS 'SELECT k, jsonb_typeof(doc -> k) FROM jsonb_object_keys(doc) AS k ORDER BY k';
  CREATE FUNCTION public.greet(who text, excited boolean DEFAULT false) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$SELECT 'hello, ' || who || CASE WHEN excited THEN '!' ELSE '.' END$$;
  CREATE FUNCTION public.whoami() RETURNS TABLE (role text, user_id text)
    LANGUAGE sql STABLE AS $$SELECT current_user::text, current_setting('app.user_id')$$;
  CREATE FUNCTION public.owners_only() RETURNS int LANGUAGE sql AS 'SELECT 1';
  REVOKE ALL ON FUNCTION public.owners_only() FROM PUBLIC;
  GRANT EXECUTE ON FUNCTION public.owners_only() TO owner;
  GRANT EXECUTE ON FUNCTION public.describe_doc(jsonb), public.greet(text, boolean), public.whoami()
    TO owner, admin, staff, member;
`

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, BUSINESS_FIXTURES + FUNCTION_FIXTURES)
  member = await signedIn(stack, "member@plinth.test", "member")
  owner = await signedIn(stack, "owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

const call = <T = SqlResult>(name: string, body: unknown, who: SignIn = member) =>
  post<T>(stack.main.url, `/function/${name}`, body, { token: who.token })

const expectPlainError = (response: { status: number; body: unknown }, status: number) => {
  expect(response.status).toBe(status)
  expect(response.body).toEqual({ error: expect.any(String) })
}

describe("calls", () => {
  it("add with [2, 3] answers {rows: [{add: 5}], rowCount: 1}", async () => {
    const response = await call("add", [2, 3])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ add: 5 }], rowCount: 1 })
  })

  it("a schema-qualified name works the same", async () => {
    const response = await call("public.add", [2, 3])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ add: 5 }], rowCount: 1 })
  })

  it("arguments given as strings are typed by the function's signature", async () => {
    const response = await call("add", ["40", "2"])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ add: 42 }], rowCount: 1 })
  })

  it("a set-returning function answers one row per element", async () => {
    const response = await call("series", [4])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{ i: 1, square: 1 }, { i: 2, square: 4 }, { i: 3, square: 9 }, { i: 4, square: 16 }],
      rowCount: 4
    })
    const none = await call("series", [0])
    expect(none.status).toBe(200)
    expect(none.body).toEqual({ rows: [], rowCount: 0 })
  })

  it("defaults fill missing trailing arguments; booleans and strings bind", async () => {
    expect(await call("greet", ["Ada"])).toMatchObject({ status: 200, body: { rows: [{ greet: "hello, Ada." }], rowCount: 1 } })
    expect(await call("greet", ["Ada", true])).toMatchObject({ status: 200, body: { rows: [{ greet: "hello, Ada!" }], rowCount: 1 } })
  })

  it("a function runs as the caller", async () => {
    const response = await call("whoami", [])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ role: "member", user_id: member.user.id }], rowCount: 1 })
  })

  it("an object argument fills a jsonb parameter", async () => {
    const response = await call("describe_doc", [{ b: [1], a: "x", c: null }])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{ key: "a", kind: "string" }, { key: "b", kind: "array" }, { key: "c", kind: "null" }],
      rowCount: 3
    })
  })

  it("a JSON text argument fills a jsonb parameter", async () => {
    const response = await call("describe_doc", [JSON.stringify({ b: [1], a: "x", c: null })])
    expect(response.status).toBe(200)
    expect(response.body).toEqual({
      rows: [{ key: "a", kind: "string" }, { key: "b", kind: "array" }, { key: "c", kind: "null" }],
      rowCount: 3
    })
  })
})

describe("database errors in the §7 shape", () => {
  it("a wrong number of arguments is 400 42883", async () => {
    for (const args of [[1], [1, 2, 3], []]) {
      const response = await call<DatabaseErrorBody>("add", args)
      expect(response.status, JSON.stringify(args)).toBe(400)
      expect(response.body, JSON.stringify(args)).toEqual({
        error: { message: expect.stringMatching(/^function add\(.*\) does not exist$/), code: "42883", detail: null, hint: expect.any(String), position: expect.any(Number) }
      })
    }
  })

  it("an unknown function is 400 42883", async () => {
    const response = await call<DatabaseErrorBody>("no_such_function", [])
    expect(response.status).toBe(400)
    expect(response.body).toMatchObject({ error: { code: "42883", message: expect.stringContaining("no_such_function") } })
  })

  it("sys functions are not found unqualified (the search path has no sys)", async () => {
    const response = await call<DatabaseErrorBody>("list_apps", [])
    expect(response.status).toBe(400)
    expect(response.body).toMatchObject({ error: { code: "42883" } })
  })

  it("an argument of the wrong type is 400 22P02", async () => {
    const response = await call<DatabaseErrorBody>("add", [2, "three"])
    expect(response.status).toBe(400)
    expect(response.body).toEqual({
      error: { message: "invalid input syntax for type integer: \"three\"", code: "22P02", detail: null, hint: null, position: null }
    })
  })

  it("RAISE is 400 P0001 with the function's message", async () => {
    const response = await call<DatabaseErrorBody>("fail", ["out of stock"])
    expect(response.status).toBe(400)
    expect(response.body).toEqual({ error: { message: "out of stock", code: "P0001", detail: null, hint: "raised on purpose", position: null } })
  })

  it("a function the caller may not execute is 403 42501; its grantee may", async () => {
    const response = await call<DatabaseErrorBody>("owners_only", [])
    expect(response.status).toBe(403)
    expect(response.body).toMatchObject({ error: { code: "42501", message: "permission denied for function owners_only" } })
    expect(await call("owners_only", [], owner)).toMatchObject({ status: 200, body: { rows: [{ owners_only: 1 }], rowCount: 1 } })
  })
})

describe("blocked functions: 403 {error}", () => {
  it.each([
    ["sys.list_apps"],
    ["SYS.list_apps"],
    ["sys.invite_user"],
    ["pg_catalog.now"],
    ["pg_catalog.pg_sleep"],
    ["information_schema._pg_truetypid"],
    ["plinth.anything"],
    ["extensions.gen_random_bytes"],
    ["set_config"],
    ["pg_notify"],
    ["pg_terminate_backend"],
    ["pg_advisory_lock"],
    ["lo_import"],
    ["dblink"]
  ])("%s", async (name) => {
    const args = name === "set_config" ? ["role", "owner", true] : []
    expectPlainError(await call<PlainErrorBody>(name, args, owner), 403)
  })
})

describe("invalid names and bodies: 400 {error}", () => {
  it.each([
    ["a;b"],
    ["%22x%22"],
    ["x%20y"],
    ["a".repeat(64)],
    ["a".repeat(100)],
    ["a.b.c"],
    ["1add"],
    ["add()"],
    ["add%28%29"],
    ["public.%22add%22"],
    ["add%3Bselect"],
    ["%00"]
  ])("name %j", async (name) => {
    expectPlainError(await call<PlainErrorBody>(name, [2, 3]), 400)
  })

  it("name of 200 characters", async () => {
    expectPlainError(await call<PlainErrorBody>("a".repeat(200), [2, 3]), 400)
  })

  it("a body that is not an array", async () => {
    expectPlainError(await call<PlainErrorBody>("add", {}), 400)
    expectPlainError(await call<PlainErrorBody>("add", { 0: 2, 1: 3 }), 400)
    expectPlainError(await call<PlainErrorBody>("add", "\"2, 3\""), 400)
    expectPlainError(await call<PlainErrorBody>("add", "[2, 3"), 400)
  })

  it("more than 1000 arguments", async () => {
    expectPlainError(await call<PlainErrorBody>("add", Array.from({ length: 1001 }, () => 1)), 400)
  })

  it("without a token: 401 {error}", async () => {
    expectPlainError(await post<PlainErrorBody>(stack.main.url, "/function/add", [2, 3]), 401)
  })
})
