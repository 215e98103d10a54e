/**
 * Issue #22, what a new user trips on in the managed schema: set_table_permissions in every form
 * the README promises (SQL booleans, text, JSON params), unknown keys in JSON specs refused, a
 * choice column's error naming the column and its values (development and production), Plinth's
 * own relations marked in introspection, and the indexes of created_by and reference columns.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, startAuthStack } from "../support/auth.ts"
import { type RunningService, startService } from "../support/services.ts"
import {
  admin,
  alterTable,
  asRole,
  call,
  createTable,
  type DatabaseErrorBody,
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
let production: RunningService

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
  production = await startService("main", stack.db.mainUrl, { ...stack.env, NODE_ENV: "production" })
})
afterAll(async () => {
  await production?.close()
  await stack?.close()
})

const memberLevels = async (table: string) =>
  (await admin<{ read: string; write: string; delete: string }>(stack,
    "SELECT read, write, delete FROM sys.table_permissions WHERE table_name = $1 AND role = 'member'", [table]))[0]

describe("sys.set_table_permissions accepts what the README says (#22.1)", () => {
  it.each([
    ["SQL booleans", "sys.set_table_permissions($1, 'member', true, false, false)", [], ["all", "none", "none"]],
    ["SQL booleans beside text", "sys.set_table_permissions($1, 'member', true, 'own', false)", [], ["all", "own", "none"]],
    ["SQL text", "sys.set_table_permissions($1, 'member', 'all', 'own', 'none')", [], ["all", "own", "none"]],
    ["JSON booleans in params", "sys.set_table_permissions($1, 'member', $2, $3, $4)", [true, false, "own"], ["all", "none", "own"]],
    ["JSON text in params", "sys.set_table_permissions($1, 'member', $2, $3, $4)", ["none", "all", "own"], ["none", "all", "own"]],
    ["params cast to boolean", "sys.set_table_permissions($1, 'member', $2::boolean, $3::boolean, $4::boolean)", [false, true, true], ["none", "all", "all"]]
  ] as const)("%s", async (_label, expression, params, [read, write, del]) => {
    const name = fresh("perm")
    result(await createTable(stack, users.owner, name, [{ name: "body" }]))
    const answer = result(await call(stack, users.owner, expression, [name, ...params]))
    expect(answer).toEqual({ table: name, role: "member", read, write, delete: del })
    expect(await memberLevels(name)).toEqual({ read, write, delete: del })
  })

  it.each([
    ["SQL text", "sys.set_table_permissions($1, 'member', 'all', 'everything', 'none')", []],
    ["SQL text beside a boolean", "sys.set_table_permissions($1, 'member', true, 'everything', false)", []],
    ["params", "sys.set_table_permissions($1, 'member', $2, $3, $4)", ["all", "everything", "none"]]
  ] as const)("something else (%s) → 400 saying what is accepted", async (_label, expression, params) => {
    const name = fresh("perm")
    result(await createTable(stack, users.owner, name, [{ name: "body" }]))
    expectDbError(await call(stack, users.owner, expression, [name, ...params]), 400, "P0001",
      "read, write and delete are each all, own or none, or a boolean (true = all, false = none); write is 'everything'")
    expect(await memberLevels(name)).toEqual({ read: "own", write: "own", delete: "own" })
  })
})

describe("JSON specs refuse unknown keys (#22.2)", () => {
  it("a column spec: 400 naming the key and the keys there are; no table", async () => {
    const name = fresh("keys")
    const response = await createTable(stack, users.owner, name, [{ name: "n", type: "text", require: true }])
    expectDbError(response, 400, "P0001",
      "unknown key 'require' in column n; its keys are name, type, required, unique, default, label, display_type, options, references")
    expect(ok(await sql(stack, users.owner, "SELECT to_regclass($1) IS NULL AS gone", [`public.${name}`]))).toEqual([{ gone: true }])
  })

  it("add_column's column, an operation's keys, and a choice option's keys", async () => {
    const name = fresh("keys")
    result(await createTable(stack, users.owner, name, [{ name: "n" }]))
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "m", typ: "integer" } }]), 400, "P0001",
      "unknown key 'typ' in column m")
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_required", name: "n", require: true }]), 400, "P0001",
      "unknown key 'require' in operation set_required; its keys are op, name, required")
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "n", labl: "N", display: "x" }]), 400, "P0001",
      "unknown key 'display', 'labl' in operation set_display; its keys are op, name, label, display_type, options")
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "c", type: "choice", options: [{ value: "a", colour: "red" }] } }]),
      400, "P0001", "unknown key 'colour' in an option of choice column c; its keys are value, label, color")
    expectDbError(await alterTable(stack, users.owner, name, [{ op: "rename_column", name: "n", to: "m", column: "x" }]), 400, "P0001",
      "unknown key 'column' in operation rename_column")
    expectDbError(await alterTable(stack, users.owner, name, ["drop_column"]), 400, "P0001", "each operation must be an object")
    // Nothing of those changed the table; the documented keys still work.
    const columns = await admin<{ column_name: string }>(stack,
      "SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position", [name])
    expect(columns.map((c) => c.column_name)).toEqual(["id", "created_at", "updated_at", "created_by", "n"])
    result(await alterTable(stack, users.owner, name, [
      { op: "set_required", name: "n", required: true },
      { op: "set_display", name: "n", label: "N", display_type: "text" },
      { op: "add_column", column: { name: "c", type: "choice", options: [{ value: "a", label: "A", color: "red" }] } }
    ]))
  })
})

describe("a value outside a choice column's options (#22.3)", () => {
  const tiered = async () => {
    const name = fresh("tiers")
    result(await createTable(stack, users.owner, name, [
      { name: "title" },
      { name: "tier", type: "choice", options: [{ value: "gold" }, { value: "silver" }, { value: "o'brien" }] }
    ]))
    return name
  }
  const expected = (column: string) => ({
    status: 409,
    body: {
      error: {
        message: `a value of choice column ${column} is not one of its options (check constraint ${column}_kind)`,
        code: "23514",
        detail: null,
        hint: `${column} takes 'gold', 'silver', 'o''brien'`,
        position: null
      }
    }
  })

  it("names the column and its values, in development and in production", async () => {
    const name = await tiered()
    const text = `INSERT INTO ${name} (title, tier) VALUES ('a', $1)`
    expect(await sql(stack, users.member, text, ["bronze"])).toMatchObject(expected("tier"))
    const inProduction = await post<DatabaseErrorBody>(production.url, "/sql", { sql: text, params: ["bronze"] }, { token: users.member.token })
    expect(inProduction).toMatchObject(expected("tier"))
    // An UPDATE the same; the options and NULL pass.
    await insert(stack, users.member, name, { title: "b", tier: "gold" })
    await insert(stack, users.member, name, { title: "c" })
    expect(await sql(stack, users.member, `UPDATE ${name} SET tier = 'copper' WHERE title = 'b'`)).toMatchObject(expected("tier"))
    expect(ok(await sql(stack, users.member, `SELECT title, tier FROM ${name} ORDER BY title`))).toEqual([
      { title: "b", tier: "gold" },
      { title: "c", tier: null }
    ])
  })

  it("follows a rename of the column and a change of its options", async () => {
    const name = await tiered()
    result(await alterTable(stack, users.owner, name, [{ op: "rename_column", name: "tier", to: "level" }]))
    expect(await sql(stack, users.member, `INSERT INTO ${name} (level) VALUES ('bronze')`)).toMatchObject(expected("level"))
    result(await alterTable(stack, users.owner, name, [{ op: "set_display", name: "level", options: [{ value: "bronze" }] }]))
    await insert(stack, users.member, name, { level: "bronze" })
    expect(await sql(stack, users.member, `INSERT INTO ${name} (level) VALUES ('gold')`)).toMatchObject({
      status: 409,
      body: { error: { code: "23514", hint: "level takes 'bronze'" } }
    })
  })
})

describe("introspection marks Plinth's own relations (#22.7)", () => {
  it("the chat's views are is_system for owners and admins, and absent for staff and members; the rest is not", async () => {
    const name = fresh("mine")
    result(await createTable(stack, users.owner, name, [{ name: "body" }]))
    const owner = await introspectUntil(stack, users.owner, (s) => relation(s, name) !== undefined)
    expect(relation(owner, "conversations")).toMatchObject({ kind: "view", is_system: true })
    expect(relation(owner, "messages")).toMatchObject({ kind: "view", is_system: true })
    expect(owner.relations.filter((r) => r.is_system).map((r) => r.table_name).sort()).toEqual(["conversations", "messages"])
    expect(relation(owner, name)).toMatchObject({ is_system: false })
    expect(relation(owner, `${name}_v`)).toMatchObject({ is_system: false })
    for (const user of [users.staff, users.member]) {
      const schema = await introspectUntil(stack, user, (s) => relation(s, name) !== undefined)
      expect(schema.relations.filter((r) => r.is_system || r.schema_name !== "public")).toEqual([])
      expect(relation(schema, "conversations")).toBeUndefined()
    }
    // sys.pages_v and the other sys relations are never listed.
    expect((await introspect(stack, users.owner)).relations.filter((r) => r.schema_name === "sys")).toEqual([])
  })
})

describe("indexes of managed tables (#22.14)", () => {
  const indexes = (table: string) =>
    admin<{ name: string; definition: string }>(stack,
      // The display columns' trigram indexes are DisplayIndexes.test.ts's.
      "SELECT indexname AS name, indexdef AS definition FROM pg_indexes WHERE schemaname = 'public' AND tablename = $1 AND indexdef NOT LIKE '%gin_trgm_ops%' ORDER BY indexdef", [table])
  const indexedColumns = async (table: string) =>
    (await indexes(table)).map((i) => /\(([\w, ]+)\)$/.exec(i.definition)?.[1]).sort()

  it("create_table indexes created_by and each reference column; they follow renames, drops and reference changes", async () => {
    const parent = fresh("parent")
    const child = fresh("child")
    result(await createTable(stack, users.owner, parent, [{ name: "title" }]))
    result(await createTable(stack, users.owner, child, [{ name: "title" }, { name: "parent", type: "reference", references: parent }]))
    expect(await indexedColumns(parent)).toEqual(["created_at, id", "created_by, created_at", "id"])
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id", "parent"])
    const [refIndex] = (await indexes(child)).filter((i) => i.definition.endsWith("(parent)"))
    expect(refIndex!.name).toMatch(new RegExp(`^${child}_parent_[0-9a-f]{8}_idx$`))

    result(await alterTable(stack, users.owner, child, [{ op: "rename_column", name: "parent", to: "owner_ref" }]))
    const renamed = (await indexes(child)).filter((i) => i.definition.endsWith("(owner_ref)"))
    expect(renamed.map((i) => i.name)).toEqual([expect.stringMatching(new RegExp(`^${child}_owner_ref_[0-9a-f]{8}_idx$`))])

    result(await alterTable(stack, users.owner, child, [{ op: "drop_reference", name: "owner_ref" }]))
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id"])
    result(await alterTable(stack, users.owner, child, [{ op: "add_reference", name: "owner_ref", references: parent }]))
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id", "owner_ref"])
    result(await alterTable(stack, users.owner, child, [{ op: "add_column", column: { name: "other", type: "reference", references: parent } }]))
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id", "other", "owner_ref"])
    result(await alterTable(stack, users.owner, child, [{ op: "drop_column", name: "other" }, { op: "change_type", name: "owner_ref", type: "text" }]))
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id"])
  })

  it("a unique reference column keeps its one index", async () => {
    const parent = fresh("parent")
    const child = fresh("child")
    result(await createTable(stack, users.owner, parent, [{ name: "title" }]))
    result(await createTable(stack, users.owner, child, [{ name: "parent", type: "reference", references: parent, unique: true }]))
    expect(await indexedColumns(child)).toEqual(["created_at, id", "created_by, created_at", "id", "parent"])
  })

  it("a member's read of their own rows uses the created_by index, newest first without a sort", async () => {
    const name = fresh("big")
    result(await createTable(stack, users.owner, name, [{ name: "body" }]))
    await admin(stack, `INSERT INTO public.${name} (body, created_by) SELECT 'x', gen_random_uuid() FROM generate_series(1, 20000)`)
    await admin(stack, `ANALYZE public.${name}`)
    await insert(stack, users.member, name, { body: "mine" })
    const plan = await asRole<{ "QUERY PLAN": string }>(stack, "member", users.member.user.id, `EXPLAIN SELECT * FROM public.${name}_v`)
    expect(plan.ok).toBe(true)
    const text = plan.ok ? plan.rows.map((r) => r["QUERY PLAN"]).join("\n") : ""
    expect(text).toMatch(/Index Scan|Bitmap Index Scan/)
    expect(text).not.toMatch(/Seq Scan/)
    const rows = ok(await sql<{ body: string }>(stack, users.member, `SELECT body FROM ${name}_v`))
    expect(rows).toEqual([{ body: "mine" }])

    // A list screen of a member with many rows: the newest 20 straight from the index.
    await admin(stack, `INSERT INTO public.${name} (body, created_by) SELECT 'mine too', '${users.member.user.id}' FROM generate_series(1, 200)`)
    await admin(stack, `ANALYZE public.${name}`)
    const latest = await asRole<{ "QUERY PLAN": string }>(stack, "member", users.member.user.id,
      `EXPLAIN SELECT * FROM public.${name}_v ORDER BY created_at DESC LIMIT 20`)
    const latestPlan = latest.ok ? latest.rows.map((r) => r["QUERY PLAN"]).join("\n") : ""
    expect(latestPlan).toMatch(/Index Scan Backward using \w+_created_by_[0-9a-f]{8}_idx/)
    expect(latestPlan).not.toMatch(/Sort/)
  })
})
