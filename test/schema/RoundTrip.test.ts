/**
 * One managed table with every column type, end to end: sys.create_table → the catalog and POST /
 * → rows through POST /sql (and what each type's constraint refuses) → the read view with the
 * reference's display column → sys.drop_table. The steps share the two tables and run in order.
 * (Each alter operation has its own tests in Alter.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import {
  admin,
  alterTable,
  call,
  createTable,
  exists,
  expectDbError,
  fresh,
  insert,
  introspect,
  introspectUntil,
  ok,
  relation,
  result,
  signInAll,
  sql,
  type Users
} from "./helpers.ts"

let stack: AuthStack
let users: Users
const customers = fresh("customers")
const products = fresh("products")
let acme: string

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

const STATUS_OPTIONS = [
  { value: "open", label: "Open", color: "green" },
  { value: "closed", label: "Closed", color: "red" }
]

const EVERY_TYPE = [
  { name: "title", type: "text", required: true, unique: true, label: "Title" },
  { name: "qty", type: "integer", default: 0 },
  { name: "big", type: "bigint" },
  { name: "ratio", type: "numeric" },
  { name: "price", type: "currency", label: "Price" },
  { name: "active", type: "boolean", default: true },
  { name: "born", type: "date" },
  { name: "seen", type: "timestamp" },
  { name: "ext", type: "uuid" },
  { name: "data", type: "json" },
  { name: "contact", type: "email" },
  { name: "site", type: "url", display_type: "link" },
  { name: "status", type: "choice", options: STATUS_OPTIONS, default: "open" },
  { name: "customer", type: "reference", references: customers, label: "Customer" }
]

const VALID = {
  title: "Widget",
  qty: 3,
  big: "9007199254740993",
  ratio: "0.125",
  price: "19.99",
  active: true,
  born: "1990-05-17",
  seen: "2026-01-02T03:04:05Z",
  ext: "3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
  data: { tags: ["a", "b"], n: 1 },
  contact: "buyer@example.com",
  site: "https://example.com/widget",
  status: "closed"
}

const insertProduct = (values: Readonly<Record<string, unknown>>, user = users.owner) => {
  const columns = Object.keys(values)
  const placeholders = columns.map((c, i) => (c === "data" ? `$${i + 1}::jsonb` : `$${i + 1}`))
  return sql(stack, user, `INSERT INTO ${products} (${columns.join(", ")}) VALUES (${placeholders.join(", ")})`, Object.values(values))
}

describe("a table with every column type", () => {
  it("sys.create_table creates both tables with the SQL type of each column-spec type", async () => {
    expect(result(await createTable(stack, users.owner, customers, [{ name: "name", required: true }, { name: "email", type: "email", unique: true }])))
      .toEqual({ schema: "public", table: customers, view: `${customers}_v` })
    expect(result(await createTable(stack, users.admin, products, EVERY_TYPE))).toEqual({ schema: "public", table: products, view: `${products}_v` })

    const columns = await admin<{ name: string; type: string; notnull: boolean }>(
      stack,
      `SELECT attname AS name, format_type(atttypid, atttypmod) AS type, attnotnull AS notnull FROM pg_attribute
       WHERE attrelid = $1::regclass AND attnum > 4 AND NOT attisdropped ORDER BY attnum`,
      [products]
    )
    expect(columns.map((c) => [c.name, c.type])).toEqual([
      ["title", "text"],
      ["qty", "integer"],
      ["big", "bigint"],
      ["ratio", "numeric"],
      ["price", "numeric(14,2)"],
      ["active", "boolean"],
      ["born", "date"],
      ["seen", "timestamp with time zone"],
      ["ext", "uuid"],
      ["data", "jsonb"],
      ["contact", "text"],
      ["site", "text"],
      ["status", "text"],
      ["customer", "uuid"]
    ])
    expect(columns.filter((c) => c.notnull).map((c) => c.name)).toEqual(["title"])

    const meta = await admin<{ column_name: string; column_type: string; display_type: string; label: string | null; options: unknown; reference_table: string | null }>(
      stack,
      "SELECT column_name, column_type, display_type, label, options, reference_table FROM sys.column_metadata WHERE table_name = $1 ORDER BY position",
      [products]
    )
    expect(meta.map((m) => [m.column_name, m.column_type, m.display_type])).toEqual([
      ["title", "text", "text"],
      ["qty", "integer", "number"],
      ["big", "bigint", "number"],
      ["ratio", "numeric", "number"],
      ["price", "currency", "currency"],
      ["active", "boolean", "boolean"],
      ["born", "date", "date"],
      ["seen", "timestamp", "datetime"],
      ["ext", "uuid", "text"],
      ["data", "json", "json"],
      ["contact", "email", "email"],
      ["site", "url", "link"],
      ["status", "choice", "choice"],
      ["customer", "reference", "reference"]
    ])
    expect(meta.find((m) => m.column_name === "status")?.options).toEqual(STATUS_OPTIONS)
    expect(meta.find((m) => m.column_name === "customer")).toMatchObject({ reference_table: customers, label: "Customer" })
  })

  it("POST / describes both tables, their read views, metadata and keys", async () => {
    const schema = await introspectUntil(stack, users.owner, (s) => relation(s, products) !== undefined)
    expect(relation(schema, products)).toMatchObject({ kind: "table", write_target: null, is_managed: true, can_select: true, can_insert: true })
    expect(relation(schema, `${products}_v`)).toMatchObject({ kind: "view", write_target: products, is_managed: false, can_select: true })
    expect(relation(schema, products)!.cols.map((c) => c.name)).toEqual(["id", "created_at", "updated_at", "created_by", ...EVERY_TYPE.map((c) => c.name)])
    expect(relation(schema, `${products}_v`)!.cols.map((c) => c.name)).toEqual([
      "id",
      "created_at",
      "updated_at",
      "created_by",
      ...EVERY_TYPE.map((c) => c.name),
      "customer_display"
    ])
    expect(relation(schema, products)!.cols.find((c) => c.name === "price")).toMatchObject({ type: "numeric(14,2)", nullable: true })
    expect(relation(schema, products)!.cols.find((c) => c.name === "title")).toMatchObject({ type: "text", nullable: false, has_default: false })

    expect(schema.column_metadata[products]).toEqual({
      title: { display_type: "text", label: "Title", column_type: "text" },
      qty: { display_type: "number", column_type: "integer" },
      big: { display_type: "number", column_type: "bigint" },
      ratio: { display_type: "number", column_type: "numeric" },
      price: { display_type: "currency", label: "Price", column_type: "currency" },
      active: { display_type: "boolean", column_type: "boolean" },
      born: { display_type: "date", column_type: "date" },
      seen: { display_type: "datetime", column_type: "timestamp" },
      ext: { display_type: "text", column_type: "uuid" },
      data: { display_type: "json", column_type: "json" },
      contact: { display_type: "email", column_type: "email" },
      site: { display_type: "link", column_type: "url" },
      status: { display_type: "choice", column_type: "choice", options: STATUS_OPTIONS },
      customer: { display_type: "reference", label: "Customer", column_type: "reference", reference_table: customers }
    })
    expect(schema.table_metadata[products]).toEqual({ display_columns: [], description: "" })
    expect(schema.table_metadata[customers]).toEqual({ display_columns: [], description: "" })

    const keysOf = (table: string) => schema.keys.filter((k) => k.source_table === table)
    expect(keysOf(products)).toEqual(expect.arrayContaining([
      {
        constraint_name: `${products}_pkey`,
        constraint_type: "PRIMARY KEY",
        source_schema: "public",
        source_table: products,
        source_columns: ["id"],
        target_schema: null,
        target_table: null,
        target_columns: null
      },
      {
        constraint_name: `${products}_title_key`,
        constraint_type: "UNIQUE",
        source_schema: "public",
        source_table: products,
        source_columns: ["title"],
        target_schema: null,
        target_table: null,
        target_columns: null
      },
      {
        constraint_name: "customer_ref",
        constraint_type: "FOREIGN KEY",
        source_schema: "public",
        source_table: products,
        source_columns: ["customer"],
        target_schema: "public",
        target_table: customers,
        target_columns: ["id"]
      }
    ]))
    expect(keysOf(products)).toHaveLength(3)
    expect(keysOf(customers).map((k) => [k.constraint_type, k.source_columns])).toEqual([["PRIMARY KEY", ["id"]], ["UNIQUE", ["email"]]])
    // CHECK constraints (email, url, choice) are no keys.
    expect(schema.keys.some((k) => k.constraint_name.endsWith("_kind"))).toBe(false)
    expect(schema.stats).toEqual(expect.arrayContaining([{ relname: products, number_rows: 0 }, { relname: customers, number_rows: 0 }]))
  })

  it("a valid row of every type goes in through POST /sql and comes back through the read view with the customer's display", async () => {
    await insert(stack, users.owner, customers, { name: "Acme", email: "acme@example.com" })
    acme = (await admin<{ id: string }>(stack, `SELECT id::text FROM public.${customers}`))[0]!.id
    expect(await insertProduct({ ...VALID, customer: acme })).toEqual({ status: 200, headers: expect.anything(), body: { rows: [], rowCount: 1 } })

    const rows = ok(await sql(stack, users.owner, `SELECT ${Object.keys(VALID).join(", ")}, customer, customer_display FROM ${products}_v`))
    expect(rows).toEqual([{ ...VALID, customer: acme, customer_display: "Acme" }])

    // The defaults of the spec fill what an INSERT leaves out.
    ok(await insertProduct({ title: "Defaults" }))
    expect(ok(await sql(stack, users.owner, `SELECT qty, active, status, customer, customer_display FROM ${products}_v WHERE title = 'Defaults'`)))
      .toEqual([{ qty: 0, active: true, status: "open", customer: null, customer_display: "" }])
  })

  it.each([
    ["an email without @", { contact: "buyer.example.com" }, "23514", "contact_kind"],
    ["an email with a space", { contact: "buyer @example.com" }, "23514", "contact_kind"],
    ["a url that is not http(s)", { site: "ftp://example.com" }, "23514", "site_kind"],
    ["a url without a host", { site: "example.com" }, "23514", "site_kind"],
    ["a choice outside the options", { status: "pending" }, "23514", "status_kind"],
    ["a missing required title", { title: null }, "23502", "title"],
    ["a duplicate unique title", { title: "Widget" }, "23505", `${products}_title_key`],
    ["a customer that does not exist", { customer: "00000000-0000-4000-8000-000000000000" }, "23503", "customer_ref"]
  ])("%s → 409 %s", async (_label, values, code, message) => {
    const response = await insertProduct({ title: fresh("t"), ...values })
    expectDbError(response, 409, code, message)
  })

  it("type errors of the values themselves → 400 (22xxx)", async () => {
    expectDbError(await insertProduct({ title: fresh("t"), qty: "three" }), 400, "22P02")
    expectDbError(await insertProduct({ title: fresh("t"), born: "1990-13-45" }), 400, "22008")
  })

  it("an update that breaks a constraint is refused the same way, and the row keeps its values", async () => {
    expectDbError(await sql(stack, users.owner, `UPDATE ${products} SET site = 'javascript:alert(1)' WHERE title = 'Widget'`), 409, "23514", "site_kind")
    expectDbError(await sql(stack, users.owner, `UPDATE ${products} SET status = NULL, title = NULL WHERE title = 'Widget'`), 409, "23502")
    // A NULL choice, email or url is fine when the column is optional.
    expect(await sql(stack, users.owner, `UPDATE ${products} SET status = NULL, contact = NULL, site = 'HTTP://EXAMPLE.COM' WHERE title = 'Defaults'`))
      .toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(await admin(stack, `SELECT site, status, contact FROM public.${products} ORDER BY title`)).toEqual([
      { site: "HTTP://EXAMPLE.COM", status: null, contact: null },
      { site: VALID.site, status: VALID.status, contact: VALID.contact }
    ])
  })

  it("the reference's display column follows set_display_columns of the referenced table", async () => {
    result(await alterTable(stack, users.owner, customers, [{ op: "set_display_columns", columns: ["name", "email"] }]))
    expect(ok(await sql(stack, users.owner, `SELECT customer_display FROM ${products}_v WHERE title = 'Widget'`)))
      .toEqual([{ customer_display: "Acme acme@example.com" }])
    const schema = await introspectUntil(stack, users.owner, (s) => s.table_metadata[customers]?.display_columns.length === 2)
    expect(schema.table_metadata[customers]?.display_columns).toEqual(["name", "email"])
    // A member reading the view sees the display of rows they may read only (row-level security on both tables).
    await insert(stack, users.member, customers, { name: "Mine" })
    const mine = (await admin<{ id: string }>(stack, `SELECT id::text FROM public.${customers} WHERE name = 'Mine'`))[0]!.id
    ok(await insertProduct({ title: "Member's", customer: mine }, users.member))
    ok(await insertProduct({ title: "Member's, Acme", customer: acme }, users.member))
    expect(ok(await sql(stack, users.member, `SELECT title, customer_display FROM ${products}_v ORDER BY title`))).toEqual([
      { title: "Member's", customer_display: "Mine" },
      { title: "Member's, Acme", customer_display: "" }
    ])
  })

  it("stats count the rows (owner: all; member: own)", async () => {
    const owner = await introspect(stack, users.owner)
    expect(owner.stats.find((s) => s.relname === products)).toEqual({ relname: products, number_rows: 4 })
    expect(owner.stats.find((s) => s.relname === customers)).toEqual({ relname: customers, number_rows: 2 })
    const member = await introspect(stack, users.member)
    expect(member.stats.find((s) => s.relname === products)).toEqual({ relname: products, number_rows: 2 })
    expect(member.stats.find((s) => s.relname === customers)).toEqual({ relname: customers, number_rows: 1 })
  })

  it("sys.drop_table: the referenced table first → 400 2BP01; the products, then the customers go; POST / forgets both", async () => {
    expectDbError(await call(stack, users.owner, "sys.drop_table($1)", [customers]), 400, "2BP01", products)
    expect(result(await call(stack, users.owner, "sys.drop_table($1)", [products]))).toEqual({ schema: "public", table: products, view: `${products}_v` })
    expect(result(await call(stack, users.owner, "sys.drop_table($1)", [customers]))).toMatchObject({ table: customers })
    for (const name of [products, `${products}_v`, customers, `${customers}_v`]) expect(await exists(stack, `public.${name}`)).toBe(false)
    expect(await admin(stack, "SELECT table_name FROM sys.column_metadata WHERE table_name IN ($1, $2)", [products, customers])).toEqual([])

    const schema = await introspectUntil(stack, users.owner, (s) => relation(s, products) === undefined && relation(s, customers) === undefined)
    expect(schema.relations.filter((r) => r.table_name.startsWith(products) || r.table_name.startsWith(customers))).toEqual([])
    expect(schema.column_metadata[products]).toBeUndefined()
    expect(schema.table_metadata[customers]).toBeUndefined()
    expect(schema.keys.filter((k) => k.source_table === products || k.target_table === customers)).toEqual([])
    expect(schema.stats.filter((s) => s.relname === products || s.relname === customers)).toEqual([])
  })
})
