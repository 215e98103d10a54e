/**
 * The identity functions of sql/sys/01_identity.sql at the database level: who may call what
 * (spec §5.8 "Runs as"), that the tables are out of every app role's reach, and sys.update_profile.
 */
import { PgPool } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { executePipelined } from "../../src/services/AsCaller.ts"
import type { RequestIdentity } from "../../src/services/RequestContext.ts"
import { StatementConnections } from "../../src/services/StatementConnections.ts"
import { createTestDatabase, query, runSql, type TestDatabase } from "../support/database.ts"

let db: TestDatabase
beforeAll(async () => {
  db = await createTestDatabase()
})
afterAll(() => db?.drop())

/** Runs `text` through the main service's connection as `identity`; resolves to rows or the SQLSTATE. */
const runAs = (identity: RequestIdentity | "authenticator", text: string, params: ReadonlyArray<unknown> = []) =>
  runSql(db.mainUrl, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (identity === "authenticator") return yield* sql.unsafe<Record<string, unknown>>(text, params)
    // The path every caller's statement takes (AsCaller), on connections like the service's own.
    const pool = yield* PgPool.make({ url: Redacted.make(db.mainUrl), maxConnections: 1, multiplex: true, multiplexConcurrency: 1 })
    const result = yield* executePipelined(identity, text, params).pipe(Effect.provideService(StatementConnections, pool))
    return result.rows as ReadonlyArray<Record<string, unknown>>
  }).pipe(
    Effect.scoped,
    Effect.map((rows) => ({ rows: [...rows] as ReadonlyArray<Record<string, unknown>>, code: undefined as string | undefined })),
    Effect.catchTag("SqlError", (error) =>
      Effect.succeed({ rows: [], code: (error.reason as { cause?: { code?: string } }).cause?.code })
    )
  ))

const newUser = async (email: string, role: string) => {
  await query(db.adminUrl, (sql) => sql`SELECT sys.invite_user(${email}, ${role})`)
  const rows = await query(db.adminUrl, (sql) => sql<{ id: string }>`SELECT id FROM sys.users WHERE email = ${email}`)
  return rows[0]!.id
}

const anon: RequestIdentity = { role: "anon", userId: "" }

describe("privileges", () => {
  const functions = [
    "sys.login(text, text)",
    "sys.create_magic_link(text)",
    "sys.verify_magic_link(text)",
    "sys.invite_user(text, text)",
    "sys.set_initial_password(text)",
    "sys.update_profile(text, text)",
    "sys.issue_magic_link(uuid)",
    "sys.request_email_change(text)",
    "sys.confirm_email_change(text)"
  ]

  it("every function is SECURITY DEFINER with a pinned search_path, and PUBLIC may not execute it", async () => {
    for (const signature of functions) {
      const [row] = await query(db.adminUrl, (sql) =>
        sql<{ definer: boolean; config: Array<string> | null; public_can: boolean }>`
          SELECT p.prosecdef AS definer, p.proconfig AS config,
            -- A NULL acl is the default, which lets PUBLIC execute.
            p.proacl IS NULL OR EXISTS (
              SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'
            ) AS public_can
          FROM pg_proc p
          WHERE p.oid = ${signature}::regprocedure`)
      expect(row, signature).toMatchObject({ definer: true, public_can: false })
      expect(row!.config?.some((setting) => setting.startsWith("search_path=")), signature).toBe(true)
    }
  })

  it.each([
    ["anon", [
      "sys.login(text, text)",
      "sys.create_magic_link(text)",
      "sys.verify_magic_link(text)",
      "sys.request_email_change(text)",
      "sys.confirm_email_change(text)"
    ]],
    ["owner", ["sys.invite_user(text, text)", "sys.set_initial_password(text)", "sys.update_profile(text, text)"]],
    ["admin", ["sys.invite_user(text, text)", "sys.set_initial_password(text)", "sys.update_profile(text, text)"]],
    ["staff", ["sys.set_initial_password(text)", "sys.update_profile(text, text)"]],
    ["member", ["sys.set_initial_password(text)", "sys.update_profile(text, text)"]]
  ])("%s may execute exactly %j", async (role, allowed) => {
    for (const signature of functions) {
      const [row] = await query(db.adminUrl, (sql) =>
        sql<{ can: boolean }>`SELECT has_function_privilege(${role}, ${signature}, 'EXECUTE') AS can`)
      expect(row!.can, `${role} on ${signature}`).toBe(allowed.includes(signature))
    }
  })

  it("no app role can read or write the identity tables", async () => {
    for (const role of ["owner", "admin", "staff", "member", "anon"] as const) {
      for (const table of ["sys.users", "sys.magic_links", "sys.email_changes"]) {
        const result = await runAs({ role, userId: "" }, `SELECT * FROM ${table}`)
        expect(result.code, `${role} reading ${table}`).toBe("42501")
      }
      expect((await runAs({ role, userId: "" }, "UPDATE sys.users SET role = 'owner'")).code).toBe("42501")
    }
  })

  it("the main service's login role reaches nothing without switching to an app role", async () => {
    expect((await runAs("authenticator", "SELECT sys.create_magic_link('x@y.z')")).code).toBe("42501")
    expect((await runAs("authenticator", "SELECT sys.invite_user('x@y.z', 'owner')")).code).toBe("42501")
  })

  it("anon cannot invite; staff and member cannot invite", async () => {
    for (const role of ["anon", "staff", "member"] as const) {
      expect((await runAs({ role, userId: "" }, "SELECT sys.invite_user($1, 'member')", [`by-${role}@x.test`])).code).toBe("42501")
    }
  })
})

describe("sys.invite_user", () => {
  it("decides by the caller's role: owner anything, admin staff/member, database administrator anything", async () => {
    const ownerId = await newUser("fn-owner@x.test", "owner")
    const adminId = await newUser("fn-admin@x.test", "admin")
    expect((await runAs({ role: "owner", userId: ownerId }, "SELECT sys.invite_user('o2@x.test', 'owner') AS t")).rows).toHaveLength(1)
    expect((await runAs({ role: "admin", userId: adminId }, "SELECT sys.invite_user('a-to-o@x.test', 'owner')")).code).toBe("42501")
    expect((await runAs({ role: "admin", userId: adminId }, "SELECT sys.invite_user('a-to-a@x.test', 'admin')")).code).toBe("42501")
    expect((await runAs({ role: "admin", userId: adminId }, "SELECT sys.invite_user('a-to-s@x.test', 'staff') AS t")).rows).toHaveLength(1)
    expect((await runAs({ role: "owner", userId: ownerId }, "SELECT sys.invite_user('bad@x.test', 'root')")).code).toBe("22023")
    expect((await runAs({ role: "owner", userId: ownerId }, "SELECT sys.invite_user('FN-OWNER@x.test', 'member')")).code).toBe("23505")
    expect((await runAs({ role: "owner", userId: ownerId }, "SELECT sys.invite_user('no-at-sign', 'member')")).code).toBe("22023")
  })
})

describe("sys.update_profile", () => {
  it("changes only the caller's own row; NULL or the current email leaves the email unchanged", async () => {
    const me = await newUser("profile-me@x.test", "member")
    const other = await newUser("profile-other@x.test", "member")
    const renamed = await runAs({ role: "member", userId: me }, "SELECT * FROM sys.update_profile(NULL, 'Ada Lovelace')")
    expect(renamed.rows).toEqual([{ id: me, email: "profile-me@x.test", display_name: "Ada Lovelace", role: "member", needs_password: true }])
    // Another address needs proof (POST /auth/change-email): refused, nothing changes.
    expect((await runAs({ role: "member", userId: me }, "SELECT * FROM sys.update_profile('ada@x.test', NULL)")).code).toBe("P0001")
    const same = await runAs({ role: "member", userId: me }, "SELECT * FROM sys.update_profile('PROFILE-ME@x.test', 'Ada')")
    expect(same.rows[0]).toMatchObject({ email: "profile-me@x.test", display_name: "Ada" })
    const [untouched] = await query(db.adminUrl, (sql) => sql<{ display_name: string }>`SELECT display_name FROM sys.users WHERE id = ${other}`)
    expect(untouched!.display_name).toBe("profile-other")
  })

  it("refuses another email, even a taken one (P0001), a malformed one (22023) and a caller with no user id (28000)", async () => {
    const me = await newUser("profile-2@x.test", "staff")
    await newUser("taken@x.test", "staff")
    expect((await runAs({ role: "staff", userId: me }, "SELECT * FROM sys.update_profile('TAKEN@x.test', NULL)")).code).toBe("P0001")
    expect((await runAs({ role: "staff", userId: me }, "SELECT * FROM sys.update_profile('nope', NULL)")).code).toBe("22023")
    expect((await runAs({ role: "staff", userId: "" }, "SELECT * FROM sys.update_profile(NULL, 'x')")).code).toBe("28000")
  })
})

describe("sys.set_initial_password", () => {
  it("uses app.user_id, hashes with bcrypt, and refuses a second time with 23000", async () => {
    const me = await newUser("pw-fn@x.test", "member")
    expect((await runAs({ role: "member", userId: me }, "SELECT sys.set_initial_password('longenough')")).code).toBeUndefined()
    expect((await runAs({ role: "member", userId: me }, "SELECT sys.set_initial_password('longenough')")).code).toBe("23000")
    expect((await runAs({ role: "member", userId: me }, "SELECT sys.set_initial_password('short')")).code).toBe("22023")
    const login = await runAs(anon, "SELECT * FROM sys.login('PW-FN@x.test', 'longenough')")
    expect(login.rows).toHaveLength(1)
    expect((await runAs(anon, "SELECT * FROM sys.login('pw-fn@x.test', 'wrong password')")).rows).toHaveLength(0)
  })
})
