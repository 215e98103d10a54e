/**
 * The trigram indexes of display columns (issue #25, the reference picker on large tables): each
 * text display column of a managed table has one, made by create_table, kept in step by
 * alter_table (display columns set, a first text column added, a type changed, a column dropped),
 * and pg_trgm sits in a schema no app role may use.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import { admin, alterTable, createTable, expectDbError, fresh, result, signInAll, sql, type Users } from "./helpers.ts"

let stack: AuthStack
let users: Users

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

/** The columns of `table` with a trigram index, and the indexes' names. */
const trigramIndexes = async (table: string) =>
  (await admin<{ column: string; name: string }>(
    stack,
    "SELECT column_name AS column, index_name AS name FROM sys.trigram_indexes('public', $1, NULL) ORDER BY 1",
    [table]
  ))

const indexedColumns = async (table: string) => (await trigramIndexes(table)).map((index) => index.column)

describe("trigram indexes on display columns", () => {
  it("create_table indexes the first text column, named by sys.display_index_name", async () => {
    const table = fresh("people")
    result(await createTable(stack, users.owner, table, [{ name: "age", type: "integer" }, { name: "name", type: "text" }, { name: "city" }]))
    const [expected] = await admin<{ name: string }>(stack, "SELECT sys.display_index_name($1, 'name') AS name", [table])
    expect(await trigramIndexes(table)).toEqual([{ column: "name", name: expected!.name }])
    const [definition] = await admin<{ def: string }>(stack, "SELECT pg_get_indexdef(($1 || '.' || $2)::regclass) AS def", ["public", expected!.name])
    expect(definition!.def).toContain("USING gin (name extensions.gin_trgm_ops)")
  })

  it("follows the display columns: set, changed in type, dropped, or a first text column added", async () => {
    const table = fresh("things")
    result(await createTable(stack, users.owner, table, [{ name: "n", type: "integer" }]))
    expect(await indexedColumns(table)).toEqual([])
    result(await alterTable(stack, users.owner, table, [{ op: "add_column", column: { name: "label", type: "email" } }]))
    expect(await indexedColumns(table)).toEqual(["label"])
    result(await alterTable(stack, users.owner, table, [
      { op: "add_column", column: { name: "code", type: "text" } },
      { op: "add_column", column: { name: "kind", type: "choice", options: [{ value: "a" }, { value: "b" }] } },
      { op: "set_display_columns", columns: ["code", "kind", "n"] }
    ]))
    // Only text columns take a trigram index; `label` is no display column any more.
    expect(await indexedColumns(table)).toEqual(["code", "kind"])
    // A display column's type can still change: its index goes first.
    result(await alterTable(stack, users.owner, table, [{ op: "change_type", name: "code", type: "integer" }]))
    expect(await indexedColumns(table)).toEqual(["kind"])
    // Made a reference (a uuid), likewise.
    result(await alterTable(stack, users.owner, table, [
      { op: "add_column", column: { name: "parent", type: "text" } },
      { op: "set_display_columns", columns: ["kind", "parent"] }
    ]))
    expect(await indexedColumns(table)).toEqual(["kind", "parent"])
    result(await alterTable(stack, users.owner, table, [{ op: "add_reference", name: "parent", references: table }]))
    expect(await indexedColumns(table)).toEqual(["kind"])
    result(await alterTable(stack, users.owner, table, [{ op: "rename_column", name: "kind", to: "sort" }]))
    expect(await indexedColumns(table)).toEqual(["sort"])
    result(await alterTable(stack, users.owner, table, [{ op: "drop_column", name: "sort" }]))
    expect(await indexedColumns(table)).toEqual([])
    // None set: the first text, email or choice column again.
    result(await alterTable(stack, users.owner, table, [{ op: "set_display_columns", columns: [] }]))
    expect(await indexedColumns(table)).toEqual(["label"])
  })

  it("pg_trgm is in the extensions schema, owned by no app role, out of the app roles' reach", async () => {
    const [extension] = await admin<{ schema: string; owner_is_app_role: boolean }>(
      stack,
      `SELECT n.nspname AS schema, r.rolname IN ('owner', 'admin', 'staff', 'member', 'anon', 'authenticator') AS owner_is_app_role
       FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace JOIN pg_roles r ON r.oid = e.extowner WHERE e.extname = 'pg_trgm'`
    )
    expect(extension).toEqual({ schema: "extensions", owner_is_app_role: false })
    for (const role of ["owner", "member"] as const) {
      const refused = await sql(stack, users[role], "SELECT extensions.similarity('a', 'b') AS s")
      expectDbError(refused, 403, "42501", "permission denied for schema extensions")
    }
    // Unqualified, it is not on the app roles' search path either.
    expect((await sql(stack, users.owner, "SELECT similarity('a', 'b') AS s")).status).toBe(400)
  })

  it("its operators, its settings and its operator classes are out of reach too", async () => {
    expectDbError(await sql(stack, users.member, "SELECT 'abc' OPERATOR(extensions.%) 'abd' AS s"), 403, "42501", "permission denied for schema extensions")
    for (const text of [
      "SET pg_trgm.similarity_threshold = 0",
      "SELECT set_config('pg_trgm.similarity_threshold', '0', false)",
      "CREATE INDEX i ON items USING gin (name extensions.gin_trgm_ops)"
    ]) {
      expect((await sql(stack, users.owner, text)).status, text).toBe(400)
    }
  })
})
