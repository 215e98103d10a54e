/**
 * sys.create_table and sys.drop_table (spec §4.4) through POST /sql: what a managed table is
 * (id, created_at, updated_at, created_by, forced row-level security, a read view, metadata and
 * default permissions), name validation, who may call them, and how rows behave for each role.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import { admin, asRole, call, createTable, exists, expectDbError, expectForbidden, fresh, insert, ok, result, sql, signInAll, type Users } from "./helpers.ts"

let stack: AuthStack
let users: Users

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

const dropTable = (name: string, user = users.owner) => call(stack, user, "sys.drop_table($1)", [name])

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe("sys.create_table", () => {
  it("as owner: creates the table with id, created_at, updated_at, created_by, its read view, metadata and default permissions", async () => {
    const name = fresh("customers")
    const response = await createTable(stack, users.owner, name, [{ name: "name", type: "text", required: true, label: "Name" }])
    expect(result(response)).toEqual({ schema: "public", table: name, view: `${name}_v` })

    const columns = await admin<{ column_name: string; data_type: string; is_nullable: string; column_default: string | null }>(
      stack,
      `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
       WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position`,
      [name]
    )
    expect(columns.map((c) => [c.column_name, c.data_type, c.is_nullable])).toEqual([
      ["id", "uuid", "NO"],
      ["created_at", "timestamp with time zone", "NO"],
      ["updated_at", "timestamp with time zone", "NO"],
      ["created_by", "uuid", "YES"],
      ["name", "text", "NO"]
    ])
    expect(columns[0]!.column_default).toBe("gen_random_uuid()")

    const [pk] = await admin<{ def: string }>(stack, "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p'", [name])
    expect(pk).toEqual({ def: "PRIMARY KEY (id)" })

    const [rls] = await admin<{ relrowsecurity: boolean; relforcerowsecurity: boolean }>(
      stack,
      "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1::regclass",
      [name]
    )
    expect(rls).toEqual({ relrowsecurity: true, relforcerowsecurity: true })

    const [view] = await admin<{ relkind: string; options: ReadonlyArray<string> | null }>(
      stack,
      "SELECT relkind, reloptions AS options FROM pg_class WHERE oid = $1::regclass",
      [`${name}_v`]
    )
    expect(view).toEqual({ relkind: "v", options: ["security_invoker=true"] })

    const triggers = await admin<{ tgname: string }>(
      stack,
      "SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND NOT tgisinternal ORDER BY tgname",
      [name]
    )
    expect(triggers.map((t) => t.tgname)).toEqual(["guard_created_by", "touch_updated_at"])

    expect(await admin(stack, "SELECT display_columns FROM sys.table_metadata WHERE schema_name = 'public' AND table_name = $1", [name]))
      .toEqual([{ display_columns: [] }])
    expect(await admin(stack, "SELECT column_name, column_type, display_type, label, position FROM sys.column_metadata WHERE table_name = $1", [name]))
      .toEqual([{ column_name: "name", column_type: "text", display_type: "text", label: "Name", position: 1 }])
    expect(await admin(stack, "SELECT role, read, write, delete FROM sys.table_permissions WHERE table_name = $1 ORDER BY role", [name]))
      .toEqual([
        { role: "anon", read: "none", write: "none", delete: "none" },
        { role: "member", read: "own", write: "own", delete: "own" },
        { role: "staff", read: "all", write: "all", delete: "all" }
      ])
  })

  it("as admin: creates the table", async () => {
    const name = fresh("admin_made")
    expect(result(await createTable(stack, users.admin, name, [{ name: "title" }]))).toEqual({ schema: "public", table: name, view: `${name}_v` })
    expect(await exists(stack, `public.${name}`)).toBe(true)
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, and nothing is created", async (role) => {
    const name = fresh("denied")
    expectForbidden(await createTable(stack, users[role], name, [{ name: "title" }]))
    expect(await exists(stack, `public.${name}`)).toBe(false)
    expect(await admin(stack, "SELECT 1 FROM sys.table_metadata WHERE table_name = $1", [name])).toEqual([])
  })

  it("a table with no columns of its own is fine", async () => {
    const name = fresh("bare")
    expect(result(await createTable(stack, users.owner, name, []))).toMatchObject({ table: name })
    await insert(stack, users.owner, name, {})
    expect(ok(await sql(stack, users.owner, `SELECT created_by FROM ${name}_v`))).toEqual([{ created_by: users.owner.user.id }])
  })

  describe("table names", () => {
    it.each([
      ["upper case", "Customers", /lower-case letter/],
      ["a space", "my table", /lower-case letter/],
      ["a leading digit", "1table", /lower-case letter/],
      ["a hyphen", "my-table", /lower-case letter/],
      ["more than 63 bytes", "a".repeat(64), /longer than 63 bytes/],
      ["the sys prefix", "sys_x", /may not be sys or start with sys_ or pg_/],
      ["the pg_ prefix", "pg_x", /may not be sys or start with sys_ or pg_/],
      ["the reserved word select", "select", /reserved word/],
      ["the reserved word table", "table", /reserved word/],
      ["the read-view suffix _v", "orders_v", /may not end in _v/]
    ])("%s (%s) → 400 P0001 with a clear message, and nothing is created", async (_label, name, message) => {
      const response = await createTable(stack, users.owner, name, [{ name: "title" }])
      expectDbError(response, 400, "P0001", message)
      expect(await admin(stack, "SELECT count(*)::int AS n FROM pg_class WHERE relname = $1", [name])).toEqual([{ n: 0 }])
    })

    it("61 bytes (the read view's name is then 63) is accepted, with its read view", async () => {
      const name = fresh("long").padEnd(61, "x")
      expect(result(await createTable(stack, users.owner, name, []))).toEqual({ schema: "public", table: name, view: `${name}_v` })
      expect(await exists(stack, `public.${name}`)).toBe(true)
      expect(await exists(stack, `public.${name}_v`)).toBe(true)
    })

    it("62 or 63 bytes (no room left for `_v`) → 400 P0001 with a clear message, and nothing is created", async () => {
      for (const length of [62, 63]) {
        const name = fresh("toolong").padEnd(length, "y")
        expectDbError(await createTable(stack, users.owner, name, []), 400, "P0001", /longer than|too long|bytes/)
        expect(await admin(stack, "SELECT relname FROM pg_class WHERE relname LIKE $1", [`${name.slice(0, 40)}%`])).toEqual([])
      }
    })

    it("null → 400 P0001", async () => {
      expectDbError(await createTable(stack, users.owner, null as unknown as string, []), 400, "P0001", /table name null/)
    })

    it("an existing table → 400 42P07, a second create changes nothing", async () => {
      const name = fresh("twice")
      result(await createTable(stack, users.owner, name, [{ name: "a" }]))
      expectDbError(await createTable(stack, users.owner, name, [{ name: "b" }]), 400, "42P07", "already exists")
      expect(await admin(stack, "SELECT column_name FROM sys.column_metadata WHERE table_name = $1", [name])).toEqual([{ column_name: "a" }])
    })

    it("a table made by the database administrator with that name → 400 42P07", async () => {
      const name = fresh("legacy")
      await admin(stack, `CREATE TABLE public.${name} (id int PRIMARY KEY)`)
      expectDbError(await createTable(stack, users.owner, name, []), 400, "42P07", name)
      expect(await admin(stack, "SELECT 1 FROM sys.table_metadata WHERE table_name = $1", [name])).toEqual([])
    })
  })

  describe("column specs", () => {
    it.each([
      ["id", /added to every managed table/],
      ["created_by", /added to every managed table/],
      ["created_at", /added to every managed table/],
      ["updated_at", /added to every managed table/],
      ["Title", /column name 'Title' must start with a lower-case letter/],
      ["select", /reserved word/],
      ["sys_note", /may not be sys or start with sys_ or pg_/]
    ])("column name %s → 400 P0001, and the table is not created", async (column, message) => {
      const name = fresh("badcol")
      expectDbError(await createTable(stack, users.owner, name, [{ name: "fine" }, { name: column }]), 400, "P0001", message)
      expect(await exists(stack, `public.${name}`)).toBe(false)
      expect(await admin(stack, "SELECT 1 FROM sys.table_metadata WHERE table_name = $1", [name])).toEqual([])
    })

    it.each([
      ["an unknown type", [{ name: "x", type: "money" }], /unknown column type 'money'/],
      ["a choice without options", [{ name: "x", type: "choice" }], /choice column x needs options/],
      ["a choice with an empty option value", [{ name: "x", type: "choice", options: [{ value: "" }] }], /non-empty value/],
      ["a reference to an unknown table", [{ name: "x", type: "reference", references: "nowhere" }], /no managed table 'nowhere'/],
      ["a reference without a table", [{ name: "x", type: "reference" }], /referenced table name null/],
      ["references on a text column", [{ name: "x", type: "text", references: "nowhere" }], /only reference columns take "references"/],
      ["a column without a name", [{ type: "text" }], /column name null/],
      ["a column that is not an object", ["x"], /column name null|must be an object/]
    ])("%s → 400 P0001", async (_label, columns, message) => {
      const name = fresh("badspec")
      expectDbError(await createTable(stack, users.owner, name, columns), 400, "P0001", message)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("columns that are not an array → 400 P0001", async () => {
      const name = fresh("notarray")
      const response = await call(stack, users.owner, "sys.create_table($1, $2::jsonb)", [name, { name: "x" }])
      expectDbError(response, 400, "P0001", /columns must be a JSON array/)
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })

    it("a reference to a table the database administrator made (not managed) → 400 P0001", async () => {
      const target = fresh("unmanaged")
      await admin(stack, `CREATE TABLE public.${target} (id uuid PRIMARY KEY)`)
      const name = fresh("pointing")
      expectDbError(await createTable(stack, users.owner, name, [{ name: "t", type: "reference", references: target }]), 400, "P0001", /no managed table/)
    })

    it("a duplicate column name → 400 (42701)", async () => {
      const name = fresh("dupcol")
      expectDbError(await createTable(stack, users.owner, name, [{ name: "a" }, { name: "a" }]), 400, "42701")
      expect(await exists(stack, `public.${name}`)).toBe(false)
    })
  })
})

describe("rows of a managed table", () => {
  const setup = async () => {
    const name = fresh("notes")
    result(await createTable(stack, users.owner, name, [{ name: "body", type: "text" }]))
    return name
  }
  interface Row {
    readonly id: string
    readonly body: string
    readonly created_at: string
    readonly updated_at: string
    readonly created_by: string
  }
  const rowOf = async (name: string, body: string): Promise<Row> => {
    const [row] = await admin<Row>(
      stack,
      `SELECT id::text, body, to_json(created_at) #>> '{}' AS created_at, to_json(updated_at) #>> '{}' AS updated_at, created_by::text
       FROM public.${name} WHERE body = $1`,
      [body]
    )
    return row!
  }

  it("INSERT fills id, created_at, updated_at and created_by (the caller); UPDATE bumps updated_at only", async () => {
    const name = await setup()
    await insert(stack, users.member, name, { body: "hello" })
    const [read] = ok(await sql<Row>(stack, users.member, `SELECT id, created_at, updated_at, created_by FROM ${name}`))
    expect(read).toEqual({ id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/), created_at: expect.any(String), updated_at: expect.any(String), created_by: users.member.user.id })
    const row = await rowOf(name, "hello")
    expect(row.created_by).toBe(users.member.user.id)
    expect(row.updated_at).toBe(row.created_at)

    await sleep(20)
    expect(await sql(stack, users.member, `UPDATE ${name} SET body = $1 WHERE id = $2`, ["changed", row.id]))
      .toMatchObject({ status: 200, body: { rowCount: 1 } })
    const updated = await rowOf(name, "changed")
    expect(updated.created_at).toBe(row.created_at)
    expect(updated.created_by).toBe(users.member.user.id)
    expect(Date.parse(updated.updated_at)).toBeGreaterThan(Date.parse(row.updated_at))

    // Even an explicit updated_at is overwritten by the trigger.
    expect(await sql(stack, users.owner, `UPDATE ${name} SET updated_at = '2000-01-01', body = 'forced' WHERE id = $1`, [row.id]))
      .toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(Date.parse((await rowOf(name, "forced")).updated_at)).toBeGreaterThanOrEqual(Date.parse(updated.updated_at))
    expect((await rowOf(name, "forced")).updated_at.startsWith("2000")).toBe(false)
  })

  it("a member sees only their own rows, staff, owner and admin see all, anon sees nothing", async () => {
    const name = await setup()
    for (const [user, body] of [[users.member, "m1"], [users.member2, "m2"], [users.staff, "s"], [users.owner, "o"]] as const) {
      await insert(stack, user, name, { body })
    }
    const bodies = async (user: typeof users.owner) =>
      ok(await sql<{ body: string }>(stack, user, `SELECT body FROM ${name} ORDER BY body`)).map((r) => r.body)
    expect(await bodies(users.member)).toEqual(["m1"])
    expect(await bodies(users.member2)).toEqual(["m2"])
    expect(await bodies(users.staff)).toEqual(["m1", "m2", "o", "s"])
    expect(await bodies(users.owner)).toEqual(["m1", "m2", "o", "s"])
    expect(await bodies(users.admin)).toEqual(["m1", "m2", "o", "s"])
    // The read view passes through the same policies (security_invoker).
    expect(ok(await sql(stack, users.member, `SELECT body FROM ${name}_v`))).toEqual([{ body: "m1" }])
    expect(ok(await sql(stack, users.staff, `SELECT count(*)::int AS n FROM ${name}_v`))).toEqual([{ n: 4 }])

    expect(await asRole(stack, "anon", "", `SELECT * FROM public.${name}`)).toMatchObject({ ok: false, code: "42501" })
    expect(await asRole(stack, "anon", "", `SELECT * FROM public.${name}_v`)).toMatchObject({ ok: false, code: "42501" })
    expect(await asRole(stack, "anon", "", `INSERT INTO public.${name} (body) VALUES ('anon')`)).toMatchObject({ ok: false, code: "42501" })
  })

  it("a member can update and delete only their own rows", async () => {
    const name = await setup()
    await insert(stack, users.member, name, { body: "mine" })
    await insert(stack, users.member2, name, { body: "theirs" })
    const mine = await rowOf(name, "mine")
    const theirs = await rowOf(name, "theirs")
    expect(await sql(stack, users.member, `UPDATE ${name} SET body = 'x' WHERE id = $1`, [theirs.id])).toMatchObject({ status: 200, body: { rowCount: 0 } })
    expect(await sql(stack, users.member, `DELETE FROM ${name} WHERE id = $1`, [theirs.id])).toMatchObject({ status: 200, body: { rowCount: 0 } })
    expect(await sql(stack, users.member, `UPDATE ${name} SET body = 'y' WHERE id = $1`, [mine.id])).toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(await admin(stack, `SELECT body FROM public.${name} ORDER BY body`)).toEqual([{ body: "theirs" }, { body: "y" }])
    expect(await sql(stack, users.member, `DELETE FROM ${name} WHERE id = $1`, [mine.id])).toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(await admin(stack, `SELECT body FROM public.${name}`)).toEqual([{ body: "theirs" }])
  })

  it("a member or staff setting created_by to another user's id → 403, on INSERT and on UPDATE", async () => {
    const name = await setup()
    for (const user of [users.member, users.staff]) {
      expectDbError(await sql(stack, user, `INSERT INTO ${name} (body, created_by) VALUES ('x', $1)`, [users.member2.user.id]), 403, "42501")
    }
    await insert(stack, users.member, name, { body: "mine" })
    const row = await rowOf(name, "mine")
    expectDbError(
      await sql(stack, users.member, `UPDATE ${name} SET created_by = $1 WHERE id = $2`, [users.member2.user.id, row.id]),
      403,
      "42501",
      "created_by"
    )
    expectDbError(
      await sql(stack, users.staff, `UPDATE ${name} SET created_by = $1 WHERE id = $2`, [users.staff.user.id, row.id]),
      403,
      "42501",
      "created_by"
    )
    expect(await admin(stack, `SELECT body, created_by::text FROM public.${name}`)).toEqual([{ body: "mine", created_by: users.member.user.id }])
  })

  it("setting created_by to oneself is allowed for a member", async () => {
    const name = await setup()
    await insert(stack, users.member, name, { body: "x", created_by: users.member.user.id })
    expect((await rowOf(name, "x")).created_by).toBe(users.member.user.id)
  })

  it("an owner (and an admin) may write rows in another user's name; that user then owns them", async () => {
    const name = await setup()
    await insert(stack, users.owner, name, { body: "for member", created_by: users.member.user.id })
    await insert(stack, users.admin, name, { body: "by admin" })
    const row = await rowOf(name, "by admin")
    expect(row.created_by).toBe(users.admin.user.id)
    expect(await sql(stack, users.admin, `UPDATE ${name} SET created_by = $1 WHERE id = $2`, [users.member.user.id, row.id]))
      .toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(ok(await sql(stack, users.member, `SELECT body FROM ${name} ORDER BY body`))).toEqual([{ body: "by admin" }, { body: "for member" }])
  })
})

describe("sys.drop_table", () => {
  it("as owner: drops the table, its read view and all of its metadata", async () => {
    const name = fresh("doomed")
    result(await createTable(stack, users.owner, name, [{ name: "a", label: "A" }]))
    expect(result(await dropTable(name))).toEqual({ schema: "public", table: name, view: `${name}_v` })
    expect(await exists(stack, `public.${name}`)).toBe(false)
    expect(await exists(stack, `public.${name}_v`)).toBe(false)
    for (const table of ["sys.table_metadata", "sys.column_metadata", "sys.table_permissions"]) {
      expect(await admin(stack, `SELECT 1 FROM ${table} WHERE table_name = $1`, [name])).toEqual([])
    }
  })

  it("as admin: drops the table", async () => {
    const name = fresh("doomed")
    result(await createTable(stack, users.owner, name, []))
    expect(result(await dropTable(name, users.admin))).toMatchObject({ table: name })
    expect(await exists(stack, `public.${name}`)).toBe(false)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, and the table stays", async (role) => {
    const name = fresh("kept")
    result(await createTable(stack, users.owner, name, []))
    expectForbidden(await dropTable(name, users[role]))
    expect(await exists(stack, `public.${name}`)).toBe(true)
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it("an unknown table → 400 P0001", async () => {
    expectDbError(await dropTable("no_such_table"), 400, "P0001", /no managed table 'no_such_table'/)
  })

  it("a table the database administrator made (not managed) → 400 P0001, and it stays", async () => {
    const name = fresh("legacy")
    await admin(stack, `CREATE TABLE public.${name} (id int)`)
    expectDbError(await dropTable(name), 400, "P0001", /no managed table/)
    expect(await exists(stack, `public.${name}`)).toBe(true)
  })

  it("a read view's name is not a table → 400 P0001", async () => {
    const name = fresh("viewed")
    result(await createTable(stack, users.owner, name, []))
    expectDbError(await dropTable(`${name}_v`), 400, "P0001")
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it("a table another table references → 400 2BP01 naming the dependent; after the dependent is dropped it works", async () => {
    const parent = fresh("parent")
    const child = fresh("child")
    result(await createTable(stack, users.owner, parent, [{ name: "title" }]))
    result(await createTable(stack, users.owner, child, [{ name: "parent", type: "reference", references: parent }]))
    const blocked = await dropTable(parent)
    expectDbError(blocked, 400, "2BP01", new RegExp(`cannot drop table ${parent}: referenced by .*${child}`))
    expect(await exists(stack, `public.${parent}`)).toBe(true)
    expect(await exists(stack, `public.${parent}_v`)).toBe(true)
    expect(await admin(stack, "SELECT 1 AS x FROM sys.table_metadata WHERE table_name = $1", [parent])).toEqual([{ x: 1 }])

    result(await dropTable(child))
    expect(result(await dropTable(parent))).toMatchObject({ table: parent })
    expect(await exists(stack, `public.${parent}`)).toBe(false)
  })

  it("a table that references itself can be dropped", async () => {
    const name = fresh("tree")
    result(await createTable(stack, users.owner, name, [{ name: "title" }]))
    result(await call(stack, users.owner, "sys.alter_table($1, $2::jsonb)", [name, [{ op: "add_column", column: { name: "parent", type: "reference", references: name } }]]))
    expect(result(await dropTable(name))).toMatchObject({ table: name })
    expect(await exists(stack, `public.${name}`)).toBe(false)
  })
})
