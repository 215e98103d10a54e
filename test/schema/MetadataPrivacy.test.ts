/**
 * Issue #19, finding 11 (metadata): sys.table_metadata and sys.column_metadata show a role only the
 * rows of tables it has some privilege on, also to a WHERE that raises an error naming its value;
 * introspection and the sys functions go on working for every role.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import { createTable, fresh, introspect, ok, result, signInAll, sql, call, type Users } from "./helpers.ts"

let stack: AuthStack
let users: Users
let hidden: string
let shown: string

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
  hidden = fresh("salaries_secret")
  shown = fresh("notes_shared")
  result(await createTable(stack, users.owner, hidden, [{ name: "bonus_amount", type: "integer", label: "Bonus" }]))
  result(await createTable(stack, users.owner, shown, [{ name: "body", type: "text", label: "Body" }]))
  // Members may do nothing with the hidden table: no privilege on it at all.
  result(await call(stack, users.owner, "sys.set_table_permissions($1, 'member', 'none', 'none', 'none')", [hidden]))
})
afterAll(() => stack?.close())

const everything = (response: { readonly body: unknown }) => JSON.stringify(response.body)

describe("attack: a member reads the names and columns of tables they cannot see from the metadata tables", () => {
  it("sys.table_metadata and sys.column_metadata hold no row of a table the member has no privilege on", async () => {
    const tables = ok(await sql<{ table_name: string }>(stack, users.member, "SELECT table_name FROM sys.table_metadata"))
    expect(tables.map((row) => row.table_name)).toContain(shown)
    expect(tables.map((row) => row.table_name)).not.toContain(hidden)
    const columns = ok(await sql<{ table_name: string; column_name: string }>(stack, users.member, "SELECT table_name, column_name FROM sys.column_metadata"))
    expect(columns).toContainEqual({ table_name: shown, column_name: "body" })
    expect(columns.map((row) => row.table_name)).not.toContain(hidden)
  })

  it("nor does an error message of a condition on them name it", async () => {
    for (
      const statement of [
        "SELECT * FROM sys.table_metadata WHERE table_name::int > 0",
        "SELECT * FROM sys.column_metadata WHERE (table_name || ':' || column_name)::int > 0",
        `SELECT * FROM sys.column_metadata WHERE table_name <> '${shown}' AND (table_name || ':' || column_name)::int > 0`,
        "SELECT 1 WHERE (SELECT string_agg(table_name, ',') FROM sys.table_metadata)::int > 0"
      ]
    ) {
      const response = await sql(stack, users.member, statement)
      expect(everything(response), statement).not.toContain(hidden)
      expect(everything(response), statement).not.toContain("bonus_amount")
    }
  })

  it("staff, admins and owners, who have privileges on both tables, see both", async () => {
    for (const who of [users.staff, users.admin, users.owner]) {
      const tables = ok(await sql<{ table_name: string }>(stack, who, "SELECT table_name FROM sys.table_metadata"))
      expect(tables.map((row) => row.table_name)).toEqual(expect.arrayContaining([hidden, shown]))
    }
  })
})

describe("introspection and the sys functions still read the metadata", () => {
  it("introspection gives the member the metadata of the table it may use, and the owner of both", async () => {
    const asMember = await introspect(stack, users.member)
    expect(asMember.column_metadata[shown]).toEqual({ body: { display_type: "text", label: "Body", column_type: "text" } })
    expect(asMember.column_metadata[hidden]).toBeUndefined()
    expect(asMember.table_metadata[hidden]).toBeUndefined()
    const asOwner = await introspect(stack, users.owner)
    expect(asOwner.column_metadata[hidden]).toEqual({ bonus_amount: { display_type: "number", label: "Bonus", column_type: "integer" } })
  })

  it("an admin alters the hidden table and adds a reference to it: the sys functions see all metadata", async () => {
    result(await call(stack, users.admin, "sys.alter_table($1, $2::jsonb)", [hidden, [{ op: "add_column", column: { name: "note", type: "text" } }]]))
    result(await call(stack, users.admin, "sys.alter_table($1, $2::jsonb)", [shown, [{ op: "add_column", column: { name: "salary", type: "reference", references: hidden } }]]))
    const asOwner = await introspect(stack, users.owner)
    expect(Object.keys(asOwner.column_metadata[hidden] ?? {})).toEqual(expect.arrayContaining(["bonus_amount", "note"]))
  })
})
