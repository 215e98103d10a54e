/**
 * sys.alter_table (spec §4.4): each operation's effect on the table, on the read view, on the UI
 * metadata, and on what POST / answers next (the introspection cache follows NOTIFY
 * plinth_catalog, so it is polled for up to 2 s); and the operation errors.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import {
  admin,
  alterTable,
  call,
  type ColumnMeta,
  createTable,
  exists,
  expectDbError,
  expectForbidden,
  fresh,
  insert,
  type Introspection,
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

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

interface DbColumn {
  readonly name: string
  readonly type: string
  readonly notnull: boolean
  readonly default: string | null
}

/** The table's own columns (after id, created_at, updated_at, created_by), as the catalog has them. */
const dbColumns = (table: string) =>
  admin<DbColumn>(
    stack,
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS notnull, pg_get_expr(d.adbin, d.adrelid) AS default
     FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = $1::regclass AND a.attnum > 4 AND NOT a.attisdropped ORDER BY a.attnum`,
    [`public.${table}`]
  )

const viewColumns = async (view: string) =>
  (await admin<{ name: string }>(
    stack,
    "SELECT attname AS name FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 ORDER BY attnum",
    [`public.${view}`]
  )).map((c) => c.name)

const constraints = async (table: string) =>
  (await admin<{ conname: string; def: string }>(
    stack,
    "SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype IN ('c', 'f', 'u') ORDER BY conname",
    [`public.${table}`]
  )).map((c) => `${c.conname}: ${c.def}`)

const metadata = (table: string) =>
  admin<{ column_name: string; column_type: string; display_type: string; label: string | null; options: unknown; reference_table: string | null }>(
    stack,
    `SELECT column_name, column_type, display_type, label, options, reference_table FROM sys.column_metadata
     WHERE schema_name = 'public' AND table_name = $1 ORDER BY position`,
    [table]
  )

const displayColumns = async (table: string) =>
  (await admin<{ display_columns: ReadonlyArray<string> }>(stack, "SELECT display_columns FROM sys.table_metadata WHERE table_name = $1", [table]))[0]
    ?.display_columns

const colsOf = (schema: Introspection, table: string) => relation(schema, table)?.cols.map((c) => c.name) ?? []
const metaOf = (schema: Introspection, table: string, column: string): ColumnMeta | undefined => schema.column_metadata[table]?.[column]

/** The next POST / for the owner that satisfies `probe` (within 2 s). */
const seen = (probe: (schema: Introspection) => boolean) => introspectUntil(stack, users.owner, probe)

const STATUS_OPTIONS = [
  { value: "open", label: "Open", color: "green" },
  { value: "done", label: "Done", color: "grey" }
]

/** A table with a text, an integer, an email and a choice column. */
const makeTable = async () => {
  const name = fresh("tasks")
  result(await createTable(stack, users.owner, name, [
    { name: "title", type: "text" },
    { name: "qty", type: "integer" },
    { name: "mail", type: "email" },
    { name: "status", type: "choice", options: STATUS_OPTIONS }
  ]))
  return name
}

describe("add_column", () => {
  it("adds the column, its metadata, its place in the read view and in introspection", async () => {
    const name = await makeTable()
    const response = await alterTable(stack, users.owner, name, [
      { op: "add_column", column: { name: "score", type: "integer", default: 5, label: "Score" } }
    ])
    expect(result(response)).toEqual({ schema: "public", table: name, view: `${name}_v` })
    expect((await dbColumns(name)).at(-1)).toEqual({ name: "score", type: "integer", notnull: false, default: "5" })
    expect((await metadata(name)).at(-1)).toEqual({
      column_name: "score",
      column_type: "integer",
      display_type: "number",
      label: "Score",
      options: null,
      reference_table: null
    })
    expect(await viewColumns(`${name}_v`)).toContain("score")
    await insert(stack, users.member, name, { title: "x" })
    expect(ok(await sql(stack, users.member, `SELECT score FROM ${name}_v`))).toEqual([{ score: 5 }])

    const schema = await seen((s) => colsOf(s, name).includes("score"))
    expect(relation(schema, name)!.cols.find((c) => c.name === "score")).toMatchObject({ type: "integer", nullable: true, has_default: true })
    expect(colsOf(schema, `${name}_v`)).toContain("score")
    expect(metaOf(schema, name, "score")).toEqual({ display_type: "number", label: "Score", column_type: "integer" })
  })

  it("a required column on a table that has rows → 409 23502, and nothing changes", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { title: "existing" })
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "must", required: true } }]), 409, "23502")
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "qty", "mail", "status"])
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it("a required column with a default on a table that has rows is filled with the default", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { title: "existing" })
    result(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "flag", type: "boolean", required: true, default: false } }]))
    expect(await admin(stack, `SELECT flag FROM public.${name}`)).toEqual([{ flag: false }])
  })

  it("an invalid column spec → 400 P0001 (reserved name, unknown type)", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "created_by" } }]), 400, "P0001", /added to every managed table/)
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "x", type: "float" } }]), 400, "P0001", /unknown column type/)
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column" }]), 400, "P0001", /column name null/)
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "title" } }]), 400, "42701")
  })
})

describe("drop_column", () => {
  it("drops the column, its metadata, its display-column entry, and it leaves the read view and introspection", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display_columns", columns: ["title", "qty"] }]))
    expect(result(await alterTable(stack, users.owner, name, [{ op: "drop_column", name: "qty" }]))).toMatchObject({ table: name })
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "mail", "status"])
    expect((await metadata(name)).map((c) => c.column_name)).toEqual(["title", "mail", "status"])
    expect(await displayColumns(name)).toEqual(["title"])
    expect(await viewColumns(`${name}_v`)).not.toContain("qty")

    const schema = await seen((s) => !colsOf(s, name).includes("qty") && colsOf(s, name).includes("title"))
    expect(colsOf(schema, `${name}_v`)).not.toContain("qty")
    expect(metaOf(schema, name, "qty")).toBeUndefined()
    expect(schema.table_metadata[name]?.display_columns).toEqual(["title"])
  })

  it.each(["id", "created_by", "nope"])("%s (not a column of the spec) → 400 P0001", async (column) => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "drop_column", name: column }]), 400, "P0001", /needs "name": a column of/)
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it("a column shown in another table's <ref>_display can be dropped; the display falls back to the first text column", async () => {
    const parent = fresh("clients")
    const child = fresh("invoices")
    result(await createTable(stack, users.owner, parent, [{ name: "name" }, { name: "nick" }]))
    result(await createTable(stack, users.owner, child, [{ name: "client", type: "reference", references: parent }]))
    result(await alterTable(stack, users.owner, parent, [{ op: "set_display_columns", columns: ["nick"] }]))
    expect(result(await alterTable(stack, users.owner, parent, [{ op: "drop_column", name: "nick" }]))).toMatchObject({ table: parent })
    expect(await viewColumns(`${child}_v`)).toContain("client_display")
    expect((await dbColumns(parent)).map((c) => c.name)).toEqual(["name"])
  })
})

describe("rename_column", () => {
  it("renames the column, its constraint, its metadata and display-column entry; the CHECK still holds", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display_columns", columns: ["mail", "title"] }]))
    result(await alterTable(stack, users.owner, name, [{ op: "rename_column", name: "mail", to: "email_address" }]))
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "qty", "email_address", "status"])
    expect(await constraints(name)).toContain("email_address_kind: CHECK ((email_address ~ '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$'::text))")
    expect((await metadata(name)).map((c) => c.column_name)).toEqual(["title", "qty", "email_address", "status"])
    expect(await displayColumns(name)).toEqual(["email_address", "title"])
    expect(await viewColumns(`${name}_v`)).toContain("email_address")
    expectDbError(await sql(stack, users.owner, `INSERT INTO ${name} (email_address) VALUES ('nope')`), 409, "23514", "email_address_kind")

    const schema = await seen((s) => colsOf(s, name).includes("email_address"))
    expect(colsOf(schema, name)).not.toContain("mail")
    expect(metaOf(schema, name, "email_address")).toEqual({ display_type: "email", column_type: "email" })
    expect(schema.table_metadata[name]?.display_columns).toEqual(["email_address", "title"])
  })

  it("renaming a reference renames its foreign key and its _display column", async () => {
    const parent = fresh("teams")
    const child = fresh("players")
    result(await createTable(stack, users.owner, parent, [{ name: "name" }]))
    result(await createTable(stack, users.owner, child, [{ name: "team", type: "reference", references: parent }]))
    result(await alterTable(stack, users.owner, child, [{ op: "rename_column", name: "team", to: "squad" }]))
    expect(await constraints(child)).toEqual([`squad_ref: FOREIGN KEY (squad) REFERENCES ${parent}(id) ON DELETE RESTRICT`])
    expect(await viewColumns(`${child}_v`)).toEqual(["id", "created_at", "updated_at", "created_by", "squad", "squad_display"])
  })

  it.each([
    ["a reserved name", "id", /reserved by Plinth/],
    ["an invalid name", "Bad Name", /must start with a lower-case letter/],
    ["a reserved word", "select", /reserved word/]
  ])("to %s → 400 P0001", async (_label, to, message) => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "rename_column", name: "title", to }]), 400, "P0001", message)
    expect((await dbColumns(name))[0]!.name).toBe("title")
  })

  it("to an existing column → 400 42701", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "rename_column", name: "title", to: "qty" }]), 400, "42701")
  })
})

describe("change_type", () => {
  it("converts the values; metadata and introspection follow", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { title: "42" })
    result(await alterTable(stack, users.owner, name, [{ op: "change_type", name: "title", type: "integer" }]))
    expect((await dbColumns(name))[0]).toMatchObject({ name: "title", type: "integer" })
    expect(await admin(stack, `SELECT title FROM public.${name}`)).toEqual([{ title: 42 }])
    expect((await metadata(name))[0]).toMatchObject({ column_type: "integer", display_type: "number" })

    const schema = await seen((s) => relation(s, name)?.cols.find((c) => c.name === "title")?.type === "integer")
    expect(metaOf(schema, name, "title")).toEqual({ display_type: "number", column_type: "integer" })
    expect(relation(schema, `${name}_v`)!.cols.find((c) => c.name === "title")?.type).toBe("integer")
  })

  it("to currency, and from email to text (the CHECK goes)", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [
      { op: "change_type", name: "qty", type: "currency" },
      { op: "change_type", name: "mail", type: "text" }
    ]))
    expect((await dbColumns(name)).slice(1, 3)).toEqual([
      { name: "qty", type: "numeric(14,2)", notnull: false, default: null },
      { name: "mail", type: "text", notnull: false, default: null }
    ])
    expect(await constraints(name)).not.toContainEqual(expect.stringContaining("mail_kind"))
    await insert(stack, users.owner, name, { qty: "12.345", mail: "not an email" })
    expect(await admin(stack, `SELECT qty::text FROM public.${name}`)).toEqual([{ qty: "12.35" }])
    expect((await metadata(name)).slice(1, 3).map((m) => [m.column_type, m.display_type])).toEqual([["currency", "currency"], ["text", "text"]])
  })

  it("to choice with options adds the CHECK and the options", async () => {
    const name = await makeTable()
    const options = [{ value: "s", label: "Small", color: null }, { value: "l", label: "Large", color: "red" }]
    result(await alterTable(stack, users.owner, name, [{ op: "change_type", name: "title", type: "choice", options }]))
    expect((await metadata(name))[0]).toMatchObject({ column_type: "choice", display_type: "choice", options })
    await insert(stack, users.owner, name, { title: "s" })
    expectDbError(await sql(stack, users.owner, `INSERT INTO ${name} (title) VALUES ('m')`), 409, "23514", "title_kind")
  })

  it("values that do not convert → 400 (22P02), and the column keeps its type", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { title: "not a number" })
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "change_type", name: "title", type: "integer" }]), 400, "22P02")
    expect((await dbColumns(name))[0]).toMatchObject({ type: "text" })
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it.each([
    ["reference", /use add_reference/],
    ["float", /cannot change title to type 'float'/],
    [null, /cannot change title to type null/]
  ])("to %s → 400 P0001", async (type, message) => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "change_type", name: "title", type }]), 400, "P0001", message)
  })

  it("to choice without options → 400 P0001", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "change_type", name: "title", type: "choice" }]), 400, "P0001", /needs options/)
  })

  it("a column shown in another table's <ref>_display can change type", async () => {
    const parent = fresh("shops")
    const child = fresh("visits")
    result(await createTable(stack, users.owner, parent, [{ name: "code", type: "integer" }]))
    result(await createTable(stack, users.owner, child, [{ name: "shop", type: "reference", references: parent }]))
    result(await alterTable(stack, users.owner, parent, [{ op: "set_display_columns", columns: ["code"] }]))
    expect(result(await alterTable(stack, users.owner, parent, [{ op: "change_type", name: "code", type: "bigint" }]))).toMatchObject({ table: parent })
    expect((await dbColumns(parent))[0]).toMatchObject({ type: "bigint" })
  })
})

describe("set_required", () => {
  it("true sets NOT NULL (a missing value is then 409 23502), false drops it; introspection follows", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_required", name: "title", required: true }]))
    expect((await dbColumns(name))[0]).toMatchObject({ name: "title", notnull: true })
    expectDbError(await sql(stack, users.owner, `INSERT INTO ${name} (qty) VALUES (1)`), 409, "23502", "title")
    await seen((s) => relation(s, name)?.cols.find((c) => c.name === "title")?.nullable === false)

    result(await alterTable(stack, users.owner, name, [{ op: "set_required", name: "title", required: false }]))
    expect((await dbColumns(name))[0]).toMatchObject({ name: "title", notnull: false })
    await insert(stack, users.owner, name, { qty: 1 })
    await seen((s) => relation(s, name)?.cols.find((c) => c.name === "title")?.nullable === true)
  })

  it("true on a column that has NULLs → 409 23502, and it stays optional", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { qty: 1 })
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_required", name: "title", required: true }]), 409, "23502")
    expect((await dbColumns(name))[0]).toMatchObject({ notnull: false })
  })
})

describe("set_default", () => {
  it("sets a default used by the next INSERT; null drops it; introspection follows", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [
      { op: "set_default", name: "status", default: "open" },
      { op: "set_default", name: "qty", default: 7 }
    ]))
    expect((await dbColumns(name)).map((c) => [c.name, c.default])).toEqual([
      ["title", null],
      ["qty", "7"],
      ["mail", null],
      ["status", "'open'::text"]
    ])
    await insert(stack, users.member, name, { title: "defaults" })
    expect(ok(await sql(stack, users.member, `SELECT qty, status FROM ${name}_v`))).toEqual([{ qty: 7, status: "open" }])
    await seen((s) => relation(s, name)?.cols.find((c) => c.name === "qty")?.has_default === true)

    result(await alterTable(stack, users.owner, name, [{ op: "set_default", name: "qty", default: null }]))
    expect((await dbColumns(name))[1]).toMatchObject({ name: "qty", default: null })
    await seen((s) => relation(s, name)?.cols.find((c) => c.name === "qty")?.has_default === false)
  })

  it("a default of the wrong type → 400 (22P02)", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_default", name: "qty", default: "many" }]), 400, "22P02")
  })
})

describe("set_display", () => {
  it("sets label and display_type in metadata and introspection, leaving the SQL type alone", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "qty", label: "Quantity", display_type: "currency" }]))
    expect((await metadata(name))[1]).toMatchObject({ column_name: "qty", column_type: "integer", display_type: "currency", label: "Quantity" })
    expect((await dbColumns(name))[1]).toMatchObject({ type: "integer" })
    const schema = await seen((s) => metaOf(s, name, "qty")?.label === "Quantity")
    expect(metaOf(schema, name, "qty")).toEqual({ display_type: "currency", label: "Quantity", column_type: "integer" })
  })

  it("new choice options replace the CHECK: a new value is accepted, a removed one refused (409 23514)", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { status: "open" })
    const options = [{ value: "open", label: "Open", color: "green" }, { value: "blocked", label: "Blocked", color: "red" }]
    result(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "status", options }]))
    await insert(stack, users.owner, name, { status: "blocked" })
    expectDbError(await sql(stack, users.owner, `INSERT INTO ${name} (status) VALUES ('done')`), 409, "23514", "status_kind")
    expect((await metadata(name))[3]).toMatchObject({ options })
    const schema = await seen((s) => metaOf(s, name, "status")?.options?.[1]?.value === "blocked")
    expect(metaOf(schema, name, "status")).toMatchObject({ display_type: "choice", options })
  })

  it("options that existing rows do not satisfy → 409 23514, and the old options stay", async () => {
    const name = await makeTable()
    await insert(stack, users.owner, name, { status: "done" })
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "status", options: [{ value: "open" }] }]), 409, "23514")
    expect((await metadata(name))[3]).toMatchObject({ options: STATUS_OPTIONS })
  })

  it("options on a non-choice column are ignored; a label can be cleared with null", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "title", label: "T", options: [{ value: "a" }] }]))
    expect((await metadata(name))[0]).toMatchObject({ label: "T", options: null })
    expect(await constraints(name)).not.toContainEqual(expect.stringContaining("title_kind"))
    result(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "title", label: null }]))
    expect((await metadata(name))[0]).toMatchObject({ label: null })
  })
})

describe("set_display_columns", () => {
  it("sets table_metadata.display_columns; introspection and the referencing read view's _display follow", async () => {
    const parent = fresh("people")
    const child = fresh("letters")
    result(await createTable(stack, users.owner, parent, [{ name: "first", type: "text" }, { name: "last", type: "text" }]))
    result(await createTable(stack, users.owner, child, [{ name: "author", type: "reference", references: parent }]))
    await insert(stack, users.owner, parent, { first: "Ada", last: "Lovelace" })
    const [person] = await admin<{ id: string }>(stack, `SELECT id::text FROM public.${parent}`)
    await insert(stack, users.owner, child, { author: person!.id })
    const display = async () => ok(await sql<{ author_display: string }>(stack, users.owner, `SELECT author_display FROM ${child}_v`))[0]?.author_display
    // Without display columns: the referenced table's first text column.
    expect(await display()).toBe("Ada")

    result(await alterTable(stack, users.owner, parent, [{ op: "set_display_columns", columns: ["last", "first"] }]))
    expect(await displayColumns(parent)).toEqual(["last", "first"])
    expect(await display()).toBe("Lovelace Ada")
    const schema = await seen((s) => s.table_metadata[parent]?.display_columns.length === 2)
    expect(schema.table_metadata[parent]).toEqual({ display_columns: ["last", "first"], description: "" })

    result(await alterTable(stack, users.owner, parent, [{ op: "set_display_columns", columns: ["id"] }]))
    expect(await display()).toBe(person!.id)
  })

  it.each([
    ["an unknown column", ["nope"]],
    ["a system column other than id", ["created_at"]],
    ["not an array", "title"]
  ])("%s → 400 P0001, and the display columns stay", async (_label, columns) => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display_columns", columns: ["title"] }]))
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_display_columns", columns }]), 400, "P0001", /display columns must be columns of/)
    expect(await displayColumns(name)).toEqual(["title"])
  })

  it("without columns → 400 P0001, and the display columns stay", async () => {
    const name = await makeTable()
    result(await alterTable(stack, users.owner, name, [{ op: "set_display_columns", columns: ["title"] }]))
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_display_columns" }]), 400, "P0001")
    expect(await displayColumns(name)).toEqual(["title"])
  })
})

describe("add_reference and drop_reference", () => {
  it("add_reference turns a uuid column into a foreign key with a _display column; drop_reference undoes it and keeps the values", async () => {
    const parent = fresh("depts")
    const child = fresh("staffers")
    result(await createTable(stack, users.owner, parent, [{ name: "label" }]))
    result(await createTable(stack, users.owner, child, [{ name: "dept", type: "uuid" }]))
    await insert(stack, users.owner, parent, { label: "Sales" })
    const [dept] = await admin<{ id: string }>(stack, `SELECT id::text FROM public.${parent}`)

    result(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "dept", references: parent }]))
    expect(await constraints(child)).toEqual([`dept_ref: FOREIGN KEY (dept) REFERENCES ${parent}(id) ON DELETE RESTRICT`])
    expect((await metadata(child))[0]).toMatchObject({ column_name: "dept", column_type: "reference", display_type: "reference", reference_table: parent })
    expect(await viewColumns(`${child}_v`)).toContain("dept_display")
    await insert(stack, users.owner, child, { dept: dept!.id })
    expect(ok(await sql(stack, users.owner, `SELECT dept_display FROM ${child}_v`))).toEqual([{ dept_display: "Sales" }])
    expectDbError(await sql(stack, users.owner, `INSERT INTO ${child} (dept) VALUES (gen_random_uuid())`), 409, "23503", "dept_ref")
    // ON DELETE RESTRICT: a referenced row stays (23001 restrict_violation).
    expectDbError(await sql(stack, users.owner, `DELETE FROM ${parent}`), 409, "23001", "dept_ref")

    let schema = await seen((s) => s.keys.some((k) => k.source_table === child && k.constraint_type === "FOREIGN KEY"))
    expect(schema.keys.find((k) => k.source_table === child && k.constraint_type === "FOREIGN KEY")).toEqual({
      constraint_name: "dept_ref",
      constraint_type: "FOREIGN KEY",
      source_schema: "public",
      source_table: child,
      source_columns: ["dept"],
      target_schema: "public",
      target_table: parent,
      target_columns: ["id"]
    })
    expect(metaOf(schema, child, "dept")).toEqual({ display_type: "reference", column_type: "reference", reference_table: parent })
    expect(colsOf(schema, `${child}_v`)).toContain("dept_display")

    result(await alterTable(stack, users.owner, child, [{ op: "drop_reference", name: "dept" }]))
    expect(await constraints(child)).toEqual([])
    expect((await metadata(child))[0]).toMatchObject({ column_type: "uuid", display_type: "text", reference_table: null })
    expect(await viewColumns(`${child}_v`)).not.toContain("dept_display")
    expect(await admin(stack, `SELECT dept::text FROM public.${child}`)).toEqual([{ dept: dept!.id }])
    await insert(stack, users.owner, child, { dept: "00000000-0000-4000-8000-000000000000" })

    schema = await seen((s) => !s.keys.some((k) => k.source_table === child && k.constraint_type === "FOREIGN KEY"))
    expect(metaOf(schema, child, "dept")).toEqual({ display_type: "text", column_type: "uuid" })
    expect(colsOf(schema, `${child}_v`)).not.toContain("dept_display")
    // And now the parent can be dropped.
    result(await call(stack, users.owner, "sys.drop_table($1)", [parent]))
  })

  it("add_reference on a text column converts it to uuid", async () => {
    const parent = fresh("groups")
    const child = fresh("members")
    result(await createTable(stack, users.owner, parent, [{ name: "label" }]))
    result(await createTable(stack, users.owner, child, [{ name: "grp", type: "text" }]))
    result(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "grp", references: parent }]))
    expect((await dbColumns(child))[0]).toMatchObject({ name: "grp", type: "uuid" })
  })

  it("add_reference errors: an unknown table → 400 P0001; values that are no ids → 400 22P02; dangling ids → 409 23503", async () => {
    const parent = fresh("things")
    const child = fresh("links")
    result(await createTable(stack, users.owner, parent, [{ name: "label" }]))
    result(await createTable(stack, users.owner, child, [{ name: "ref", type: "text" }, { name: "other", type: "uuid" }]))
    expectDbError(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "ref", references: "nowhere" }]), 400, "P0001", /no managed table 'nowhere'/)
    expectDbError(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "ref" }]), 400, "P0001", /referenced table name null/)
    await insert(stack, users.owner, child, { ref: "not-a-uuid", other: "00000000-0000-4000-8000-000000000000" })
    expectDbError(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "ref", references: parent }]), 400, "22P02")
    expectDbError(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "other", references: parent }]), 409, "23503")
    expect(await constraints(child)).toEqual([])
    expect((await metadata(child)).map((m) => m.column_type)).toEqual(["text", "uuid"])
  })
})

describe("errors of sys.alter_table", () => {
  it("as admin: alters the table", async () => {
    const name = await makeTable()
    expect(result(await alterTable(stack, users.admin, name, [{ op: "add_column", column: { name: "by_admin" } }]))).toMatchObject({ table: name })
    expect((await dbColumns(name)).map((c) => c.name)).toContain("by_admin")
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, and nothing changes", async (role) => {
    const name = await makeTable()
    expectForbidden(await alterTable(stack, users[role], name, [{ op: "add_column", column: { name: "sneaky" } }, { op: "drop_column", name: "qty" }]))
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "qty", "mail", "status"])
    expect((await metadata(name)).map((c) => c.column_name)).toEqual(["title", "qty", "mail", "status"])
  })

  it("an unknown table → 400 P0001", async () => {
    expectDbError(await alterTable(stack, users.owner, "no_such_table", [{ op: "drop_column", name: "x" }]), 400, "P0001", /no managed table 'no_such_table'/)
  })

  it("an unknown operation → 400 P0001 naming the operations", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "explode", name: "title" }]), 400, "P0001", /unknown operation 'explode'/)
  })

  it("operations that are not an array → 400 P0001", async () => {
    const name = await makeTable()
    expectDbError(await call(stack, users.owner, "sys.alter_table($1, $2::jsonb)", [name, { op: "drop_column", name: "qty" }]), 400, "P0001", /operations must be a JSON array/)
    expect((await dbColumns(name)).map((c) => c.name)).toContain("qty")
  })

  it("operations run all or nothing: a failing last operation undoes the earlier ones", async () => {
    const name = await makeTable()
    expectDbError(await alterTable(stack, users.owner, name, [
      { op: "add_column", column: { name: "extra" } },
      { op: "drop_column", name: "qty" },
      { op: "rename_column", name: "nope", to: "x" }
    ]), 400, "P0001")
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "qty", "mail", "status"])
    expect((await metadata(name)).map((c) => c.column_name)).toEqual(["title", "qty", "mail", "status"])
    expect(await exists(stack, `public.${name}_v`)).toBe(true)
  })

  it("an empty list of operations is accepted and changes nothing", async () => {
    const name = await makeTable()
    expect(result(await alterTable(stack, users.owner, name, []))).toEqual({ schema: "public", table: name, view: `${name}_v` })
    expect((await dbColumns(name)).map((c) => c.name)).toEqual(["title", "qty", "mail", "status"])
  })
})
