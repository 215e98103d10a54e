/**
 * sys.create_view and sys.drop_view (spec §4.4): a custom view is exactly one SELECT, created
 * security_invoker (row-level security of the tables below applies to whoever reads it); anything
 * else is refused and leaves the schema as it was. drop_view drops custom views only.
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
  expectForbidden,
  fresh,
  insert,
  ok,
  result,
  signInAll,
  sql,
  type Users
} from "./helpers.ts"

let stack: AuthStack
let users: Users
let notes: string

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
  notes = fresh("notes")
  result(await createTable(stack, users.owner, notes, [{ name: "body" }, { name: "n", type: "integer" }]))
  await insert(stack, users.member, notes, { body: "m1", n: 1 })
  await insert(stack, users.member2, notes, { body: "m2", n: 2 })
  await insert(stack, users.staff, notes, { body: "s", n: 3 })
})
afterAll(() => stack?.close())

const createView = (name: unknown, text: unknown, user = users.owner) => call(stack, user, "sys.create_view($1, $2)", [name, text])
const dropView = (name: unknown, user = users.owner) => call(stack, user, "sys.drop_view($1)", [name])

const noteCount = async () => (await admin<{ n: number }>(stack, `SELECT count(*)::int AS n FROM public.${notes}`))[0]!.n

describe("sys.create_view", () => {
  it("as owner: one SELECT becomes a security_invoker view, registered and readable by the app roles", async () => {
    const name = fresh("note_list")
    expect(result(await createView(name, `SELECT body, n FROM ${notes} ORDER BY n`))).toEqual({ schema: "public", view: name })
    expect(await admin(stack, "SELECT relkind, reloptions FROM pg_class WHERE oid = $1::regclass", [`public.${name}`]))
      .toEqual([{ relkind: "v", reloptions: ["security_invoker=true"] }])
    expect(await admin(stack, "SELECT definition FROM sys.managed_views WHERE schema_name = 'public' AND view_name = $1", [name]))
      .toEqual([{ definition: `SELECT body, n FROM ${notes} ORDER BY n` }])
    const grantees = await admin<{ grantee: string }>(
      stack,
      "SELECT grantee FROM information_schema.role_table_grants WHERE table_name = $1 AND privilege_type = 'SELECT' AND grantee IN ('owner', 'admin', 'staff', 'member', 'anon') ORDER BY 1",
      [name]
    )
    expect(grantees.map((g) => g.grantee)).toEqual(["admin", "member", "owner", "staff"])
    expect(ok(await sql(stack, users.owner, `SELECT body FROM ${name}`))).toEqual([{ body: "m1" }, { body: "m2" }, { body: "s" }])
  })

  it("reads through row-level security as the reader: a member sees only their own rows, staff all", async () => {
    const name = fresh("note_totals")
    result(await createView(name, `SELECT count(*)::int AS rows, coalesce(sum(n), 0)::int AS total FROM ${notes}`))
    expect(ok(await sql(stack, users.member, `SELECT * FROM ${name}`))).toEqual([{ rows: 1, total: 1 }])
    expect(ok(await sql(stack, users.member2, `SELECT * FROM ${name}`))).toEqual([{ rows: 1, total: 2 }])
    expect(ok(await sql(stack, users.staff, `SELECT * FROM ${name}`))).toEqual([{ rows: 3, total: 6 }])
  })

  it("cannot widen access: a view over a table the reader may not read is refused to the reader (403)", async () => {
    const name = fresh("peek")
    result(await createView(name, "SELECT email FROM sys.users"))
    expectDbError(await sql(stack, users.member, `SELECT * FROM ${name}`), 403, "42501")
    expectDbError(await sql(stack, users.owner, `SELECT * FROM ${name}`), 403, "42501")
  })

  it("as admin: creates the view", async () => {
    const name = fresh("admin_view")
    expect(result(await createView(name, "SELECT 1 AS one", users.admin))).toEqual({ schema: "public", view: name })
    expect(ok(await sql(stack, users.member, `SELECT one FROM ${name}`))).toEqual([{ one: 1 }])
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, nothing is created", async (role) => {
    const name = fresh("denied")
    expectForbidden(await createView(name, "SELECT 1 AS one", users[role]))
    expect(await exists(stack, `public.${name}`)).toBe(false)
    expect(await admin(stack, "SELECT 1 FROM sys.managed_views WHERE view_name = $1", [name])).toEqual([])
  })

  describe("refuses anything but one SELECT, leaving the schema as it was", () => {
    it("a ';' (even a trailing one) → 400 P0001", async () => {
      const name = fresh("semi")
      expectDbError(await createView(name, "SELECT 1;"), 400, "P0001", /exactly one SELECT, without ";"/)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("'select 1; drop table …' → 400 P0001, and the table still exists", async () => {
      const name = fresh("stacked")
      expectDbError(await createView(name, `select 1; drop table ${notes}`), 400, "P0001", /without ";"/)
      expect(await exists(stack, `public.${notes}`)).toBe(true)
      expect(await noteCount()).toBe(3)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it.each([
      ["DELETE", () => `delete from ${notes}`],
      ["UPDATE", () => `update ${notes} set body = 'x'`],
      ["INSERT", () => `insert into ${notes} (body) values ('x')`],
      ["DROP", () => `drop table ${notes}`],
      ["CREATE", () => "create table evil (id int)"],
      ["TRUNCATE", () => `truncate ${notes}`]
    ])("%s text → 400, and the table and its rows stay", async (_label, text) => {
      const name = fresh("dml")
      const response = await createView(name, text())
      expect(response.status).toBe(400)
      expect((response.body as unknown as { error: { code: string } }).error.code).toMatch(/^(42601|P0001)$/)
      expect(await exists(stack, `public.${notes}`)).toBe(true)
      expect(await exists(stack, "public.evil")).toBe(false)
      expect(await noteCount()).toBe(3)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("a data-modifying WITH → 400 (0A000), and no row is deleted", async () => {
      const name = fresh("cte")
      expectDbError(await createView(name, `WITH gone AS (DELETE FROM ${notes} RETURNING *) SELECT * FROM gone`), 400, "0A000")
      expect(await noteCount()).toBe(3)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("an empty or missing SELECT → 400 P0001", async () => {
      expectDbError(await createView(fresh("empty"), "   "), 400, "P0001", /needs a SELECT/)
      expectDbError(await createView(fresh("empty"), null), 400, "P0001", /needs a SELECT/)
    })

    it("more than 100000 characters → 400 P0001", async () => {
      const name = fresh("huge")
      expectDbError(await createView(name, `SELECT 1 AS one /* ${"x".repeat(100_000)} */`), 400, "P0001", /100000/)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("an unknown table → 400 42P01", async () => {
      const name = fresh("dangling")
      expectDbError(await createView(name, "SELECT * FROM no_such_table"), 400, "42P01")
      expect(await admin(stack, "SELECT 1 FROM sys.managed_views WHERE view_name = $1", [name])).toEqual([])
    })
  })

  describe("view names", () => {
    it.each([
      ["Upper", /lower-case letter/],
      ["with space", /lower-case letter/],
      ["v".repeat(64), /longer than 63 bytes/],
      ["sys_view", /may not be sys or start with sys_ or pg_/],
      ["pg_view", /may not be sys or start with sys_ or pg_/],
      ["select", /reserved word/],
      [null, /view name null/]
    ])("%s → 400 P0001", async (name, message) => {
      expectDbError(await createView(name, "SELECT 1 AS one"), 400, "P0001", message)
    })

    it("the name of an existing table, read view or view → 400 42P07", async () => {
      expectDbError(await createView(notes, "SELECT 1 AS one"), 400, "42P07", "already exists")
      expectDbError(await createView(`${notes}_v`, "SELECT 1 AS one"), 400, "42P07", "already exists")
      const name = fresh("once")
      result(await createView(name, "SELECT 1 AS one"))
      expectDbError(await createView(name, "SELECT 2 AS two"), 400, "42P07", "already exists")
      expect(ok(await sql(stack, users.owner, `SELECT * FROM ${name}`))).toEqual([{ one: 1 }])
    })
  })

  it("a table a custom view reads cannot be dropped (400 2BP01) until the view is dropped", async () => {
    const table = fresh("base")
    result(await createTable(stack, users.owner, table, [{ name: "body" }]))
    const name = fresh("over_base")
    result(await createView(name, `SELECT body FROM ${table}`))
    expectDbError(await call(stack, users.owner, "sys.drop_table($1)", [table]), 400, "2BP01")
    expect(await exists(stack, `public.${table}`)).toBe(true)
    expect(await exists(stack, `public.${table}_v`)).toBe(true)
    // Adding a column does not touch what the view reads.
    result(await alterTable(stack, users.owner, table, [{ op: "add_column", column: { name: "extra" } }]))
    result(await dropView(name))
    result(await call(stack, users.owner, "sys.drop_table($1)", [table]))
    expect(await exists(stack, `public.${table}`)).toBe(false)
  })
})

describe("a custom view over a read view", () => {
  it("blocks sys.alter_table of the table (400 2BP01 naming the view) until the view is dropped", async () => {
    const table = fresh("source")
    result(await createTable(stack, users.owner, table, [{ name: "body" }]))
    const name = fresh("over_read_view")
    result(await createView(name, `SELECT body FROM ${table}_v`))
    const refused = await alterTable(stack, users.owner, table, [{ op: "add_column", column: { name: "extra" } }])
    expectDbError(refused, 400, "2BP01")
    expect((refused.body as unknown as { error: { detail: string | null } }).error.detail).toContain(name)
    expect(await exists(stack, `public.${table}_v`)).toBe(true)
    expect(ok(await sql(stack, users.owner, `SELECT count(*)::int AS n FROM ${name}`))).toEqual([{ n: 0 }])
    result(await dropView(name))
    result(await alterTable(stack, users.owner, table, [{ op: "add_column", column: { name: "extra" } }]))
  })
})

describe("sys.drop_view", () => {
  it("as owner and as admin: drops a custom view and its registry entry", async () => {
    for (const user of [users.owner, users.admin]) {
      const name = fresh("temp_view")
      result(await createView(name, "SELECT 1 AS one"))
      expect(result(await dropView(name, user))).toEqual({ schema: "public", view: name })
      expect(await exists(stack, `public.${name}`)).toBe(false)
      expect(await admin(stack, "SELECT 1 FROM sys.managed_views WHERE view_name = $1", [name])).toEqual([])
    }
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, the view stays", async (role) => {
    const name = fresh("kept_view")
    result(await createView(name, "SELECT 1 AS one"))
    expectForbidden(await dropView(name, users[role]))
    expect(await exists(stack, `public.${name}`)).toBe(true)
  })

  it("a table's read view → 400 P0001, and it stays", async () => {
    expectDbError(await dropView(`${notes}_v`), 400, "P0001", /no custom view .* \(read views go with their tables\)/)
    expect(await exists(stack, `public.${notes}_v`)).toBe(true)
  })

  it("a view the database administrator made (not managed) → 400 P0001, and it stays", async () => {
    const name = fresh("legacy_view")
    await admin(stack, `CREATE VIEW public.${name} AS SELECT 1 AS one`)
    expectDbError(await dropView(name), 400, "P0001", /no custom view/)
    expect(await exists(stack, `public.${name}`)).toBe(true)
  })

  it("a managed table, or an unknown name → 400 P0001", async () => {
    expectDbError(await dropView(notes), 400, "P0001", /no custom view/)
    expect(await exists(stack, `public.${notes}`)).toBe(true)
    expectDbError(await dropView("no_such_view"), 400, "P0001", /no custom view 'no_such_view'/)
    expectDbError(await dropView(null), 400, "P0001", /no custom view 'null'/)
  })
})
