/**
 * Apps (spec §2.6, §4.4): sys.create_app, update_app, rename_app, drop_app and list_apps; and what
 * X-App-Schema does with them: the management functions work in the app's schema, POST / shows the
 * app's relations before public's, and an app's tables are its own.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, type SignIn, startAuthStack } from "../support/auth.ts"
import {
  admin,
  appHeader,
  call,
  createTable,
  exists,
  expectDbError,
  expectForbidden,
  fresh,
  insert,
  introspect,
  introspectUntil,
  ok,
  relation,
  result,
  ROLES,
  signInAll,
  sql,
  type Users
} from "./helpers.ts"
import { eventually } from "../support/eventually.ts"

let stack: AuthStack
let users: Users

beforeAll(async () => {
  stack = await startAuthStack()
  users = await signInAll(stack)
})
afterAll(() => stack?.close())

interface App {
  readonly id: string
  readonly schema_name: string
  readonly display_name: string
  readonly description: string
  readonly home_page: Record<string, string>
  readonly created_at: string
  readonly updated_at: string
}

const createApp = (schema: unknown, display: unknown, description: unknown, user: SignIn = users.owner) =>
  call(stack, user, "sys.create_app($1, $2, $3)", [schema, display, description])
const updateApp = (schema: unknown, display: unknown, description: unknown, user: SignIn = users.owner) =>
  call(stack, user, "sys.update_app($1, $2, $3)", [schema, display, description])
const renameApp = (from: unknown, to: unknown, user: SignIn = users.owner) => call(stack, user, "sys.rename_app($1, $2)", [from, to])
const dropApp = (schema: unknown, user: SignIn = users.owner) => call(stack, user, "sys.drop_app($1)", [schema])
const listApps = (user: SignIn) => sql<App>(stack, user, "SELECT * FROM sys.list_apps()")

const schemaExists = async (schema: string) =>
  (await admin<{ found: boolean }>(stack, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1) AS found", [schema]))[0]!.found

const newApp = async (label = "app") => {
  const schema = fresh(label)
  result(await createApp(schema, `App ${schema}`, "for tests"))
  return schema
}

/** Whether X-App-Schema: `schema` is accepted by POST /sql right now. */
const headerAccepted = async (schema: string) => (await sql(stack, users.owner, "SELECT 1 AS one", [], schema)).status === 200

describe("sys.create_app", () => {
  it("as owner: creates the schema and the registry entry, and answers the app", async () => {
    const schema = fresh("shop")
    const app = result(await createApp(schema, "Shop", "Sells things")) as unknown as App
    expect(app).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      schema_name: schema,
      display_name: "Shop",
      description: "Sells things",
      home_page: {},
      created_at: expect.any(String),
      updated_at: expect.any(String)
    })
    expect(await schemaExists(schema)).toBe(true)
    expect(await admin(stack, "SELECT id::text, display_name, description FROM sys.apps WHERE schema_name = $1", [schema]))
      .toEqual([{ id: app.id, display_name: "Shop", description: "Sells things" }])
    const usage = await admin<{ role: string; usage: boolean }>(
      stack,
      "SELECT r AS role, has_schema_privilege(r, $1, 'USAGE') AS usage FROM unnest(ARRAY['owner', 'admin', 'staff', 'member', 'anon']) r",
      [schema]
    )
    expect(usage.every((u) => u.usage)).toBe(true)
    // Nobody but the management functions creates objects in it.
    expect(await admin(stack, "SELECT has_schema_privilege('owner', $1, 'CREATE') AS c", [schema])).toEqual([{ c: false }])
  })

  it("as admin: creates the app", async () => {
    const schema = fresh("admins")
    expect(result(await createApp(schema, "Admin's", "", users.admin))).toMatchObject({ schema_name: schema, display_name: "Admin's" })
    expect(await schemaExists(schema)).toBe(true)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, no schema, no entry", async (role) => {
    const schema = fresh("denied")
    expectForbidden(await createApp(schema, "Denied", "", users[role]))
    expect(await schemaExists(schema)).toBe(false)
    expect(await admin(stack, "SELECT 1 FROM sys.apps WHERE schema_name = $1", [schema])).toEqual([])
  })

  it("an empty display name falls back to the schema name; a null description to ''", async () => {
    const schema = fresh("plain")
    expect(result(await createApp(schema, "", null))).toMatchObject({ schema_name: schema, display_name: schema, description: "" })
  })

  it.each([
    ["upper case", "Shop", /lower-case letter/],
    ["a space", "my shop", /lower-case letter/],
    ["more than 63 bytes", "s".repeat(64), /longer than 63 bytes/],
    ["the sys prefix", "sys_app", /may not be sys or start with sys_ or pg_/],
    ["the pg_ prefix", "pg_app", /may not be sys or start with sys_ or pg_/],
    ["a reserved word", "select", /reserved word/],
    ["public", "public", /is taken/],
    ["extensions", "extensions", /is taken/],
    ["plinth", "plinth", /is taken/],
    ["null", null, /app schema name null/]
  ])("%s → 400 P0001", async (_label, schema, message) => {
    const before = await admin(stack, "SELECT count(*)::int AS n FROM sys.apps")
    expectDbError(await createApp(schema, "X", ""), 400, "P0001", message)
    expect(await admin(stack, "SELECT count(*)::int AS n FROM sys.apps")).toEqual(before)
  })

  it("an existing app, or a schema the database administrator made → 400 42P06", async () => {
    const schema = await newApp()
    expectDbError(await createApp(schema, "Again", ""), 400, "42P06", "already exists")
    const other = fresh("legacy")
    await admin(stack, `CREATE SCHEMA ${other}`)
    expectDbError(await createApp(other, "Legacy", ""), 400, "42P06", "already exists")
    expect(await admin(stack, "SELECT 1 FROM sys.apps WHERE schema_name = $1", [other])).toEqual([])
  })

  it("a display name over 200 characters → 409 23514 (the registry's CHECK), and no schema is left behind", async () => {
    const schema = fresh("long")
    expectDbError(await createApp(schema, "x".repeat(201), ""), 409, "23514")
    expect(await schemaExists(schema)).toBe(false)
  })
})

describe("sys.list_apps", () => {
  it.each(ROLES)("as %s: lists every app", async (role) => {
    const schema = await newApp("listed")
    const response = await listApps(users[role])
    expect(response.status).toBe(200)
    expect(response.body.rows.find((a) => a.schema_name === schema)).toEqual({
      id: expect.any(String),
      schema_name: schema,
      display_name: `App ${schema}`,
      description: "for tests",
      home_page: {},
      created_at: expect.any(String),
      updated_at: expect.any(String)
    })
    expect(response.body.rowCount).toBe((await admin(stack, "SELECT id FROM sys.apps")).length)
  })
})

describe("X-App-Schema and the management functions", () => {
  it("sys.create_table lands in the app's schema, with its metadata there", async () => {
    const app = await newApp()
    const table = fresh("items")
    expect(result(await createTable(stack, users.owner, table, [{ name: "name" }], app))).toEqual({ schema: app, table, view: `${table}_v` })
    expect(await exists(stack, `${app}.${table}`)).toBe(true)
    expect(await exists(stack, `${app}.${table}_v`)).toBe(true)
    expect(await exists(stack, `public.${table}`)).toBe(false)
    expect(await admin(stack, "SELECT schema_name FROM sys.table_metadata WHERE table_name = $1", [table])).toEqual([{ schema_name: app }])
    // Rows go in and out unqualified under the header, and not without it.
    await insert(stack, users.member, table, { name: "in app" }, app)
    expect(ok(await sql(stack, users.member, `SELECT name FROM ${table}_v`, [], app))).toEqual([{ name: "in app" }])
    expectDbError(await sql(stack, users.member, `SELECT name FROM ${table}`), 400, "42P01")
    // Its permissions are the app's: listed with the header only.
    const withHeader = ok(await sql<{ table_name: string }>(stack, users.owner, "SELECT * FROM sys.get_table_permissions()", [], app))
    expect(new Set(withHeader.map((p) => p.table_name))).toEqual(new Set([table]))
    const without = ok(await sql<{ table_name: string }>(stack, users.owner, "SELECT * FROM sys.get_table_permissions()"))
    expect(without.map((p) => p.table_name)).not.toContain(table)
    // And the other functions find it there.
    result(await call(stack, users.owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [table, "member", "all", "all", "all"], app))
    expectDbError(await call(stack, users.owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", [table, "member", "all", "all", "all"]), 400, "P0001", "no managed table")
  })

  it("POST / with the header shows the app's relations and public's; without it the app's tables are absent", async () => {
    const app = await newApp()
    const table = fresh("widgets")
    const publicTable = fresh("shared")
    result(await createTable(stack, users.owner, table, [{ name: "name", label: "Name" }], app))
    result(await createTable(stack, users.owner, publicTable, []))

    const inApp = await introspectUntil(stack, users.owner, (s) => relation(s, table, app) !== undefined && relation(s, publicTable) !== undefined, app)
    expect(relation(inApp, table, app)).toMatchObject({ kind: "table", write_target: null, is_managed: true })
    expect(relation(inApp, `${table}_v`, app)).toMatchObject({ kind: "view", write_target: table })
    expect(inApp.column_metadata[table]).toEqual({ name: { display_type: "text", label: "Name", column_type: "text" } })
    // The app's relations come first.
    const firstPublic = inApp.relations.findIndex((r) => r.schema_name === "public")
    const lastApp = inApp.relations.findLastIndex((r) => r.schema_name === app)
    expect(lastApp).toBeLessThan(firstPublic)
    expect(inApp.app_metadata).toEqual({ app_description: "for tests", home_page: {} })

    const outside = await introspectUntil(stack, users.owner, (s) => relation(s, publicTable) !== undefined)
    expect(outside.relations.filter((r) => r.schema_name === app)).toEqual([])
    expect(outside.column_metadata[table]).toBeUndefined()
    expect(outside.table_metadata[table]).toBeUndefined()
    expect(outside.keys.filter((k) => k.source_schema === app)).toEqual([])
    expect(outside.stats.find((s) => s.relname === table)).toBeUndefined()
    expect(outside.apps.map((a) => a.schema_name)).toContain(app)
  })

  it("a table `items` in app A and one in app B are distinct tables", async () => {
    const a = await newApp("app_a")
    const b = await newApp("app_b")
    result(await createTable(stack, users.owner, "items", [{ name: "label" }], a))
    result(await createTable(stack, users.owner, "items", [{ name: "label" }, { name: "qty", type: "integer" }], b))
    await insert(stack, users.owner, "items", { label: "only in a" }, a)
    expect(ok(await sql(stack, users.owner, "SELECT label FROM items", [], a))).toEqual([{ label: "only in a" }])
    expect(ok(await sql(stack, users.owner, "SELECT label, qty FROM items", [], b))).toEqual([])
    expect(await admin(stack, "SELECT schema_name, count(*)::int AS n FROM sys.column_metadata WHERE table_name = 'items' AND schema_name IN ($1, $2) GROUP BY 1 ORDER BY 1", [a, b]))
      .toEqual([{ schema_name: a, n: 1 }, { schema_name: b, n: 2 }].sort((x, y) => (x.schema_name < y.schema_name ? -1 : 1)))

    const inA = await introspectUntil(stack, users.owner, (s) => relation(s, "items", a) !== undefined, a)
    expect(relation(inA, "items", b)).toBeUndefined()
    expect(relation(inA, "items", a)!.cols.map((c) => c.name)).toEqual(["id", "created_at", "updated_at", "created_by", "label"])
    expect(inA.stats.find((s) => s.relname === "items")).toEqual({ relname: "items", number_rows: 1 })
    const inB = await introspectUntil(stack, users.owner, (s) => relation(s, "items", b) !== undefined, b)
    expect(relation(inB, "items", b)!.cols.map((c) => c.name)).toContain("qty")
    expect(inB.stats.find((s) => s.relname === "items")).toEqual({ relname: "items", number_rows: 0 })

    // Dropping one leaves the other.
    result(await call(stack, users.owner, "sys.drop_table($1)", ["items"], b))
    expect(await exists(stack, `${b}.items`)).toBe(false)
    expect(await exists(stack, `${a}.items`)).toBe(true)
  })

  it("sys.create_view under the header resolves names in the app's schema first and lands there", async () => {
    const app = await newApp()
    const table = fresh("orders")
    result(await createTable(stack, users.owner, table, [{ name: "total", type: "integer" }], app))
    await insert(stack, users.owner, table, { total: 5 }, app)
    const view = fresh("order_sum")
    expect(result(await call(stack, users.owner, "sys.create_view($1, $2)", [view, `SELECT sum(total)::int AS s FROM ${table}`], app))).toEqual({ schema: app, view })
    expect(await exists(stack, `${app}.${view}`)).toBe(true)
    expect(ok(await sql(stack, users.owner, `SELECT s FROM ${view}`, [], app))).toEqual([{ s: 5 }])
    // drop_view looks in the app's schema too.
    expectDbError(await call(stack, users.owner, "sys.drop_view($1)", [view]), 400, "P0001", "no custom view")
    result(await call(stack, users.owner, "sys.drop_view($1)", [view], app))
    expect(await exists(stack, `${app}.${view}`)).toBe(false)
  })
})

describe("sys.update_app", () => {
  it("as owner and admin: changes display name and description; list_apps and POST / follow", async () => {
    const schema = await newApp()
    const before = (await admin<{ updated_at: Date }>(stack, "SELECT updated_at FROM sys.apps WHERE schema_name = $1", [schema]))[0]!
    const updated = result(await updateApp(schema, "Renamed Shop", "New description"))
    expect(updated).toMatchObject({ schema_name: schema, display_name: "Renamed Shop", description: "New description" })
    expect(ok(await listApps(users.member)).find((a) => a.schema_name === schema)).toMatchObject({ display_name: "Renamed Shop", description: "New description" })
    const after = (await admin<{ updated_at: Date }>(stack, "SELECT updated_at FROM sys.apps WHERE schema_name = $1", [schema]))[0]!
    expect(after.updated_at.getTime()).toBeGreaterThan(before.updated_at.getTime())

    const schemaView = await introspectUntil(stack, users.member, (s) => s.app_metadata.app_description === "New description", schema)
    expect(schemaView.apps.find((a) => a.schema_name === schema)).toMatchObject({ display_name: "Renamed Shop", description: "New description" })

    expect(result(await updateApp(schema, "By admin", "d2", users.admin))).toMatchObject({ display_name: "By admin", description: "d2" })
  })

  it("an empty display name and a null description keep what was there", async () => {
    const schema = await newApp()
    expect(result(await updateApp(schema, "", null))).toMatchObject({ display_name: `App ${schema}`, description: "for tests" })
    expect(result(await updateApp(schema, null, ""))).toMatchObject({ display_name: `App ${schema}`, description: "" })
  })

  it("an unknown app → 400 P0001", async () => {
    expectDbError(await updateApp("no_such_app", "X", "Y"), 400, "P0001", /no app 'no_such_app'/)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, nothing changes", async (role) => {
    const schema = await newApp()
    expectForbidden(await updateApp(schema, "Hijacked", "", users[role]))
    expect(await admin(stack, "SELECT display_name FROM sys.apps WHERE schema_name = $1", [schema])).toEqual([{ display_name: `App ${schema}` }])
  })
})

describe("sys.rename_app", () => {
  it("moves the schema, the registry entry (same id), the metadata and the pages; the new header works, the old one is unknown", async () => {
    const from = await newApp("before")
    const to = fresh("after")
    const table = fresh("things")
    result(await createTable(stack, users.owner, table, [{ name: "name", label: "Name" }], from))
    await insert(stack, users.member, table, { name: "kept" }, from)
    const view = fresh("thing_names")
    result(await call(stack, users.owner, "sys.create_view($1, $2)", [view, `SELECT name FROM ${table}`], from))
    await admin(stack, "INSERT INTO sys.pages (schema_name, slug, title, source) VALUES ($1, 'home', 'Home', '<h1>hi</h1>')", [from])
    const [{ id }] = (await admin<{ id: string }>(stack, "SELECT id::text FROM sys.apps WHERE schema_name = $1", [from])) as [{ id: string }]
    expect(await headerAccepted(from)).toBe(true)

    expect(result(await renameApp(from, to))).toMatchObject({ id, schema_name: to, display_name: `App ${from}` })
    expect(await schemaExists(from)).toBe(false)
    expect(await schemaExists(to)).toBe(true)
    expect(await admin(stack, "SELECT id::text FROM sys.apps WHERE schema_name IN ($1, $2)", [from, to])).toEqual([{ id }])
    for (const [catalog, column] of [["sys.table_metadata", "table_name"], ["sys.column_metadata", "table_name"], ["sys.table_permissions", "table_name"]] as const) {
      expect(await admin(stack, `SELECT DISTINCT schema_name FROM ${catalog} WHERE ${column} = $1`, [table])).toEqual([{ schema_name: to }])
    }
    expect(await admin(stack, "SELECT schema_name FROM sys.managed_views WHERE view_name = $1", [view])).toEqual([{ schema_name: to }])
    expect(await admin(stack, "SELECT schema_name, slug, title FROM sys.pages WHERE schema_name IN ($1, $2)", [from, to]))
      .toEqual([{ schema_name: to, slug: "home", title: "Home" }])

    // The app's tables and views are still there, and still readable under the new header.
    expect(await eventually(() => headerAccepted(to))).toBe(true)
    expect(ok(await sql(stack, users.member, `SELECT name FROM ${table}_v`, [], to))).toEqual([{ name: "kept" }])
    expect(ok(await sql(stack, users.member, `SELECT name FROM ${view}`, [], to))).toEqual([{ name: "kept" }])
    // The management functions find the table under its new schema.
    result(await call(stack, users.owner, "sys.alter_table($1, $2::jsonb)", [table, [{ op: "add_column", column: { name: "extra" } }]], to))
    expect(await exists(stack, `${to}.${table}_v`)).toBe(true)

    expect(await eventually(async () => !(await headerAccepted(from)))).toBe(true)
    const old = await sql(stack, users.owner, "SELECT 1 AS one", [], from)
    expect(old).toMatchObject({ status: 400, body: { error: `unknown app schema: ${from}` } })

    const schema = await introspectUntil(stack, users.owner, (s) => relation(s, table, to) !== undefined, to)
    expect(schema.column_metadata[table]).toMatchObject({ name: { label: "Name" } })
  })

  it("an unknown app → 400 P0001", async () => {
    expectDbError(await renameApp("no_such_app", fresh("x")), 400, "P0001", /no app 'no_such_app'/)
  })

  it("to an existing schema (another app, public) → 400 42P06; to an invalid name → 400 P0001; nothing changes", async () => {
    const a = await newApp()
    const b = await newApp()
    expectDbError(await renameApp(a, b), 400, "42P06", "already exists")
    expectDbError(await renameApp(a, "public"), 400, "42P06", "already exists")
    expectDbError(await renameApp(a, "Bad Name"), 400, "P0001", /lower-case letter/)
    expectDbError(await renameApp(a, "sys_app"), 400, "P0001", /may not be sys or start with sys_/)
    expect(await schemaExists(a)).toBe(true)
    expect(await admin(stack, "SELECT 1 AS x FROM sys.apps WHERE schema_name = $1", [a])).toEqual([{ x: 1 }])
  })

  it("to a name create_app refuses as taken (plinth, extensions, information_schema: all existing schemas) → 400 42P06", async () => {
    const app = await newApp()
    for (const reserved of ["plinth", "extensions", "information_schema"]) {
      expectDbError(await renameApp(app, reserved), 400, "42P06", "already exists")
    }
    expect(await schemaExists(app)).toBe(true)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, nothing changes", async (role) => {
    const app = await newApp()
    const to = fresh("stolen")
    expectForbidden(await renameApp(app, to, users[role]))
    expect(await schemaExists(app)).toBe(true)
    expect(await schemaExists(to)).toBe(false)
  })

  it("as admin: renames", async () => {
    const app = await newApp()
    const to = fresh("admin_renamed")
    expect(result(await renameApp(app, to, users.admin))).toMatchObject({ schema_name: to })
    expect(await schemaExists(to)).toBe(true)
  })
})

describe("sys.drop_app", () => {
  it("removes the schema with its tables, the registry entry, the metadata and the pages; the header becomes unknown", async () => {
    const app = await newApp("doomed")
    const table = fresh("stuff")
    result(await createTable(stack, users.owner, table, [{ name: "name" }], app))
    const view = fresh("stuff_view")
    result(await call(stack, users.owner, "sys.create_view($1, $2)", [view, `SELECT name FROM ${table}`], app))
    await admin(stack, "INSERT INTO sys.pages (schema_name, slug) VALUES ($1, 'home'), ($1, 'about')", [app])
    expect(await headerAccepted(app)).toBe(true)

    expect(result(await dropApp(app))).toMatchObject({ schema_name: app, display_name: `App ${app}` })
    expect(await schemaExists(app)).toBe(false)
    expect(await admin(stack, "SELECT 1 FROM sys.apps WHERE schema_name = $1", [app])).toEqual([])
    for (const catalog of ["sys.table_metadata", "sys.column_metadata", "sys.table_permissions", "sys.managed_views", "sys.pages"]) {
      expect(await admin(stack, `SELECT 1 FROM ${catalog} WHERE schema_name = $1`, [app])).toEqual([])
    }
    expect(ok(await listApps(users.owner)).map((a) => a.schema_name)).not.toContain(app)
    expect(await eventually(async () => !(await headerAccepted(app)))).toBe(true)
    expect(await sql(stack, users.owner, "SELECT 1 AS one", [], app)).toMatchObject({ status: 400, body: { error: `unknown app schema: ${app}` } })
    const schema = await introspectUntil(stack, users.owner, (s) => !s.apps.some((a) => a.schema_name === app))
    expect(schema.apps.map((a) => a.schema_name)).not.toContain(app)
  })

  it("a public custom view that read the app's tables leaves no stale registry entry: its name can be used again", async () => {
    const app = await newApp()
    const table = fresh("rows")
    result(await createTable(stack, users.owner, table, [{ name: "label" }], app))
    const view = fresh("cross_app")
    result(await call(stack, users.owner, "sys.create_view($1, $2)", [view, `SELECT label FROM ${app}.${table}`]))
    const dropped = await dropApp(app)
    if (dropped.status === 200) {
      // Either the view went with the app, and then so must its registry entry …
      expect(await admin(stack, "SELECT view_name FROM sys.managed_views WHERE schema_name = 'public' AND to_regclass(format('%I.%I', schema_name, view_name)) IS NULL"))
        .toEqual([])
      expect(result(await call(stack, users.owner, "sys.create_view($1, $2)", [view, "SELECT 1 AS one"]))).toEqual({ schema: "public", view })
    } else {
      // … or drop_app refuses while another schema depends on the app, and nothing changes.
      expect(dropped.status).toBe(400)
      expect(await schemaExists(app)).toBe(true)
      expect(await exists(stack, `public.${view}`)).toBe(true)
    }
  })

  it("as admin: drops", async () => {
    const app = await newApp()
    expect(result(await dropApp(app, users.admin))).toMatchObject({ schema_name: app })
    expect(await schemaExists(app)).toBe(false)
  })

  it("an unknown app (or public, or a schema that is no app) → 400 P0001, and it stays", async () => {
    expectDbError(await dropApp("no_such_app"), 400, "P0001", /no app 'no_such_app'/)
    expectDbError(await dropApp("public"), 400, "P0001", /no app 'public'/)
    const legacy = fresh("legacy")
    await admin(stack, `CREATE SCHEMA ${legacy}`)
    expectDbError(await dropApp(legacy), 400, "P0001", /no app/)
    expect(await schemaExists(legacy)).toBe(true)
    expect(await schemaExists("public")).toBe(true)
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501, the app stays", async (role) => {
    const app = await newApp()
    expectForbidden(await dropApp(app, users[role]))
    expect(await schemaExists(app)).toBe(true)
    expect(ok(await listApps(users[role])).map((a) => a.schema_name)).toContain(app)
  })
})

describe("X-App-Schema itself", () => {
  it("an unknown or malformed app → 400 {error: string} on POST /sql and POST /", async () => {
    expect(await sql(stack, users.owner, "SELECT 1 AS one", [], "no_such_app")).toMatchObject({ status: 400, body: { error: "unknown app schema: no_such_app" } })
    expect(await sql(stack, users.owner, "SELECT 1 AS one", [], "Bad-Name")).toMatchObject({ status: 400, body: { error: "invalid X-App-Schema" } })
    const introspection = await post(stack.main.url, "/", {}, { token: users.owner.token, headers: appHeader("no_such_app") })
    expect(introspection).toMatchObject({ status: 400, body: { error: expect.any(String) } })
  })

  it("POST / as every role works under an app's header", async () => {
    const app = await newApp()
    for (const role of ROLES) {
      const schema = await introspect(stack, users[role], app)
      expect(schema.curr_role).toBe(role)
      expect(schema.app_metadata.app_description).toBe("for tests")
    }
  })
})
