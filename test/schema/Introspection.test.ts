/**
 * POST / (spec §2.5, §4.3): the eight keys, as the caller's role sees them: relations filtered by
 * privilege, write_target, keys, exact row counts through row-level security, UI metadata, apps
 * and curr_role; and the cache that a catalog change (NOTIFY plinth_catalog) invalidates.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, startAuthStack } from "../support/auth.ts"
import {
  admin,
  alterTable,
  call,
  createTable,
  fresh,
  insert,
  INTROSPECTION_KEYS,
  introspect,
  introspectUntil,
  relation,
  result,
  ROLES,
  signInAll,
  type Users
} from "./helpers.ts"

let stack: AuthStack
let users: Users

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

/** Tells the services the catalog changed, as the sys functions do (for changes made here as superuser). */
const notifyCatalog = () => admin(stack, "SELECT pg_notify('plinth_catalog', 'test')")

describe("the answer", () => {
  it.each(ROLES)("as %s: exactly the eight keys of spec §2.5, and curr_role is the caller's role", async (role) => {
    const response = await post<Record<string, unknown>>(stack.main.url, "/", {}, { token: users[role].token })
    expect(response.status).toBe(200)
    expect(Object.keys(response.body).sort()).toEqual(INTROSPECTION_KEYS)
    expect(response.body).toMatchObject({
      relations: expect.any(Array),
      keys: expect.any(Array),
      stats: expect.any(Array),
      table_metadata: expect.any(Object),
      app_metadata: { app_description: expect.any(String), home_page: expect.any(Object) },
      column_metadata: expect.any(Object),
      apps: expect.any(Array),
      curr_role: role
    })
  })

  it("without a token → 401", async () => {
    const response = await post(stack.main.url, "/", {})
    expect(response).toMatchObject({ status: 401, body: { error: expect.any(String) } })
  })

  it("a relation has table_name, cols, can_select and write_target (and its other fields); a col its type and nullability", async () => {
    const name = fresh("shape")
    result(await createTable(stack, users.owner, name, [{ name: "title", required: true }]))
    const schema = await introspectUntil(stack, users.member, (s) => relation(s, name) !== undefined)
    expect(relation(schema, name)).toEqual({
      table_name: name,
      schema_name: "public",
      kind: "table",
      cols: expect.any(Array),
      can_select: true,
      can_insert: true,
      can_update: true,
      can_delete: true,
      write_target: null,
      is_managed: true,
      is_system: false
    })
    expect(relation(schema, `${name}_v`)).toMatchObject({ kind: "view", can_select: true, can_insert: false, can_update: false, can_delete: false })
    expect(relation(schema, name)!.cols[0]).toEqual({
      name: "id",
      type: "uuid",
      nullable: false,
      has_default: true,
      default: "gen_random_uuid()",
      position: 1,
      is_generated: false,
      can_select: true,
      can_insert: true,
      can_update: true
    })
    expect(relation(schema, name)!.cols.map((c) => [c.name, c.type, c.nullable])).toEqual([
      ["id", "uuid", false],
      ["created_at", "timestamp with time zone", false],
      ["updated_at", "timestamp with time zone", false],
      ["created_by", "uuid", true],
      ["title", "text", false]
    ])
  })
})

describe("relations are filtered by privilege", () => {
  it("a table with no grants for member is absent for a member (with its read view), present for owner and staff", async () => {
    const name = fresh("secret")
    result(await createTable(stack, users.owner, name, []))
    result(await call(stack, users.owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [name, "member", "none", "none", "none"]))
    const owner = await introspectUntil(stack, users.owner, (s) => relation(s, name) !== undefined)
    expect(relation(owner, `${name}_v`)).toBeDefined()
    const staff = await introspectUntil(stack, users.staff, (s) => relation(s, name) !== undefined)
    expect(relation(staff, `${name}_v`)).toBeDefined()
    const member = await introspectUntil(stack, users.member, (s) => relation(s, `${name}_v`) === undefined)
    expect(relation(member, name)).toBeUndefined()
    expect(member.table_metadata[name]).toBeUndefined()
    expect(member.column_metadata[name]).toBeUndefined()
    expect(member.keys.filter((k) => k.source_table === name)).toEqual([])
    expect(member.stats.find((s) => s.relname === name)).toBeUndefined()

    // Giving it back makes it appear (set_table_permissions invalidates the cache).
    result(await call(stack, users.owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [name, "member", "own", "none", "none"]))
    const again = await introspectUntil(stack, users.member, (s) => relation(s, name) !== undefined)
    expect(relation(again, name)).toMatchObject({ can_select: true, can_insert: false, can_update: false, can_delete: false })
  })

  it("a table made by the database administrator without grants is absent for every role", async () => {
    const name = fresh("hidden")
    await admin(stack, `CREATE TABLE public.${name} (id int PRIMARY KEY)`)
    await notifyCatalog()
    for (const role of ROLES) {
      const schema = await introspectUntil(stack, users[role], (s) => s.relations.length > 0)
      expect(relation(schema, name)).toBeUndefined()
    }
  })

  it("nothing of sys, pg_catalog or information_schema is listed", async () => {
    const schema = await introspect(stack, users.owner)
    expect(new Set(schema.relations.map((r) => r.schema_name))).toEqual(new Set(["public"]))
    expect(new Set(schema.keys.map((k) => k.source_schema))).toEqual(new Set(["public"]))
  })
})

describe("write_target", () => {
  it("<t>_v → t; a managed base table t → null; a custom view → null, also one named x_v without a table x", async () => {
    const name = fresh("goods")
    result(await createTable(stack, users.owner, name, [{ name: "label" }]))
    const custom = fresh("goods_report")
    result(await call(stack, users.owner, "sys.create_view($1, $2)", [custom, `SELECT label FROM ${name}`]))
    const lookalike = `${fresh("orphan")}_v`
    result(await call(stack, users.owner, "sys.create_view($1, $2)", [lookalike, "SELECT 1 AS one"]))
    const schema = await introspectUntil(stack, users.owner, (s) => relation(s, lookalike) !== undefined && relation(s, custom) !== undefined)
    expect(relation(schema, `${name}_v`)).toMatchObject({ kind: "view", write_target: name })
    expect(relation(schema, name)).toMatchObject({ kind: "table", write_target: null })
    expect(relation(schema, custom)).toMatchObject({ kind: "view", write_target: null, is_managed: false })
    expect(relation(schema, lookalike)).toMatchObject({ kind: "view", write_target: null })
  })

  it("(documented choice) a plain base table of the database administrator, without a _v view, is its own write target; its view is null", async () => {
    const name = fresh("ledger")
    await admin(stack, `CREATE TABLE public.${name} (id int PRIMARY KEY, amount numeric)`)
    await admin(stack, `CREATE VIEW public.${name}_summary AS SELECT sum(amount) AS total FROM public.${name}`)
    await admin(stack, `GRANT SELECT, INSERT ON public.${name}, public.${name}_summary TO owner`)
    await notifyCatalog()
    const schema = await introspectUntil(stack, users.owner, (s) => relation(s, name) !== undefined && relation(s, `${name}_summary`) !== undefined)
    expect(relation(schema, name)).toMatchObject({ kind: "table", write_target: name, is_managed: false, can_select: true, can_insert: true, can_update: false })
    expect(relation(schema, `${name}_summary`)).toMatchObject({ kind: "view", write_target: null })
  })
})

describe("keys", () => {
  it("PRIMARY KEY, UNIQUE and FOREIGN KEY records with source and target tables and columns", async () => {
    const parent = fresh("authors")
    const child = fresh("books")
    result(await createTable(stack, users.owner, parent, [{ name: "name", unique: true }]))
    result(await createTable(stack, users.owner, child, [{ name: "isbn", unique: true }, { name: "author", type: "reference", references: parent }]))
    const schema = await introspectUntil(stack, users.member, (s) => s.keys.some((k) => k.source_table === child))
    expect(schema.keys.filter((k) => k.source_table === child)).toEqual([
      {
        constraint_name: "author_ref",
        constraint_type: "FOREIGN KEY",
        source_schema: "public",
        source_table: child,
        source_columns: ["author"],
        target_schema: "public",
        target_table: parent,
        target_columns: ["id"]
      },
      {
        constraint_name: `${child}_pkey`,
        constraint_type: "PRIMARY KEY",
        source_schema: "public",
        source_table: child,
        source_columns: ["id"],
        target_schema: null,
        target_table: null,
        target_columns: null
      },
      {
        constraint_name: `${child}_isbn_key`,
        constraint_type: "UNIQUE",
        source_schema: "public",
        source_table: child,
        source_columns: ["isbn"],
        target_schema: null,
        target_table: null,
        target_columns: null
      }
    ])
    expect(schema.keys.filter((k) => k.source_table === parent).map((k) => [k.constraint_type, k.source_columns])).toEqual([
      ["PRIMARY KEY", ["id"]],
      ["UNIQUE", ["name"]]
    ])
  })
})

describe("stats", () => {
  it("exact counts through row-level security: a member counts their own rows, staff and owner all; views are not counted", async () => {
    const name = fresh("counted")
    result(await createTable(stack, users.owner, name, [{ name: "n", type: "integer" }]))
    for (let i = 0; i < 3; i++) await insert(stack, users.member, name, { n: i })
    for (let i = 0; i < 2; i++) await insert(stack, users.member2, name, { n: i })
    const count = async (user: typeof users.owner) => (await introspect(stack, user)).stats.filter((s) => s.relname === name)
    expect(await count(users.member)).toEqual([{ relname: name, number_rows: 3 }])
    expect(await count(users.member2)).toEqual([{ relname: name, number_rows: 2 }])
    expect(await count(users.staff)).toEqual([{ relname: name, number_rows: 5 }])
    expect(await count(users.owner)).toEqual([{ relname: name, number_rows: 5 }])
    const stats = (await introspect(stack, users.owner)).stats
    expect(stats.find((s) => s.relname === `${name}_v`)).toBeUndefined()
    for (const entry of stats) {
      expect(Object.keys(entry).sort()).toEqual(["number_rows", "relname"])
      expect(Number.isInteger(entry.number_rows)).toBe(true)
    }
  })

  it("a table past the exact bound is counted through row-level security up to the bound: a member who sees few rows, or none, is not shown the total", async () => {
    const name = fresh("large")
    result(await createTable(stack, users.owner, name, [{ name: "n", type: "integer" }]))
    result(await call(stack, users.owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [name, "member", "own", "own", "own"]))
    for (let i = 0; i < 7; i++) await insert(stack, users.owner, name, { n: i })
    for (let i = 0; i < 3; i++) await insert(stack, users.member, name, { n: i })
    await admin(stack, `ANALYZE public.${name}`)
    // Above a bound of 5, the 10 rows are "large": the statistics' 10 for whoever sees 5 or more.
    const counted = async (user: typeof users.owner) =>
      ((result(await call(stack, user, "sys.table_stats($1)", [5])) as unknown) as ReadonlyArray<{ relname: string; number_rows: number }>)
        .find((entry) => entry.relname === name)?.number_rows
    expect(await counted(users.member)).toBe(3)
    expect(await counted(users.member2)).toBe(0)
    expect(await counted(users.staff)).toBe(10)
    expect(await counted(users.owner)).toBe(10)
  })

  it("are read on every call, not cached: a new row counts at once", async () => {
    const name = fresh("live")
    result(await createTable(stack, users.owner, name, []))
    await introspectUntil(stack, users.owner, (s) => s.stats.some((x) => x.relname === name))
    await insert(stack, users.owner, name, {})
    expect((await introspect(stack, users.owner)).stats.find((s) => s.relname === name)).toEqual({ relname: name, number_rows: 1 })
    await insert(stack, users.owner, name, {})
    expect((await introspect(stack, users.owner)).stats.find((s) => s.relname === name)).toEqual({ relname: name, number_rows: 2 })
  })
})

describe("metadata", () => {
  it("column_metadata holds display_type, label and choice options { value, label, color }", async () => {
    const name = fresh("tickets")
    result(await createTable(stack, users.owner, name, [
      { name: "subject", label: "Subject" },
      { name: "amount", type: "currency" },
      { name: "priority", type: "choice", options: [{ value: "low", label: "Low", color: "blue" }, { value: "high", label: "High", color: "red" }] }
    ]))
    const schema = await introspectUntil(stack, users.member, (s) => s.column_metadata[name] !== undefined)
    expect(schema.column_metadata[name]).toEqual({
      subject: { display_type: "text", label: "Subject", column_type: "text" },
      amount: { display_type: "currency", column_type: "currency" },
      priority: {
        display_type: "choice",
        column_type: "choice",
        options: [{ value: "low", label: "Low", color: "blue" }, { value: "high", label: "High", color: "red" }]
      }
    })
    expect(schema.table_metadata[name]).toEqual({ display_columns: [], description: "" })
  })

  it("a choice option's null color is kept as null (spec §2.5: color (nullable))", async () => {
    const name = fresh("flags")
    const options = [{ value: "a", label: "A", color: null }, { value: "b", label: "B", color: "red" }]
    result(await createTable(stack, users.owner, name, [{ name: "flag", type: "choice", options }]))
    const schema = await introspectUntil(stack, users.owner, (s) => s.column_metadata[name] !== undefined)
    expect(schema.column_metadata[name]?.["flag"]?.options).toEqual(options)
  })

  it("app_metadata: without X-App-Schema from the public_app setting; with it, the app's description and home_page", async () => {
    await admin(stack, `INSERT INTO sys.settings (key, value) VALUES ('public_app', '{"description": "The public app", "home_page": {"member": "start"}}')
      ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
    await notifyCatalog()
    const outside = await introspectUntil(stack, users.member, (s) => s.app_metadata.app_description === "The public app")
    expect(outside.app_metadata).toEqual({ app_description: "The public app", home_page: { member: "start" } })

    const app = fresh("portal")
    result(await call(stack, users.owner, "sys.create_app($1, $2, $3)", [app, "Portal", "Customer portal"]))
    await admin(stack, `UPDATE sys.apps SET home_page = '{"member": "welcome", "staff": "queue"}' WHERE schema_name = $1`, [app])
    const inside = await introspectUntil(stack, users.member, (s) => s.app_metadata.home_page["staff"] === "queue", app)
    expect(inside.app_metadata).toEqual({ app_description: "Customer portal", home_page: { member: "welcome", staff: "queue" } })
    expect(inside.apps.find((a) => a.schema_name === app)).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      schema_name: app,
      display_name: "Portal",
      description: "Customer portal",
      home_page: { member: "welcome", staff: "queue" }
    })
  })
})

describe("the cache", () => {
  it("after sys.alter_table the next POST / reflects the change (within 2 s), for every role", async () => {
    const name = fresh("cached")
    result(await createTable(stack, users.owner, name, [{ name: "a" }]))
    for (const role of ROLES) await introspectUntil(stack, users[role], (s) => relation(s, name) !== undefined)
    result(await alterTable(stack, users.owner, name, [
      { op: "add_column", column: { name: "b", type: "integer", label: "B" } },
      { op: "set_display_columns", columns: ["a", "b"] }
    ]))
    const started = Date.now()
    for (const role of ROLES) {
      const schema = await introspectUntil(stack, users[role], (s) => relation(s, name)?.cols.some((c) => c.name === "b") === true)
      expect(schema.column_metadata[name]?.["b"]).toEqual({ display_type: "number", label: "B", column_type: "integer" })
      expect(schema.table_metadata[name]?.display_columns).toEqual(["a", "b"])
    }
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("a change through POST /sql shows in the caller's next POST / at once, before its notification has arrived", async () => {
    const name = fresh("own")
    await introspect(stack, users.owner)
    // The LISTEN connection's backend, stopped: this process hears of no change until it goes on.
    const listeners = await admin<{ pid: number }>(stack, `SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'plinth listen'`)
    expect(listeners).toHaveLength(1)
    const pid = listeners[0]!.pid
    process.kill(pid, "SIGSTOP")
    try {
      result(await createTable(stack, users.owner, name, [{ name: "a" }]))
      expect(relation(await introspect(stack, users.owner), name)).toBeDefined()
    } finally {
      process.kill(pid, "SIGCONT")
    }
  })

  it("after sys.drop_table and sys.create_app/drop_app too", async () => {
    const name = fresh("gone")
    result(await createTable(stack, users.owner, name, []))
    await introspectUntil(stack, users.staff, (s) => relation(s, name) !== undefined)
    result(await call(stack, users.owner, "sys.drop_table($1)", [name]))
    await introspectUntil(stack, users.staff, (s) => relation(s, name) === undefined)

    const app = fresh("flash")
    result(await call(stack, users.owner, "sys.create_app($1, $2, $3)", [app, "Flash", ""]))
    await introspectUntil(stack, users.staff, (s) => s.apps.some((a) => a.schema_name === app))
    result(await call(stack, users.owner, "sys.drop_app($1)", [app]))
    const schema = await introspectUntil(stack, users.staff, (s) => !s.apps.some((a) => a.schema_name === app))
    expect(schema.apps.map((a) => a.schema_name)).not.toContain(app)
  })
})
