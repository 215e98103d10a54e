/**
 * sys.get_table_permissions and sys.set_table_permissions (spec §4.4): the defaults of a managed
 * table (staff all/all/all, member own/own/own, anon none), what each level does to the rows a
 * role may read, write and delete, the boolean form, idempotence, and the errors.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { SignIn } from "../support/auth.ts"
import { type AuthStack, startAuthStack } from "../support/auth.ts"
import {
  admin,
  alterTable,
  asRole,
  call,
  createTable,
  expectDbError,
  expectForbidden,
  fresh,
  insert,
  ok,
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

interface Permission {
  readonly table_name: string
  readonly role: string
  readonly read: string
  readonly write: string
  readonly delete: string
}

const getPermissions = (user: SignIn = users.owner) => sql<Permission>(stack, user, "SELECT * FROM sys.get_table_permissions()")

const permissionsOf = async (table: string) => ok(await getPermissions()).filter((p) => p.table_name === table)

const setPermissions = (table: unknown, role: unknown, read: unknown, write: unknown, del: unknown, user: SignIn = users.owner) =>
  call(stack, user, "sys.set_table_permissions($1, $2, $3, $4, $5)", [table, role, read, write, del])

const setPermissionsBool = (table: string, role: string, read: boolean, write: boolean, del: boolean, user: SignIn = users.owner) =>
  call(stack, user, "sys.set_table_permissions($1, $2, $3::boolean, $4::boolean, $5::boolean)", [table, role, read, write, del])

const policies = (table: string) =>
  admin<{ policyname: string; cmd: string; roles: ReadonlyArray<string>; qual: string | null; with_check: string | null }>(
    stack,
    "SELECT policyname, cmd, roles::text[] AS roles, qual, with_check FROM pg_policies WHERE schemaname = 'public' AND tablename = $1 ORDER BY policyname",
    [table]
  )

const grants = async (table: string) =>
  (await admin<{ g: string }>(
    stack,
    `SELECT grantee || ':' || privilege_type AS g FROM information_schema.role_table_grants
     WHERE table_schema = 'public' AND table_name = $1 AND grantee IN ('owner', 'admin', 'staff', 'member', 'anon') ORDER BY 1`,
    [table]
  )).map((r) => r.g)

/** A table with one row by each of member, member2 and staff. */
const makeTable = async () => {
  const name = fresh("docs")
  result(await createTable(stack, users.owner, name, [{ name: "body" }]))
  await insert(stack, users.member, name, { body: "m1" })
  await insert(stack, users.member2, name, { body: "m2" })
  await insert(stack, users.staff, name, { body: "s" })
  return name
}

const bodies = async (user: SignIn, table: string) =>
  ok(await sql<{ body: string }>(stack, user, `SELECT body FROM ${table} ORDER BY body`)).map((r) => r.body)

describe("sys.get_table_permissions", () => {
  it("as owner and as admin: the defaults of each managed table, staff, member, anon in that order", async () => {
    const name = fresh("defaults")
    result(await createTable(stack, users.owner, name, []))
    const expected = [
      { table_name: name, role: "staff", read: "all", write: "all", delete: "all" },
      { table_name: name, role: "member", read: "own", write: "own", delete: "own" },
      { table_name: name, role: "anon", read: "none", write: "none", delete: "none" }
    ]
    for (const user of [users.owner, users.admin]) {
      const response = await getPermissions(user)
      expect(response.status).toBe(200)
      expect(response.body.rows.filter((p) => p.table_name === name)).toEqual(expected)
    }
  })

  it("lists only managed tables, sorted by table name", async () => {
    await admin(stack, `CREATE TABLE public.${fresh("unmanaged")} (id int)`)
    const rows = ok(await getPermissions())
    const managed = (await admin<{ table_name: string }>(stack, "SELECT table_name FROM sys.table_metadata WHERE schema_name = 'public'")).map((r) => r.table_name)
    expect(new Set(rows.map((r) => r.table_name))).toEqual(new Set(managed))
    const names = rows.map((r) => r.table_name)
    expect(names).toEqual([...names].sort())
  })

  it.each(["staff", "member"] as const)("as %s: 403 42501", async (role) => {
    expectForbidden(await getPermissions(users[role]))
  })
})

describe("sys.set_table_permissions", () => {
  it("member read=all: a member now sees everyone's rows; get_table_permissions shows it", async () => {
    const name = await makeTable()
    expect(await bodies(users.member, name)).toEqual(["m1"])
    expect(result(await setPermissions(name, "member", "all", "own", "own"))).toEqual({ table: name, role: "member", read: "all", write: "own", delete: "own" })
    expect(await bodies(users.member, name)).toEqual(["m1", "m2", "s"])
    expect(ok(await sql(stack, users.member, `SELECT count(*)::int AS n FROM ${name}_v`))).toEqual([{ n: 3 }])
    expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "member", read: "all", write: "own", delete: "own" })
    // Writing stays limited to their own rows.
    expect(await sql(stack, users.member, `UPDATE ${name} SET body = 'x' WHERE body = 'm2'`)).toMatchObject({ status: 200, body: { rowCount: 0 } })
  })

  it("as admin: works the same", async () => {
    const name = await makeTable()
    expect(result(await setPermissions(name, "member", "all", "all", "all", users.admin))).toMatchObject({ table: name, read: "all" })
    expect(await bodies(users.member, name)).toEqual(["m1", "m2", "s"])
  })

  it("member write=none: INSERT and UPDATE → 403 42501; reading is unchanged", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "own", "none", "own"))
    expectDbError(await sql(stack, users.member, `INSERT INTO ${name} (body) VALUES ('new')`), 403, "42501")
    expectDbError(await sql(stack, users.member, `UPDATE ${name} SET body = 'x'`), 403, "42501")
    expect(await bodies(users.member, name)).toEqual(["m1"])
    expect(await admin(stack, `SELECT count(*)::int AS n FROM public.${name}`)).toEqual([{ n: 3 }])
  })

  it("member write=all: a member may update others' rows (but not their created_by)", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "all", "all", "none"))
    expect(await sql(stack, users.member, `UPDATE ${name} SET body = body || '!' WHERE body = 'm2'`)).toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(await admin(stack, `SELECT created_by::text FROM public.${name} WHERE body = 'm2!'`)).toEqual([{ created_by: users.member2.user.id }])
    expectDbError(await sql(stack, users.member, `UPDATE ${name} SET created_by = $1 WHERE body = 'm2!'`, [users.member.user.id]), 403, "42501")
  })

  it("member delete=own with read=all: a member deletes their own rows only; delete=none → 403", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "all", "own", "own"))
    expect(await sql(stack, users.member, `DELETE FROM ${name} WHERE body = 'm2'`)).toMatchObject({ status: 200, body: { rowCount: 0 } })
    expect(await sql(stack, users.member, `DELETE FROM ${name}`)).toMatchObject({ status: 200, body: { rowCount: 1 } })
    expect(await admin(stack, `SELECT body FROM public.${name} ORDER BY body`)).toEqual([{ body: "m2" }, { body: "s" }])

    result(await setPermissions(name, "member", "all", "own", "none"))
    expectDbError(await sql(stack, users.member2, `DELETE FROM ${name} WHERE body = 'm2'`), 403, "42501")
    expect(await admin(stack, `SELECT count(*)::int AS n FROM public.${name}`)).toEqual([{ n: 2 }])
  })

  it("member delete=all: a member may delete anyone's rows", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "all", "own", "all"))
    expect(await sql(stack, users.member, `DELETE FROM ${name} WHERE body <> 'm1'`)).toMatchObject({ status: 200, body: { rowCount: 2 } })
  })

  it("member read=none: SELECT → 403, and the read view too", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "none", "none", "none"))
    expectDbError(await sql(stack, users.member, `SELECT * FROM ${name}`), 403, "42501")
    expectDbError(await sql(stack, users.member, `SELECT * FROM ${name}_v`), 403, "42501")
    expect(await bodies(users.staff, name)).toEqual(["m1", "m2", "s"])
  })

  it("staff read=own: staff see only their own rows from now on", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "staff", "own", "own", "own"))
    expect(await bodies(users.staff, name)).toEqual(["s"])
    expect(await bodies(users.owner, name)).toEqual(["m1", "m2", "s"])
  })

  it("the boolean form (true, false, false) is all/none/none", async () => {
    const name = await makeTable()
    expect(result(await setPermissionsBool(name, "member", true, false, false))).toEqual({ table: name, role: "member", read: "all", write: "none", delete: "none" })
    expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "member", read: "all", write: "none", delete: "none" })
    expect(await bodies(users.member, name)).toEqual(["m1", "m2", "s"])
    expectDbError(await sql(stack, users.member, `INSERT INTO ${name} (body) VALUES ('x')`), 403, "42501")
    expectDbError(await sql(stack, users.member, `DELETE FROM ${name}`), 403, "42501")

    result(await setPermissionsBool(name, "member", false, true, true))
    expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "member", read: "none", write: "all", delete: "all" })
  })

  it("is idempotent: the same call twice gives the same policies and grants", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "all", "own", "none"))
    const firstPolicies = await policies(name)
    const firstGrants = await grants(name)
    result(await setPermissions(name, "member", "all", "own", "none"))
    expect(await policies(name)).toEqual(firstPolicies)
    expect(await grants(name)).toEqual(firstGrants)
    expect(firstPolicies.map((p) => `${p.policyname}:${p.cmd}`)).toEqual([
      "managers:ALL",
      "member_insert:INSERT",
      "member_read:SELECT",
      "member_update:UPDATE",
      "staff_delete:DELETE",
      "staff_insert:INSERT",
      "staff_read:SELECT",
      "staff_update:UPDATE"
    ])
    expect(firstPolicies.find((p) => p.policyname === "member_read")?.qual).toBe("true")
    expect(firstPolicies.find((p) => p.policyname === "member_insert")?.with_check).toContain("created_by")
    expect((await admin(stack, "SELECT count(*)::int AS n FROM sys.table_permissions WHERE table_name = $1", [name]))).toEqual([{ n: 3 }])
  })

  it("policies and grants survive sys.alter_table (the read view is rebuilt)", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "member", "all", "none", "none"))
    const before = await policies(name)
    result(await alterTable(stack, users.owner, name, [{ op: "add_column", column: { name: "extra" } }]))
    expect(await policies(name)).toEqual(before)
    expect(await bodies(users.member, name)).toEqual(["m1", "m2", "s"])
    expect(ok(await sql(stack, users.member, `SELECT count(*)::int AS n FROM ${name}_v`))).toEqual([{ n: 3 }])
  })

  it("anon: read=all lets anon read every row (table and read view) but not write; back to none removes it", async () => {
    const name = await makeTable()
    expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "anon", read: "none", write: "none", delete: "none" })
    expect(await grants(name)).not.toContainEqual(expect.stringMatching(/^anon:/))

    result(await setPermissions(name, "anon", "all", "none", "none"))
    expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "anon", read: "all", write: "none", delete: "none" })
    expect(await grants(name)).toContain("anon:SELECT")
    expect(await asRole(stack, "anon", "", `SELECT body FROM public.${name} ORDER BY body`)).toEqual({ ok: true, rows: [{ body: "m1" }, { body: "m2" }, { body: "s" }] })
    expect(await asRole(stack, "anon", "", `SELECT count(*)::int AS n FROM public.${name}_v`)).toEqual({ ok: true, rows: [{ n: 3 }] })
    expect(await asRole(stack, "anon", "", `INSERT INTO public.${name} (body) VALUES ('anon')`)).toMatchObject({ ok: false, code: "42501" })

    result(await setPermissions(name, "anon", "none", "none", "none"))
    expect(await asRole(stack, "anon", "", `SELECT body FROM public.${name}`)).toMatchObject({ ok: false, code: "42501" })
  })

  it("anon read=own sees nothing (anon has no user id)", async () => {
    const name = await makeTable()
    result(await setPermissions(name, "anon", "own", "none", "none"))
    expect(await asRole(stack, "anon", "", `SELECT body FROM public.${name}`)).toEqual({ ok: true, rows: [] })
  })

  describe("errors", () => {
    it.each([
      ["owner"],
      ["admin"],
      ["public"],
      ["Member"],
      [null]
    ])("role %s → 400 P0001, nothing changes", async (role) => {
      const name = await makeTable()
      const before = await policies(name)
      expectDbError(await setPermissions(name, role, "all", "all", "all"), 400, "P0001", /permissions are set for staff, member or anon/)
      expect(await policies(name)).toEqual(before)
    })

    it.each([
      ["read", ["some", "all", "all"]],
      ["write", ["all", "ALL", "all"]],
      ["delete", ["all", "all", "everything"]],
      ["null read", [null, "all", "all"]],
      ["null delete", ["all", "all", null]]
    ])("an invalid level (%s) → 400 P0001, nothing changes", async (_label, levels) => {
      const name = await makeTable()
      expectDbError(await setPermissions(name, "member", levels[0], levels[1], levels[2]), 400, "P0001", /each all, own or none/)
      expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "member", read: "own", write: "own", delete: "own" })
    })

    it("an unknown table → 400 P0001", async () => {
      expectDbError(await setPermissions("no_such_table", "member", "all", "all", "all"), 400, "P0001", /no managed table 'no_such_table'/)
      expectDbError(await setPermissionsBool("no_such_table", "member", true, true, true), 400, "P0001", /no managed table/)
    })

    it("a table the database administrator made → 400 P0001", async () => {
      const name = fresh("unmanaged")
      await admin(stack, `CREATE TABLE public.${name} (id int)`)
      expectDbError(await setPermissions(name, "member", "all", "all", "all"), 400, "P0001", /no managed table/)
      expect(await policies(name)).toEqual([])
    })

    it.each(["staff", "member"] as const)("as %s (text and boolean form): 403 42501, nothing changes", async (role) => {
      const name = await makeTable()
      expectForbidden(await setPermissions(name, "member", "all", "all", "all", users[role]))
      expectForbidden(await setPermissionsBool(name, "member", true, true, true, users[role]))
      expect(await permissionsOf(name)).toContainEqual({ table_name: name, role: "member", read: "own", write: "own", delete: "own" })
      expect(await bodies(users.member, name)).toEqual(["m1"])
    })
  })
})
