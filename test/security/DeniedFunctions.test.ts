/**
 * One denylist, two defences (issue #19, finding 10): the SQL guard refuses a call of every
 * function in src/services/DeniedFunctions.ts, and in a migrated database no Plinth role may
 * execute any function of those names; conversely, every catalog function the app roles may not
 * execute is one the guard refuses, so the two lists cannot drift apart again. The migrator
 * re-applies the revokes on every run.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { migrateDatabase, withDatabase } from "../../src/layers/Database.ts"
import { APP_ROLES, isDeniedFunction, LOGIN_ROLE_GRANTS, LOGIN_ROLES } from "../../src/services/DeniedFunctions.ts"
import { revokeDeniedFunctions } from "../../src/services/Migrator.ts"
import { isDeniedFunction as guardDenies, makeSqlGuard } from "../../src/services/SqlGuard.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(() => db?.drop())

const rows = <Row extends object>(text: string) => query(db.adminUrl, (sql) => sql.unsafe<Row>(text)).then((found) => [...found])

const list = (values: ReadonlyArray<string>) => values.map((value) => `'${value.replaceAll("'", "''")}'`).join(", ")

interface Executable {
  readonly fn: string
  readonly proname: string
  readonly role: string
}

/** Every (function, role) pair of the given roles where the role may execute a function the guard denies. */
const executableDenied = async (roles: ReadonlyArray<string>): Promise<Array<Executable>> => {
  const all = await rows<Executable>(`
    SELECT p.oid::regprocedure::text AS fn, p.proname::text AS proname, r AS role
    FROM pg_proc p, unnest(ARRAY[${list(roles)}]) AS r
    WHERE has_function_privilege(r, p.oid, 'EXECUTE')
    ORDER BY 1, 3`)
  return all.filter((row) => isDeniedFunction(row.proname))
}

/** What the login roles keep on purpose, as `function|role`. */
const keptByLoginRoles = async (): Promise<Set<string>> => {
  const kept = await rows<{ fn: string }>(`SELECT to_regprocedure(f)::text AS fn FROM unnest(ARRAY[${list(LOGIN_ROLE_GRANTS)}]) AS f`)
  return new Set(kept.flatMap(({ fn }) => LOGIN_ROLES.map((role) => `${fn}|${role}`)))
}

describe("the guard and the database's privileges agree", () => {
  it("the guard's isDeniedFunction is the shared list's", () => {
    for (const name of ["set_config", "pg_advisory_xact_lock", "PG_TRY_ADVISORY_XACT_LOCK_SHARED", "database_to_xml", "lo_import", "dblink_x", "now", "lower"]) {
      expect(guardDenies(name), name).toBe(isDeniedFunction(name))
    }
  })

  it("attack: no app role may execute a function the guard denies (in any schema, any overload)", async () => {
    const names = new Set((await rows<{ proname: string }>("SELECT DISTINCT proname::text AS proname FROM pg_proc")).map((row) => row.proname))
    // The ones issue #19 found reachable: transaction-level advisory locks and whole-database XML.
    for (const name of ["pg_advisory_xact_lock", "pg_advisory_xact_lock_shared", "pg_try_advisory_xact_lock", "pg_try_advisory_xact_lock_shared",
      "database_to_xml", "database_to_xmlschema", "database_to_xml_and_xmlschema", "schema_to_xml", "table_to_xml", "table_to_xml_and_xmlschema"]) {
      expect(names.has(name), name).toBe(true)
      expect(isDeniedFunction(name), name).toBe(true)
    }
    expect(await executableDenied(APP_ROLES)).toEqual([])
  })

  it("the login roles may execute only set_config and pg_notify of the denied functions", async () => {
    const kept = await keptByLoginRoles()
    expect(kept.size).toBe(LOGIN_ROLE_GRANTS.length * LOGIN_ROLES.length)
    const executable = await executableDenied(LOGIN_ROLES)
    expect(executable.filter((row) => !kept.has(`${row.fn}|${row.role}`))).toEqual([])
    expect(executable.map((row) => `${row.fn}|${row.role}`).sort()).toEqual([...kept].sort())
  })

  it("every catalog function an app role may not execute is denied by the guard", async () => {
    const withheld = await rows<{ proname: string }>(`
      SELECT DISTINCT p.proname::text AS proname
      FROM pg_proc p, unnest(ARRAY[${list(APP_ROLES)}]) AS r
      WHERE p.pronamespace = 'pg_catalog'::regnamespace AND NOT has_function_privilege(r, p.oid, 'EXECUTE')
      ORDER BY 1`)
    expect(withheld.length).toBeGreaterThan(50)
    expect(withheld.map((row) => row.proname).filter((name) => !isDeniedFunction(name))).toEqual([])
  })

  it("the guard refuses a call of each withheld catalog function by name", async () => {
    const guard = makeSqlGuard()
    const withheld = await rows<{ proname: string }>(`
      SELECT DISTINCT p.proname::text AS proname FROM pg_proc p
      WHERE p.pronamespace = 'pg_catalog'::regnamespace AND NOT has_function_privilege('member', p.oid, 'EXECUTE')`)
    for (const { proname } of withheld) {
      const error = await Effect.runPromise(Effect.flip(guard.check(`SELECT pg_catalog.${proname}()`)))
      expect(error.message, proname).toBe(`function ${proname} is not allowed`)
    }
  })
})

describe("the migrator revokes on every run", () => {
  it("attack: a grant made after the migrations (or a new function of a denied name) is revoked by the next run", async () => {
    await rows(`GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_xact_lock(bigint) TO PUBLIC, member`)
    await rows(`GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO staff`)
    await rows(`CREATE FUNCTION public.lo_sneaky() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
    expect((await executableDenied(APP_ROLES)).map((row) => `${row.fn}|${row.role}`)).toEqual(expect.arrayContaining([
      "pg_advisory_xact_lock(bigint)|member",
      "set_config(text,text,boolean)|staff",
      "lo_sneaky()|member"
    ]))
    expect(await Effect.runPromise(migrateDatabase(db.adminUrl))).toEqual([])
    expect(await executableDenied(APP_ROLES)).toEqual([])
    // What the login roles keep, they still have.
    const kept = await keptByLoginRoles()
    expect((await executableDenied(LOGIN_ROLES)).map((row) => `${row.fn}|${row.role}`).sort()).toEqual([...kept].sort())
  })

  it("a second run in order changes nothing", async () => {
    const before = await rows<{ acl: string }>("SELECT p.oid::regprocedure::text || coalesce(p.proacl::text, '') AS acl FROM pg_proc p ORDER BY 1")
    expect(await Effect.runPromise(migrateDatabase(db.adminUrl))).toEqual([])
    expect(await rows<{ acl: string }>("SELECT p.oid::regprocedure::text || coalesce(p.proacl::text, '') AS acl FROM pg_proc p ORDER BY 1")).toEqual(before)
  })

  it("a migrating role that is no superuser revokes what it owns and reports what it cannot", async () => {
    // Roles belong to the whole server: a name of this run's own, dropped again at the end.
    const role = `limited_admin_${db.name.slice(-12)}`
    const password = "limited-admin-password"
    await rows(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`)
    try {
      // What the migration lock needs, which the superuser's runs revoked from PUBLIC.
      await rows(`GRANT EXECUTE ON FUNCTION pg_catalog.pg_advisory_xact_lock(bigint) TO ${role}`)
      await rows(`GRANT CREATE ON SCHEMA public TO ${role}`)
      await rows("CREATE FUNCTION public.lo_foreign() RETURNS int LANGUAGE sql AS 'SELECT 1'")
      const url = new URL(db.adminUrl)
      url.username = role
      url.password = password
      await query(url.toString(), (sql) => sql.unsafe("CREATE FUNCTION public.lo_mine() RETURNS int LANGUAGE sql AS 'SELECT 1'"))
      const result = await Effect.runPromise(withDatabase(url.toString(), revokeDeniedFunctions()))
      expect(result.notRevocable).toEqual(["lo_foreign()"])
      expect((await executableDenied(APP_ROLES)).map((row) => row.fn)).toEqual(APP_ROLES.map(() => "lo_foreign()"))
      // The superuser's next run settles the rest.
      await Effect.runPromise(migrateDatabase(db.adminUrl))
      expect(await executableDenied(APP_ROLES)).toEqual([])
    } finally {
      await rows(`DROP OWNED BY ${role}`)
      await rows(`DROP ROLE ${role}`)
    }
  })
})
