/**
 * The sys SQL of `sql/sys/` (functions, views and triggers, one definition each): applied after
 * the migrations when a file changed, once however many processes start at once; and the upgrade
 * of a database migrated when those bodies still lived in the numbered migrations
 * (test/migrations/fixtures/previous/ is `migrations/` as it was then, and fixtures/sys-at-move/
 * the sys SQL the move made of them; later changes of either are upgrades of their own).
 */
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { migrateDatabase, withDatabase } from "../../src/layers/Database.ts"
import {
  applySysSql,
  migrate,
  MIGRATIONS_DIR,
  readMigrations,
  readSysSql,
  revokeDeniedFunctions,
  SYS_SQL_DIR
} from "../../src/services/Migrator.ts"
import { createTestDatabase, query, runSql, type TestDatabase } from "../support/database.ts"

const PREVIOUS_MIGRATIONS = path.join(import.meta.dirname, "fixtures", "previous")
const SYS_SQL_AT_MOVE = path.join(import.meta.dirname, "fixtures", "sys-at-move")

const databases: Array<TestDatabase> = []
const freshDatabase = async () => {
  const db = await createTestDatabase({ migrated: false })
  databases.push(db)
  return db
}
afterAll(async () => {
  for (const db of databases) await db.drop()
})

/** A copy of a folder of SQL files, to edit without touching the project's. */
const copyOf = async (dir: string) => {
  const copy = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-sql-"))
  for (const file of await fs.readdir(dir)) await fs.copyFile(path.join(dir, file), path.join(copy, file))
  return copy
}

const editFile = async (file: string, from: string, to: string) => {
  const text = await fs.readFile(file, "utf8")
  expect(text).toContain(from)
  await fs.writeFile(file, text.replace(from, to))
}

/** What migrateDatabase does, from the given folders; returns the sys files it ran. */
const migrateFrom = (url: string, migrationsDir: string, sysDir: string) =>
  Effect.runPromise(Effect.gen(function*() {
    const migrations = yield* readMigrations(migrationsDir)
    const files = yield* readSysSql(sysDir)
    return yield* withDatabase(url, Effect.gen(function*() {
      yield* migrate(migrations)
      const applied = yield* applySysSql(files)
      yield* revokeDeniedFunctions()
      return applied
    }))
  }))

const sysFileNames = async () => (await fs.readdir(SYS_SQL_DIR)).filter((f) => f.endsWith(".sql")).sort()

const appliedAt = async (url: string) =>
  Object.fromEntries((await query(url, (sql) =>
    sql<{ name: string; at: string }>`SELECT name, applied_at::text AS at FROM plinth.sys_sql`)).map((row) => [row.name, row.at]))

const functionSource = async (url: string, fn: string) =>
  (await query(url, (sql) => sql<{ src: string }>`SELECT prosrc AS src FROM pg_proc WHERE oid = to_regprocedure(${fn})`))[0]?.src

describe("the sys SQL files", () => {
  it("each defines its functions once: no function body is left in a numbered migration", async () => {
    for (const file of (await fs.readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql"))) {
      const text = await fs.readFile(path.join(MIGRATIONS_DIR, file), "utf8")
      expect(text, file).not.toMatch(/CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|VIEW|TRIGGER|PROCEDURE)/i)
    }
    const definitions = new Map<string, string>()
    for (const file of await sysFileNames()) {
      const text = await fs.readFile(path.join(SYS_SQL_DIR, file), "utf8")
      for (const [, name, args] of text.matchAll(/CREATE OR REPLACE FUNCTION (\S+?)\(([^)]*)\)/g)) {
        const key = `${name}(${args})`
        expect(definitions.get(key), key).toBeUndefined()
        definitions.set(key, file)
      }
    }
    expect(definitions.size).toBeGreaterThan(50)
  })

  it("an edited file is applied again on the next migrate, and nothing is applied otherwise", async () => {
    const db = await freshDatabase()
    const sysDir = await copyOf(SYS_SQL_DIR)
    expect(await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)).toEqual(await sysFileNames())
    const first = await appliedAt(db.adminUrl)
    expect(await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)).toEqual([])
    expect(await appliedAt(db.adminUrl)).toEqual(first)

    await editFile(path.join(sysDir, "02_management.sql"), "'only an owner or an admin may change the schema'",
      "'only an owner or an admin may change the schema (edited)'")
    expect(await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)).toEqual(["02_management.sql"])
    expect(await functionSource(db.adminUrl, "sys.require_manager()")).toContain("(edited)")
    const second = await appliedAt(db.adminUrl)
    expect(second["02_management.sql"]).not.toBe(first["02_management.sql"])
    expect({ ...second, "02_management.sql": "" }).toEqual({ ...first, "02_management.sql": "" })
    // The edit keeps what it did not change: grants and the triggers that use the file's functions.
    const [kept] = await query(db.adminUrl, (sql) =>
      sql<{ granted: boolean; public: boolean; triggers: number }>`
        SELECT has_function_privilege('owner', 'sys.create_table(text, jsonb)', 'EXECUTE') AS granted,
          has_function_privilege('member', 'sys.current_schema_name()', 'EXECUTE') AS public,
          (SELECT count(*)::int FROM pg_trigger WHERE tgname IN ('apps_changed', 'settings_changed')) AS triggers`)
    expect(kept).toEqual({ granted: true, public: false, triggers: 2 })

    expect(await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)).toEqual([])
  })

  it("a migration applied later runs them all again, so what it dropped is defined again", async () => {
    const db = await freshDatabase()
    const migrationsDir = await copyOf(MIGRATIONS_DIR)
    await migrateFrom(db.adminUrl, migrationsDir, SYS_SQL_DIR)
    await fs.writeFile(path.join(migrationsDir, "9999_drop_a_view.sql"), "DROP VIEW sys.pages_v;")
    expect(await migrateFrom(db.adminUrl, migrationsDir, SYS_SQL_DIR)).toEqual(await sysFileNames())
    const [view] = await query(db.adminUrl, (sql) =>
      sql<{ found: boolean; granted: boolean }>`SELECT to_regclass('sys.pages_v') IS NOT NULL AS found,
        has_table_privilege('member', 'sys.pages_v', 'SELECT') AS granted`)
    expect(view).toEqual({ found: true, granted: true })
    expect(await migrateFrom(db.adminUrl, migrationsDir, SYS_SQL_DIR)).toEqual([])
  })

  it("migrators starting at once apply each file once, also after an edit", async () => {
    const db = await freshDatabase()
    const sysDir = await copyOf(SYS_SQL_DIR)
    const together = () => Promise.all(Array.from({ length: 3 }, () => migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)))
    expect((await together()).flat().sort()).toEqual(await sysFileNames())
    await editFile(path.join(sysDir, "06_apps.sql"), "FROM sys.apps a ORDER BY a.display_name, a.schema_name;",
      "FROM sys.apps a ORDER BY a.display_name, a.schema_name, a.id;")
    expect((await together()).flat()).toEqual(["06_apps.sql"])
  })

  it("a failing file changes nothing of its own, stops the run naming it, and runs again next time", async () => {
    const db = await freshDatabase()
    const sysDir = await copyOf(SYS_SQL_DIR)
    await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)
    await editFile(path.join(sysDir, "05_views.sql"), "'a view needs a SELECT'", "'a view needs a SELECT!'")
    await fs.appendFile(path.join(sysDir, "05_views.sql"), "\nSELECT sys.no_such_function();\n")
    const error = await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir).then(() => undefined, (e: Error) => e)
    expect(error?.message).toContain("sql/sys/05_views.sql")
    expect(error?.message).toContain("no_such_function")
    expect(await functionSource(db.adminUrl, "sys.create_view(text, text)")).not.toContain("SELECT!")
    await editFile(path.join(sysDir, "05_views.sql"), "\nSELECT sys.no_such_function();\n", "\n")
    expect(await migrateFrom(db.adminUrl, MIGRATIONS_DIR, sysDir)).toEqual(["05_views.sql"])
    expect(await functionSource(db.adminUrl, "sys.create_view(text, text)")).toContain("SELECT!")
  })

  it("a numbered migration changed after it was applied still stops start-up", async () => {
    const db = await freshDatabase()
    await Effect.runPromise(migrateDatabase(db.adminUrl))
    await query(db.adminUrl, (sql) => sql`UPDATE plinth.schema_migrations SET checksum = 'an older text' WHERE version = 5`)
    const error = await Effect.runPromise(Effect.flip(migrateDatabase(db.adminUrl)))
    expect(error.message).toContain("0005_managed_schema.sql was changed after it was applied")
  })
})

/**
 * Everything the migrations and the sys SQL define, as the catalog shows it: functions (definition,
 * owner, privileges), relations (columns, indexes, views, privileges, row security), constraints,
 * triggers, policies, schemas and what the migrator recorded.
 */
const catalog = (url: string) =>
  runSql(url, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const schemas = ["sys", "plinth", "public", "extensions"]
    const inSchemas = JSON.stringify(schemas)
    const functions = yield* sql`
      SELECT p.oid::regprocedure::text AS name, pg_get_userbyid(p.proowner) AS owner,
        CASE WHEN n.nspname IN ('sys', 'plinth') THEN pg_get_functiondef(p.oid) END AS definition,
        array(SELECT format('%s=%s%s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
            a.privilege_type, CASE WHEN a.is_grantable THEN '*' ELSE '' END)
          FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a ORDER BY 1) AS acl
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname IN ('sys', 'plinth') OR p.proacl IS NOT NULL
      ORDER BY 1`
    const relations = yield* sql`
      SELECT c.oid::regclass::text AS name, c.relkind::text AS kind, c.reloptions AS options,
        c.relrowsecurity AS rls, c.relforcerowsecurity AS force_rls, pg_get_userbyid(c.relowner) AS owner,
        CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) END AS definition,
        array(SELECT format('%s %s%s %s', a.attname, format_type(a.atttypid, a.atttypmod), CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
            coalesce(pg_get_expr(d.adbin, d.adrelid), ''))
          FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum) AS columns,
        array(SELECT format('%s=%s%s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END,
            a.privilege_type, CASE WHEN a.is_grantable THEN '*' ELSE '' END)
          FROM aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a ORDER BY 1) AS acl,
        array(SELECT format('%s %s', a.attname, a.attacl) FROM pg_attribute a
          WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL ORDER BY 1) AS column_acl
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname IN (SELECT jsonb_array_elements_text(${inSchemas}::jsonb))
      ORDER BY 1`
    const constraints = yield* sql`
      SELECT k.conrelid::regclass::text AS relation, k.conname AS name, pg_get_constraintdef(k.oid) AS definition
      FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace
      WHERE n.nspname IN (SELECT jsonb_array_elements_text(${inSchemas}::jsonb))
      ORDER BY 1, 2`
    const triggers = yield* sql`
      SELECT t.tgrelid::regclass::text AS relation, t.tgname AS name, pg_get_triggerdef(t.oid) AS definition, t.tgenabled::text AS enabled
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE NOT t.tgisinternal AND n.nspname IN (SELECT jsonb_array_elements_text(${inSchemas}::jsonb))
      ORDER BY 1, 2`
    const policies = yield* sql`
      SELECT schemaname, tablename, policyname, permissive, roles::text[] AS roles, cmd, qual, with_check
      FROM pg_policies WHERE schemaname IN (SELECT jsonb_array_elements_text(${inSchemas}::jsonb))
      ORDER BY 1, 2, 3`
    const namespaces = yield* sql`
      SELECT nspname AS name, pg_get_userbyid(nspowner) AS owner,
        array(SELECT format('%s=%s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type)
          FROM aclexplode(coalesce(nspacl, acldefault('n', nspowner))) a ORDER BY 1) AS acl
      FROM pg_namespace WHERE nspname IN (SELECT jsonb_array_elements_text(${inSchemas}::jsonb)) ORDER BY 1`
    const database = yield* sql`
      SELECT array(SELECT format('%s=%s', CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END, a.privilege_type)
        FROM aclexplode(coalesce(datacl, acldefault('d', datdba))) a ORDER BY 1) AS acl
      FROM pg_database WHERE datname = current_database()`
    const migrations = yield* sql`SELECT version, name, checksum FROM plinth.schema_migrations ORDER BY version`
    const [sysSqlTable] = yield* sql<{ found: boolean }>`SELECT to_regclass('plinth.sys_sql') IS NOT NULL AS found`
    const sysSql = sysSqlTable!.found ? yield* sql`SELECT name, checksum, migrations FROM plinth.sys_sql ORDER BY name` : []
    return { functions, relations, constraints, triggers, policies, namespaces, database, migrations, sysSql }
  }))

/** The migrations of the move (today's text of those the fixture has) with the sys SQL it made of them. */
const migrateAsMoved = async (url: string) => {
  const migrationsDir = await copyOf(MIGRATIONS_DIR)
  const previous = new Set(await fs.readdir(PREVIOUS_MIGRATIONS))
  for (const file of await fs.readdir(migrationsDir)) if (!previous.has(file)) await fs.rm(path.join(migrationsDir, file))
  await migrateFrom(url, migrationsDir, SYS_SQL_AT_MOVE)
}

/** The migrations made after the move, which an upgrade from the fixture applies. */
const migrationsSinceMove = async () => {
  const previous = new Set(await fs.readdir(PREVIOUS_MIGRATIONS))
  return (await fs.readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith(".sql") && !previous.has(file)).sort()
}

/** What migrateDatabase did before the sys SQL files: the previous migrations, then the revokes. */
const migratePreviously = (url: string) =>
  Effect.runPromise(Effect.flatMap(readMigrations(PREVIOUS_MIGRATIONS), (migrations) =>
    withDatabase(url, Effect.andThen(migrate(migrations), revokeDeniedFunctions()))))

describe("a database migrated before the sys SQL files", () => {
  it("upgrades to what a fresh database is: functions, views, triggers, policies and privileges", async () => {
    const [previous, moved, fresh] = await Promise.all([freshDatabase(), freshDatabase(), freshDatabase()])
    await migratePreviously(previous.adminUrl)
    await migrateAsMoved(moved.adminUrl)
    await Effect.runPromise(migrateDatabase(fresh.adminUrl))
    const expected = await catalog(fresh.adminUrl)
    expect(expected.functions.length).toBeGreaterThan(50)
    expect(expected.triggers.length).toBeGreaterThan(3)
    expect(expected.policies.length).toBeGreaterThan(5)
    // The move itself changed nothing a database holds: only what the migrator records differs.
    const before = await catalog(previous.adminUrl)
    const atMove = await catalog(moved.adminUrl)
    const withoutSysSql = (rows: ReadonlyArray<unknown>) =>
      rows.filter((row) => !JSON.stringify(row).includes("plinth.sys_sql"))
    for (const key of ["functions", "relations", "constraints", "triggers", "policies", "namespaces", "database"] as const) {
      expect(before[key], key).toEqual(withoutSysSql(atMove[key]))
    }

    expect(await Effect.runPromise(migrateDatabase(previous.adminUrl))).toEqual(await migrationsSinceMove())
    const upgraded = await catalog(previous.adminUrl)
    for (const key of Object.keys(expected) as Array<keyof typeof expected>) expect(upgraded[key], key).toEqual(expected[key])
    expect(await Effect.runPromise(migrateDatabase(previous.adminUrl))).toEqual([])
  })

  it("keeps its data, and its managed tables keep working with the functions that replaced theirs", async () => {
    const db = await freshDatabase()
    await migratePreviously(db.adminUrl)
    const inApp = (statement: string) =>
      runSql(db.adminUrl, Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT set_config('app.app_id', (SELECT id::text FROM sys.apps WHERE schema_name = 'shop'), true)`
          return yield* sql.unsafe(statement)
        }))
      }))
    await query(db.adminUrl, (sql) => sql`SELECT sys.create_app('shop', 'Shop')`)
    await inApp(`SELECT sys.create_table('items', '[{"name": "title", "type": "text"}]')`)
    await inApp(`INSERT INTO shop.items (title) VALUES ('before')`)
    await query(db.adminUrl, (sql) => sql`SELECT sys.create_page('home', 'Home', '<p>hi</p>')`)

    expect(await Effect.runPromise(migrateDatabase(db.adminUrl))).toEqual(await migrationsSinceMove())

    await inApp(`SELECT sys.alter_table('items', '[{"op": "add_column", "column": {"name": "price", "type": "currency"}}]')`)
    await inApp(`UPDATE shop.items SET price = 2.5, updated_at = '2000-01-01' WHERE title = 'before'`)
    const rows = await inApp(`SELECT title, price::text AS price, updated_at > '2001-01-01' AS touched FROM shop.items_v`)
    expect(rows).toEqual([{ title: "before", price: "2.50", touched: true }])
    const [kept] = await query(db.adminUrl, (sql) =>
      sql<{ pages: number; apps: Array<string> }>`SELECT (SELECT count(*)::int FROM sys.pages_v) AS pages,
        array(SELECT schema_name FROM sys.list_apps()) AS apps`)
    expect(kept).toEqual({ pages: 1, apps: ["shop"] })
  })

  it("a rewritten migration edited once more is refused like any changed migration", async () => {
    const db = await freshDatabase()
    await migratePreviously(db.adminUrl)
    const migrationsDir = await copyOf(MIGRATIONS_DIR)
    await fs.appendFile(path.join(migrationsDir, "0005_managed_schema.sql"), "\n-- one more line\n")
    const error = await migrateFrom(db.adminUrl, migrationsDir, SYS_SQL_DIR).then(() => undefined, (e: Error) => e)
    expect(error?.message).toContain("0005_managed_schema.sql was changed after it was applied")
  })
})
