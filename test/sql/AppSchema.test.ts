/**
 * X-App-Schema (spec §4.4): the header names an app of sys.apps; its schema comes first on the
 * search path and its id is app.app_id. Unknown or malformed names are 400 `{error}`. Changes to
 * sys.apps reach the service's cache through NOTIFY within a second.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { BUSINESS_FIXTURES, type DatabaseErrorBody, ddl, type PlainErrorBody, type SqlResult, sqlRequest } from "./fixtures.ts"
import { eventually } from "../support/eventually.ts"

let stack: AuthStack
let member: SignIn
let shopId: string

const APP_SCHEMA_FIXTURES = `
  CREATE SCHEMA shop;
  GRANT USAGE ON SCHEMA shop TO owner, admin, staff, member;
  CREATE TABLE shop.products (id serial PRIMARY KEY, name text NOT NULL, price numeric(10, 2));
  INSERT INTO shop.products (name, price) VALUES ('lamp', 19.90), ('desk', 120.00);
  GRANT SELECT, INSERT, UPDATE, DELETE ON shop.products TO owner, admin, staff, member;
  GRANT USAGE ON SEQUENCE shop.products_id_seq TO owner, admin, staff, member;
  CREATE FUNCTION shop.product_count() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT count(*) FROM shop.products';
  GRANT EXECUTE ON FUNCTION shop.product_count() TO owner, admin, staff, member;

  CREATE SCHEMA depot;
  GRANT USAGE ON SCHEMA depot TO owner, admin, staff, member;
  CREATE TABLE depot.bins (id int PRIMARY KEY);
  INSERT INTO depot.bins VALUES (1), (2), (3);
  GRANT SELECT ON depot.bins TO owner, admin, staff, member;
`

const registerApp = async (schema: string, displayName: string): Promise<string> => {
  const [row] = await query(stack.db.adminUrl, (sql) =>
    sql<{ id: string }>`INSERT INTO sys.apps (schema_name, display_name) VALUES (${schema}, ${displayName}) RETURNING id::text AS id`)
  return row!.id
}

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, BUSINESS_FIXTURES + APP_SCHEMA_FIXTURES)
  shopId = await registerApp("shop", "Shop")
  member = await signedIn(stack, "member@plinth.test", "member")
})
afterAll(() => stack?.close())

const run = <T = SqlResult>(sql: string, schema?: string, params?: ReadonlyArray<unknown>) =>
  sqlRequest<T>(stack.main.url, member.token, sql, params, schema === undefined ? undefined : { "x-app-schema": schema })

const expectRefusedHeader = (response: { status: number; body: unknown }) => {
  expect(response.status).toBe(400)
  expect(response.body).toEqual({ error: expect.any(String) })
}

describe("a registered app", () => {
  it("its tables are found unqualified", async () => {
    const response = await run("SELECT name, price FROM products ORDER BY id", "shop")
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ name: "lamp", price: "19.90" }, { name: "desk", price: "120.00" }], rowCount: 2 })
  })

  it("app.app_id is the app's id and the search path starts with the app's schema", async () => {
    const response = await run(
      "SELECT current_setting('app.app_id') AS app_id, current_setting('search_path') AS search_path",
      "shop"
    )
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ app_id: shopId, search_path: "\"shop\", public, pg_catalog" }], rowCount: 1 })
  })

  it("public tables stay reachable, and writes land in the app's schema", async () => {
    const publicTable = await run("SELECT count(*)::int AS n FROM items", "shop")
    expect(publicTable.status).toBe(200)
    expect(publicTable.body).toEqual({ rows: [{ n: 0 }], rowCount: 1 })
    expect(await run("INSERT INTO products (name, price) VALUES ($1, $2)", "shop", ["chair", "45.5"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
    const [row] = await query(stack.db.adminUrl, (sql) => sql<{ price: string }>`SELECT price::text AS price FROM shop.products WHERE name = 'chair'`)
    expect(row).toEqual({ price: "45.50" })
    expect(await run("DELETE FROM products WHERE name = $1", "shop", ["chair"]))
      .toMatchObject({ status: 200, body: { rows: [], rowCount: 1 } })
  })

  it("/function/:name resolves unqualified names in the app's schema too", async () => {
    const response = await post(stack.main.url, "/function/product_count", [], { token: member.token, headers: { "x-app-schema": "shop" } })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ product_count: "2" }], rowCount: 1 })
    const without = await post<DatabaseErrorBody>(stack.main.url, "/function/product_count", [], { token: member.token })
    expect(without.status).toBe(400)
    expect(without.body).toMatchObject({ error: { code: "42883" } })
  })

  it("without the header the app's tables are unknown: 400 42P01", async () => {
    const response = await run<DatabaseErrorBody>("SELECT * FROM products")
    expect(response.status).toBe(400)
    expect(response.body).toEqual({
      error: { message: "relation \"products\" does not exist", code: "42P01", detail: null, hint: null, position: 15 }
    })
  })
})

describe("refused headers: 400 {error}", () => {
  it("an unknown app", async () => {
    expectRefusedHeader(await run("SELECT 1 AS one", "nowhere"))
  })

  it("a schema that exists but is not an app (sys, pg_catalog, depot before it is registered)", async () => {
    for (const schema of ["sys", "pg_catalog", "information_schema", "extensions", "depot"]) {
      const response = await run("SELECT 1 AS one", schema)
      expect(response.status, schema).toBe(400)
      expect(response.body, schema).toEqual({ error: expect.any(String) })
    }
  })

  it.each([
    ["Shop!"],
    ["a b"],
    ["a".repeat(100)],
    ["Shop"],
    ["\"shop\""],
    ["shop, public"],
    ["shop;"],
    ["1shop"]
  ])("a malformed name: %j", async (schema) => {
    const response = await run<PlainErrorBody>("SELECT 1 AS one", schema)
    expectRefusedHeader(response)
  })
})

describe("changes to sys.apps reach the cache (NOTIFY)", () => {
  it("a deleted app is refused within a second; registered again, it works with its new id", async () => {
    await ddl(stack, "CREATE SCHEMA gone; GRANT USAGE ON SCHEMA gone TO member")
    const goneId = await registerApp("gone", "Gone")
    const probe = "SELECT current_setting('app.app_id') AS app_id"
    // Resolved once, so that the answer is cached.
    expect(await run(probe, "gone")).toMatchObject({ status: 200, body: { rows: [{ app_id: goneId }] } })
    expect(await run(probe, "gone")).toMatchObject({ status: 200, body: { rows: [{ app_id: goneId }] } })

    await query(stack.db.adminUrl, (sql) => sql`DELETE FROM sys.apps WHERE schema_name = 'gone'`)
    const started = Date.now()
    expect(await eventually(async () => (await run(probe, "gone")).status === 400, 2_000)).toBe(true)
    expect(Date.now() - started).toBeLessThan(1_500)
    expectRefusedHeader(await run(probe, "gone"))

    const againId = await registerApp("gone", "Gone again")
    expect(againId).not.toBe(goneId)
    expect(await eventually(async () => (await run(probe, "gone")).status === 200, 2_000)).toBe(true)
    expect(await run(probe, "gone")).toMatchObject({ status: 200, body: { rows: [{ app_id: againId }], rowCount: 1 } })
  })

  it("a newly registered app works within a second, although it was refused (and cached) before", async () => {
    expectRefusedHeader(await run("SELECT count(*)::int AS n FROM bins", "depot"))
    expectRefusedHeader(await run("SELECT count(*)::int AS n FROM bins", "depot"))
    const depotId = await registerApp("depot", "Depot")
    const started = Date.now()
    expect(await eventually(async () => (await run("SELECT 1 AS one", "depot")).status === 200, 2_000)).toBe(true)
    expect(Date.now() - started).toBeLessThan(1_500)
    const response = await run("SELECT count(*)::int AS n, current_setting('app.app_id') AS app_id FROM bins", "depot")
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ rows: [{ n: 3, app_id: depotId }], rowCount: 1 })
  })

  it("the shop app, deleted, is refused within a second", async () => {
    expect((await run("SELECT count(*) AS n FROM products", "shop")).status).toBe(200)
    await query(stack.db.adminUrl, (sql) => sql`DELETE FROM sys.apps WHERE schema_name = 'shop'`)
    expect(await eventually(async () => (await run("SELECT count(*) AS n FROM products", "shop")).status === 400, 2_000)).toBe(true)
    expectRefusedHeader(await run("SELECT count(*) AS n FROM products", "shop"))
  })
})
