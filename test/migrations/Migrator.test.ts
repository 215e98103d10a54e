/**
 * Migrations against real PostgreSQL: order, exactly-once, concurrent starters, atomic failure,
 * tamper detection, and what the first migration creates.
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { migrateDatabase, withDatabase } from "../../src/layers/Database.ts"
import { migrate, readMigrations } from "../../src/services/Migrator.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"

const databases: Array<TestDatabase> = []
const freshDatabase = async () => {
  const db = await createTestDatabase({ migrated: false })
  databases.push(db)
  return db
}
afterAll(async () => {
  for (const db of databases) await db.drop()
})

const migrationsDir = async (files: Record<string, string>) => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "plinth-migrations-"))
  for (const [name, text] of Object.entries(files)) await fs.writeFile(path.join(dir, name), text)
  return dir
}

const runMigrations = (url: string, dir: string) =>
  Effect.runPromise(Effect.flatMap(readMigrations(dir), (migrations) => withDatabase(url, migrate(migrations))))

const failureOf = (url: string, dir: string) =>
  Effect.runPromise(Effect.flip(Effect.flatMap(readMigrations(dir), (migrations) => withDatabase(url, migrate(migrations)))))

const recorded = (url: string) =>
  query(url, (sql) =>
    sql<{ version: number; name: string }>`SELECT version, name FROM plinth.schema_migrations ORDER BY applied_at, version`)

describe("the project's migrations", () => {
  it("apply in order on an empty database, then are up to date", async () => {
    const db = await freshDatabase()
    const files = (await fs.readdir("migrations")).filter((f) => f.endsWith(".sql")).sort()
    expect(await Effect.runPromise(migrateDatabase(db.adminUrl))).toEqual(files)
    expect(await Effect.runPromise(migrateDatabase(db.adminUrl))).toEqual([])
    expect((await recorded(db.adminUrl)).map((row) => row.version)).toEqual(files.map((f) => Number(f.slice(0, 4))))
  })

  it("five processes starting at once apply each file exactly once", async () => {
    const db = await freshDatabase()
    const results = await Promise.all(Array.from({ length: 5 }, () => Effect.runPromise(migrateDatabase(db.adminUrl))))
    const files = (await fs.readdir("migrations")).filter((f) => f.endsWith(".sql")).sort()
    expect(results.flat().sort()).toEqual(files)
    expect(await recorded(db.adminUrl)).toHaveLength(files.length)
  })

  it("the first migration creates the roles, the login roles and the sys schema", async () => {
    const db = await freshDatabase()
    await Effect.runPromise(migrateDatabase(db.adminUrl))
    const roles = await query(db.adminUrl, (sql) =>
      sql<{ rolname: string; rolcanlogin: boolean; rolinherit: boolean; rolsuper: boolean; member_of: Array<string> }>`
        SELECT r.rolname, r.rolcanlogin, r.rolinherit, r.rolsuper,
          coalesce(array_agg(g.rolname ORDER BY g.rolname) FILTER (WHERE g.rolname IS NOT NULL), '{}') AS member_of
        FROM pg_roles r
        LEFT JOIN pg_auth_members m ON m.member = r.oid
        LEFT JOIN pg_roles g ON g.oid = m.roleid
        WHERE r.rolname IN ('owner', 'admin', 'staff', 'member', 'anon', 'authenticator', 'chat_authenticator')
        GROUP BY r.rolname, r.rolcanlogin, r.rolinherit, r.rolsuper`)
    const byName = Object.fromEntries(roles.map((role) => [role.rolname, role]))
    for (const name of ["owner", "admin", "staff", "member", "anon"]) {
      expect(byName[name]).toMatchObject({ rolcanlogin: false, rolsuper: false })
    }
    expect(byName["authenticator"]).toMatchObject({ rolcanlogin: true, rolinherit: false, rolsuper: false })
    expect([...byName["authenticator"]!.member_of].sort()).toEqual(["admin", "anon", "member", "owner", "staff"])
    expect(byName["chat_authenticator"]).toMatchObject({ rolcanlogin: true, rolsuper: false })
    const [schema] = await query(db.adminUrl, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'sys'`)
    expect(schema!.n).toBe(1)
  })
})

describe("the migration runner", () => {
  it("applies files in version order, whatever order they were written in", async () => {
    const db = await freshDatabase()
    const dir = await migrationsDir({
      "0010_third.sql": "INSERT INTO steps VALUES (3);",
      "0002_second.sql": "INSERT INTO steps VALUES (2);",
      "0001_first.sql": "CREATE TABLE steps (n int);"
    })
    expect(await runMigrations(db.adminUrl, dir)).toEqual(["0001_first.sql", "0002_second.sql", "0010_third.sql"])
    const rows = await query(db.adminUrl, (sql) => sql<{ n: number }>`SELECT n FROM steps`)
    expect(rows.map((row) => row.n)).toEqual([2, 3])
  })

  it("splits statements with PostgreSQL's parser: semicolons in strings, comments and dollar quotes", async () => {
    const db = await freshDatabase()
    const dir = await migrationsDir({
      "0001_tricky.sql": [
        "-- a comment; with a semicolon",
        "CREATE TABLE notes (t text);",
        "INSERT INTO notes VALUES ('a; b'), ($$c; d$$);",
        "CREATE FUNCTION twice(x int) RETURNS int LANGUAGE plpgsql AS $body$ BEGIN RETURN x * 2; END; $body$;",
        "/* é; unicode before the next statement */ INSERT INTO notes VALUES (twice(21)::text);"
      ].join("\n")
    })
    await runMigrations(db.adminUrl, dir)
    const rows = await query(db.adminUrl, (sql) => sql<{ t: string }>`SELECT t FROM notes ORDER BY t`)
    expect(rows.map((row) => row.t)).toEqual(["42", "a; b", "c; d"])
  })

  it("a failing migration leaves nothing behind and stops the run, naming the file", async () => {
    const db = await freshDatabase()
    const dir = await migrationsDir({
      "0001_ok.sql": "CREATE TABLE kept (n int);",
      "0002_broken.sql": "CREATE TABLE half (n int); INSERT INTO missing VALUES (1);",
      "0003_later.sql": "CREATE TABLE later (n int);"
    })
    const error = await failureOf(db.adminUrl, dir)
    expect(error.message).toContain("0002_broken.sql")
    expect(error.message).toContain("missing")
    const tables = await query(db.adminUrl, (sql) =>
      sql<{ relname: string }>`SELECT relname FROM pg_class WHERE relname IN ('kept', 'half', 'later') ORDER BY relname`)
    expect(tables.map((row) => row.relname)).toEqual(["kept"])
    expect((await recorded(db.adminUrl)).map((row) => row.version)).toEqual([1])
  })

  it("refuses a migration that was changed after it was applied", async () => {
    const db = await freshDatabase()
    const dir = await migrationsDir({ "0001_first.sql": "CREATE TABLE t (n int);" })
    await runMigrations(db.adminUrl, dir)
    await fs.writeFile(path.join(dir, "0001_first.sql"), "CREATE TABLE t (n bigint);")
    expect((await failureOf(db.adminUrl, dir)).message).toContain("0001_first.sql was changed after it was applied")
  })

  it.each([
    [{ "1_short.sql": "SELECT 1;" }, "named NNNN_name.sql"],
    [{ "0001_Upper.sql": "SELECT 1;" }, "named NNNN_name.sql"],
    [{ "0001_a.sql": "SELECT 1;", "0001_b.sql": "SELECT 2;" }, "used twice"],
    [{ "0001_bad.sql": "CREATE TABLE (;" }, "0001_bad.sql: syntax error"]
  ])("refuses %j", async (files, message) => {
    const db = await freshDatabase()
    const dir = await migrationsDir(files)
    expect((await failureOf(db.adminUrl, dir)).message).toContain(message)
  })
})
