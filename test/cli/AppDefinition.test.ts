/**
 * `plinth app export` / `plinth app import` (issue #27): an app built by an owner through POST /sql
 * (two related tables, a view, permissions, a page, home pages) is exported as JSON, imported into
 * a fresh database and into the same one under another schema; the copies export the same
 * definition and introspect the same, and were made by the management functions (policies,
 * triggers, audit events). A broken definition, or one the database refuses half-way, is one line
 * and leaves nothing behind.
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, signedIn, startAuthStack } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, query, runSql, type TestDatabase } from "../support/database.ts"
import { admin, alterTable, call, createTable, result } from "../schema/helpers.ts"

let stack: AuthStack
let fresh: TestDatabase
let dir: string
const APP = "shop"

beforeAll(async () => {
  stack = await startAuthStack()
  fresh = await createTestDatabase()
  dir = mkdtempSync(path.join(tmpdir(), "plinth-appdef-"))
}, 60_000)
afterAll(async () => {
  await stack?.close()
  await fresh?.drop()
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

const envOf = (db: TestDatabase) => ({ DATABASE_URL: db.mainUrl, DATABASE_ADMIN_URL: db.adminUrl, APP_URL: "http://app.test" })

/** Runs `plinth args` against `db` to its end: the exit code, stdout, and stderr's lines. */
const plinth = async (args: ReadonlyArray<string>, db: TestDatabase = stack.db) => {
  const run = runPlinth(args, envOf(db))
  const code = await run.exited
  return { code, stdout: run.stdout(), errors: run.stderr().trim().split("\n").filter((line) => line !== "") }
}

const expectOneLine = (outcome: { code: number; errors: ReadonlyArray<string> }, expected: RegExp) => {
  expect(outcome.code).toBe(1)
  expect(outcome.errors).toHaveLength(1)
  expect(outcome.errors[0]).toMatch(expected)
}

const exported = async (schema: string, db: TestDatabase = stack.db) => {
  const outcome = await plinth(["app", "export", schema], db)
  expect(outcome.errors).toEqual([])
  expect(outcome.code).toBe(0)
  return JSON.parse(outcome.stdout) as Record<string, unknown>
}

const writeDefinition = (name: string, definition: unknown) => {
  const file = path.join(dir, name)
  writeFileSync(file, typeof definition === "string" ? definition : JSON.stringify(definition, null, 2))
  return file
}

/** sys.introspect() as an owner in app `schema`, with the schema's name replaced by `S`, for comparison. */
const introspection = (db: TestDatabase, schema: string) =>
  runSql(db.adminUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT set_config('role', 'owner', true),
        set_config('app.app_id', (SELECT id::text FROM sys.apps WHERE schema_name = ${schema}), true)`
      const [row] = yield* sql<{ schema: string }>`SELECT sys.introspect()::text AS schema`
      const parsed = JSON.parse(row!.schema) as {
        relations: ReadonlyArray<{ schema_name: string; table_name: string }>
        keys: ReadonlyArray<{ source_schema: string; source_table: string; constraint_name: string }>
        column_metadata: unknown
        table_metadata: unknown
        app_metadata: unknown
      }
      const mine = {
        relations: parsed.relations.filter((r) => r.schema_name === schema)
          .sort((a, b) => a.table_name.localeCompare(b.table_name)),
        keys: parsed.keys.filter((k) => k.source_schema === schema)
          .sort((a, b) => `${a.source_table}.${a.constraint_name}`.localeCompare(`${b.source_table}.${b.constraint_name}`)),
        column_metadata: parsed.column_metadata,
        table_metadata: parsed.table_metadata,
        app_metadata: parsed.app_metadata
      }
      return JSON.parse(JSON.stringify(mine).replaceAll(`"${schema}"`, "\"S\"")) as unknown
    }))
  }))

/** Policies, triggers and indexes of the schema's tables, by table and name: what the management functions made. */
const catalog = (db: TestDatabase, schema: string) =>
  query(db.adminUrl, (sql) =>
    sql<{ kind: string; name: string }>`
      SELECT 'policy' AS kind, tablename || '.' || policyname || ' ' || cmd || ' ' || array_to_string(roles, ',') || ' ' || coalesce(qual, '') AS name
      FROM pg_policies WHERE schemaname = ${schema}
      UNION ALL SELECT 'trigger', tgrelid::regclass::text || '.' || tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = ${schema} AND NOT t.tgisinternal
      UNION ALL SELECT 'index', indexname FROM pg_indexes WHERE schemaname = ${schema}
      UNION ALL SELECT 'grant', table_name || ' ' || grantee || ' ' || privilege_type FROM information_schema.role_table_grants WHERE table_schema = ${schema}
      ORDER BY 1, 2`).then((rows) => rows.map((row) => `${row.kind} ${row.name.replaceAll(`${schema}.`, "S.")}`))

/** Whatever an import of schema `schema` could have left: the schema, the app row, metadata, pages, views. */
const traces = (db: TestDatabase, schema: string) =>
  query(db.adminUrl, (sql) =>
    sql<{ n: number }>`SELECT (
      (SELECT count(*) FROM pg_namespace WHERE nspname = ${schema}) + (SELECT count(*) FROM sys.apps WHERE schema_name = ${schema})
      + (SELECT count(*) FROM sys.table_metadata WHERE schema_name = ${schema}) + (SELECT count(*) FROM sys.pages WHERE schema_name = ${schema})
      + (SELECT count(*) FROM sys.managed_views WHERE schema_name = ${schema})
      + (SELECT count(*) FROM sys.audit_events WHERE target = ${schema} OR target LIKE ${schema + ".%"} OR target LIKE ${schema + "/%"})
    )::int AS n`).then((rows) => rows[0]!.n)

describe("plinth app export / import", () => {
  let file: string
  let original: Record<string, unknown>

  beforeAll(async () => {
    const owner = await signedIn(stack, "owner@appdef.test", "owner")
    result(await call(stack, owner, "sys.create_app($1, $2, $3)", [APP, "Shop", "Orders and customers"]))
    result(await createTable(stack, owner, "customers", [
      { name: "name", type: "text", required: true, label: "Name" },
      { name: "email", type: "email", unique: true },
      { name: "vip", type: "boolean", default: false },
      { name: "tier", type: "choice", default: "basic", options: [{ value: "basic", label: "Basic", color: "gray" }, { value: "gold", label: "Gold", color: "#d4af37" }] }
    ], APP))
    result(await createTable(stack, owner, "orders", [
      { name: "customer", type: "reference", references: "customers", required: true },
      { name: "total", type: "currency", default: "0" },
      { name: "placed_on", type: "date", display_type: "date" },
      { name: "note", type: "text" }
    ], APP))
    result(await alterTable(stack, owner, "customers", [{ op: "set_display_columns", columns: ["name", "email"] }], APP))
    result(await alterTable(stack, owner, "orders", [{ op: "set_display", name: "note", label: "Note", display_type: "textarea" }], APP))
    result(await call(stack, owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", ["customers", "member", "all", "none", "none"], APP))
    result(await call(stack, owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", ["orders", "member", "own", "own", "none"], APP))
    result(await call(stack, owner, "sys.set_table_permissions($1, $2, $3, $4, $5)", ["orders", "anon", "all", "none", "none"], APP))
    result(await call(stack, owner, "sys.create_view($1, $2)", ["big_orders", "SELECT o.id, o.total, c.name FROM orders o JOIN customers c ON c.id = o.customer WHERE o.total > 100"], APP))
    result(await call(stack, owner, "sys.create_page($1, $2, $3)", ["welcome", "Welcome", "export default () => 'hi'"], APP))
    // No management function sets home pages: an administrator does, as the README says.
    await admin(stack, `UPDATE sys.apps SET home_page = '{"member": "welcome", "staff": "welcome"}' WHERE schema_name = $1`, [APP])
    await admin(stack, `UPDATE sys.table_metadata SET description = 'People who buy' WHERE schema_name = $1 AND table_name = 'customers'`, [APP])

    original = await exported(APP)
    file = writeDefinition("shop.json", original)
  }, 120_000)

  it("exports the app's row, its tables in dependency order with column specs and permissions, its view and page", () => {
    expect(original).toMatchObject({
      plinth_app: 1,
      schema: APP,
      display_name: "Shop",
      description: "Orders and customers",
      home_page: { member: "welcome", staff: "welcome" },
      views: [{ name: "big_orders", sql: expect.stringMatching(/^SELECT o\.id,\s+o\.total,\s+c\.name\s+FROM orders o\s+JOIN customers c ON c\.id = o\.customer\s+WHERE o\.total > 100::numeric$/) }],
      pages: [{ slug: "welcome", title: "Welcome", source: "export default () => 'hi'" }]
    })
    const tables = original["tables"] as ReadonlyArray<Record<string, unknown>>
    expect(tables.map((t) => t["name"])).toEqual(["customers", "orders"])
    expect(tables[0]).toEqual({
      name: "customers",
      description: "People who buy",
      display_columns: ["name", "email"],
      columns: [
        { name: "name", type: "text", required: true, label: "Name", display_type: "text" },
        { name: "email", type: "email", unique: true, display_type: "email" },
        { name: "vip", type: "boolean", default: "false", display_type: "boolean" },
        {
          name: "tier", type: "choice", default: "basic", display_type: "choice",
          options: [{ value: "basic", label: "Basic", color: "gray" }, { value: "gold", label: "Gold", color: "#d4af37" }]
        }
      ],
      permissions: {
        staff: { read: "all", write: "all", delete: "all" },
        member: { read: "all", write: "none", delete: "none" },
        anon: { read: "none", write: "none", delete: "none" }
      }
    })
    expect(tables[1]).toEqual({
      name: "orders",
      columns: [
        { name: "customer", type: "reference", required: true, display_type: "reference", references: "customers" },
        { name: "total", type: "currency", default: "0", display_type: "currency" },
        { name: "placed_on", type: "date", display_type: "date" },
        { name: "note", type: "text", label: "Note", display_type: "textarea" }
      ],
      permissions: {
        staff: { read: "all", write: "all", delete: "all" },
        member: { read: "own", write: "own", delete: "none" },
        anon: { read: "all", write: "none", delete: "none" }
      }
    })
  })

  it("imports into a fresh database under the same name: the same definition, introspection and catalog", async () => {
    const imported = await plinth(["app", "import", file], fresh)
    expect(imported.errors).toEqual([])
    expect(imported.stdout.trim()).toBe(`Imported ${file} as ${APP}: 2 tables, 1 view, 1 page.`)
    expect(await exported(APP, fresh)).toEqual(original)
    expect(await introspection(fresh, APP)).toEqual(await introspection(stack.db, APP))
    expect(await catalog(fresh, APP)).toEqual(await catalog(stack.db, APP))
  }, 60_000)

  it("imports into the same database --as another schema: equal modulo the schema name, made by the management functions", async () => {
    const imported = await plinth(["app", "import", file, "--as", "shop_copy"])
    expect(imported.errors).toEqual([])
    expect(imported.stdout.trim()).toBe(`Imported ${file} as shop_copy: 2 tables, 1 view, 1 page.`)
    expect(await exported("shop_copy")).toEqual({ ...original, schema: "shop_copy" })
    expect(await introspection(stack.db, "shop_copy")).toEqual(await introspection(stack.db, APP))
    const copied = await catalog(stack.db, "shop_copy")
    expect(copied).toEqual(await catalog(stack.db, APP))
    expect(copied).toContain("policy orders.member_read SELECT member (created_by = (NULLIF(current_setting('app.user_id'::text, true), ''::text))::uuid)")
    expect(copied).toContain("trigger S.customers.touch_updated_at")
    const audited = await admin<{ action: string; target: string }>(stack,
      `SELECT action, target FROM sys.audit_events WHERE target LIKE 'shop_copy%' ORDER BY id`)
    expect(audited.map((e) => `${e.action} ${e.target}`)).toEqual([
      "app.create shop_copy",
      "table.create shop_copy.customers",
      "table.create shop_copy.orders",
      "table.alter shop_copy.customers",
      "permissions.set shop_copy.customers",
      "permissions.set shop_copy.orders",
      "permissions.set shop_copy.orders",
      "view.create shop_copy.big_orders",
      "page.create shop_copy/welcome"
    ])
    // The copy works: a member's own row goes in and is read back through the read view.
    const member = await signedIn(stack, "member@appdef.test", "member")
    await admin(stack, `INSERT INTO shop_copy.customers (name, email) VALUES ('Ada', 'ada@shop.test')`)
    const inserted = await call(stack, member, "(SELECT count(*) FROM customers_v WHERE name = 'Ada')", [], "shop_copy")
    expect(inserted.status).toBe(200)
  }, 60_000)

  it("refuses an app that exists, in one line", async () => {
    expectOneLine(await plinth(["app", "import", file]), /^plinth: cannot import .*shop\.json as shop: app shop already exists; import under another name with --as <schema>$/)
  })

  it("refuses a broken definition in one line, before touching the database, leaving nothing behind", async () => {
    const tables = original["tables"] as ReadonlyArray<Record<string, unknown>>
    const unknownKey = writeDefinition("unknown.json", { ...original, tables: [{ ...tables[0], colour: "red" }, tables[1]] })
    expectOneLine(await plinth(["app", "import", unknownKey, "--as", "broken_a"]), /^plinth: invalid app definition .*unknown\.json: tables\[0\]: unknown key "colour"$/)
    const missing = writeDefinition("missing.json", { ...original, tables: [tables[1]] })
    expectOneLine(
      await plinth(["app", "import", missing, "--as", "broken_b"]),
      /^plinth: invalid app definition .*missing\.json: table orders: column customer references table customers, which the definition does not have$/
    )
    const badType = JSON.parse(JSON.stringify(original)) as { tables: Array<{ columns: Array<{ type: string }> }> }
    badType.tables[0]!.columns[0]!.type = "string"
    expectOneLine(
      await plinth(["app", "import", writeDefinition("type.json", badType), "--as", "broken_c"]),
      /^plinth: invalid app definition .*type\.json: tables\[0\]\.columns\[0\]\.type: Expected "text" \| "integer"/
    )
    expectOneLine(await plinth(["app", "import", writeDefinition("garbage.json", "{not json")]), /^plinth: .*garbage\.json is not JSON/)
    expectOneLine(await plinth(["app", "import", path.join(dir, "absent.json")]), /^plinth: cannot read .*absent\.json: /)
    for (const schema of ["broken_a", "broken_b", "broken_c"]) expect(await traces(stack.db, schema)).toBe(0)
  }, 60_000)

  it("a step the database refuses half-way (a view that does not compile) undoes everything before it", async () => {
    const broken = writeDefinition("view.json", { ...original, views: [{ name: "bad", sql: "SELECT no_such_column FROM orders" }] })
    expectOneLine(await plinth(["app", "import", broken, "--as", "half_way"]), /^plinth: cannot import .*view\.json as half_way: view bad: column "no_such_column" does not exist$/)
    expect(await traces(stack.db, "half_way")).toBe(0)
  }, 60_000)

  it("exports public's managed tables; an unknown app is one line", async () => {
    const owner = await signedIn(stack, "owner2@appdef.test", "owner")
    result(await createTable(stack, owner, "notes", [{ name: "body", type: "text" }]))
    const publicDefinition = await exported("public")
    expect(publicDefinition).toMatchObject({ plinth_app: 1, schema: "public", tables: [{ name: "notes" }], views: [], pages: [] })
    expect(publicDefinition).not.toHaveProperty("display_name")
    const publicFile = writeDefinition("public.json", publicDefinition)
    const copy = await plinth(["app", "import", publicFile, "--as", "notes_app"])
    expect(copy.stdout.trim()).toMatch(/as notes_app: 1 table, 0 views, 0 pages\.$/)
    // Into public itself: while it has no managed tables (the fresh database), then refused.
    expect((await plinth(["app", "import", publicFile], fresh)).stdout.trim()).toMatch(/as public: 1 table, 0 views, 0 pages\.$/)
    expect(await exported("public", fresh)).toEqual(publicDefinition)
    expectOneLine(await plinth(["app", "import", publicFile], fresh), /as public: public already has managed tables, views or pages; import into a new app with --as <schema>$/)
    expectOneLine(await plinth(["app", "export", "nowhere"]), /^plinth: no app nowhere /)
    expect(readFileSync(file, "utf8")).toContain("\"plinth_app\": 1")
  }, 60_000)
})

describe("an app with a reference cycle, a self-reference and defaults of every kind", () => {
  it("imports and exports the same definition and introspects the same", async () => {
    const owner = await signedIn(stack, "owner3@appdef.test", "owner")
    const app = "graph"
    result(await call(stack, owner, "sys.create_app($1, $2, $3)", [app, "Graph", ""]))
    result(await createTable(stack, owner, "nodes", [
      { name: "title", type: "text", default: "it's \\ here" },
      { name: "parent", type: "reference", references: "nodes" },
      { name: "weight", type: "integer", default: 5 },
      { name: "ratio", type: "numeric", default: "0.5" },
      { name: "big", type: "bigint" },
      { name: "meta", type: "json", default: "{\"a\": [1, 2]}" },
      { name: "seen_at", type: "timestamp", default: "2026-01-02T03:04:05Z" },
      { name: "site", type: "url" },
      { name: "token", type: "uuid", unique: true },
      { name: "on_day", type: "date", default: "2026-05-01" }
    ], app))
    result(await createTable(stack, owner, "edges", [{ name: "source", type: "reference", references: "nodes", required: true }], app))
    // The cycle: nodes gets a reference to edges once edges exists.
    result(await alterTable(stack, owner, "nodes", [{ op: "add_column", column: { name: "first_edge", type: "reference", references: "edges" } }], app))
    // A view naming its own schema, and reading a column renamed after it was made: the copy's view reads the copy, by the new name.
    result(await call(stack, owner, "sys.create_view($1, $2)", ["roots", "SELECT n.id, n.site FROM graph.nodes n WHERE n.parent IS NULL"], app))
    result(await call(stack, owner, "sys.create_view($1, $2)", ["root_count", "SELECT count(*) AS n FROM roots"], app))
    result(await alterTable(stack, owner, "nodes", [{ op: "rename_column", name: "site", to: "homepage" }], app))
    const definition = await exported(app)
    expect(definition["views"]).toEqual([
      { name: "roots", sql: expect.stringMatching(/^SELECT id,\s+homepage AS site\s+FROM nodes n\s+WHERE parent IS NULL$/) },
      { name: "root_count", sql: expect.stringMatching(/^SELECT count\(\*\) AS n\s+FROM roots$/) }
    ])
    const tables = definition["tables"] as ReadonlyArray<{ name: string; columns: ReadonlyArray<Record<string, unknown>> }>
    expect(tables.find((t) => t.name === "nodes")!.columns.filter((c) => "default" in c).map((c) => [c["name"], c["default"]])).toEqual([
      ["title", "it's \\ here"],
      ["weight", "5"],
      ["ratio", "0.5"],
      ["meta", "{\"a\": [1, 2]}"],
      ["seen_at", "2026-01-02 03:04:05+00"],
      ["on_day", "2026-05-01"]
    ])
    const imported = await plinth(["app", "import", writeDefinition("graph.json", definition), "--as", "graph_copy"])
    expect(imported.errors).toEqual([])
    expect(await exported("graph_copy")).toEqual({ ...definition, schema: "graph_copy" })
    expect(await introspection(stack.db, "graph_copy")).toEqual(await introspection(stack.db, app))
    expect(await catalog(stack.db, "graph_copy")).toEqual(await catalog(stack.db, app))
    const dependencies = await admin<{ reads: string }>(stack,
      `SELECT DISTINCT d.refobjid::regclass::text AS reads FROM pg_rewrite r JOIN pg_depend d ON d.objid = r.oid
       WHERE r.ev_class = 'graph_copy.roots'::regclass AND d.refobjid <> r.ev_class`)
    expect(dependencies).toEqual([{ reads: "graph_copy.nodes" }])
  }, 60_000)
})

describe("plinth app --tenant", () => {
  it("exports from and imports into a tenant's database; without --tenant in multi-tenant mode, one line", async () => {
    const tenant = `plinth_test_appdef_${Math.random().toString(36).slice(2, 8)}`
    const env = { ...envOf(stack.db), MULTI_TENANT: "true" }
    const run = async (args: ReadonlyArray<string>) => {
      const child = runPlinth(args, env)
      const code = await child.exited
      return { code, stdout: child.stdout(), errors: child.stderr().trim().split("\n").filter((line) => line !== "") }
    }
    try {
      expect((await run(["tenant", "create", tenant])).code).toBe(0)
      const definition = await exported(APP)
      const file = writeDefinition("tenant.json", definition)
      const imported = await run(["app", "import", file, "--tenant", tenant])
      expect(imported.errors).toEqual([])
      expect(imported.stdout.trim()).toBe(`Imported ${file} as ${APP}: 2 tables, 1 view, 1 page.`)
      const back = await run(["app", "export", APP, "--tenant", tenant])
      expect(JSON.parse(back.stdout)).toEqual(definition)
      expectOneLine(await run(["app", "export", APP]), /^plinth: multi-tenant mode: name the tenant with --tenant <name>$/)
      expectOneLine(await run(["app", "import", file]), /^plinth: multi-tenant mode: name the tenant with --tenant <name>$/)
    } finally {
      await query(stack.db.adminUrl, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS "${tenant}" WITH (FORCE)`))
    }
  }, 120_000)
})
