/**
 * The CLI's answers to an operator's mistakes and repeats, against a database given by URL:
 * `plinth invite` of a bad address, of an existing user (a fresh link while they have not signed
 * in, a way forward once they have), a bad role, `plinth users` (list, deactivate, activate, role),
 * and `plinth db url`. Every error is one line.
 */
import { readFileSync } from "node:fs"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { inviteAsDatabaseAdmin } from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { freePort } from "../support/ports.ts"

let db: TestDatabase
let env: Record<string, string>

beforeAll(async () => {
  db = await createTestDatabase()
  env = { DATABASE_URL: db.mainUrl, DATABASE_ADMIN_URL: db.adminUrl, APP_URL: "http://app.test" }
})
afterAll(() => db?.drop())

const TOKEN = /token=([0-9a-f]{64})$/m

/** Runs `plinth args` to its end: the exit code, stdout, and stderr's lines. */
const plinth = async (args: ReadonlyArray<string>, extra: Record<string, string> = {}) => {
  const run = runPlinth(args, { ...env, ...extra })
  const code = await run.exited
  return { code, stdout: run.stdout(), errors: run.stderr().trim().split("\n").filter((line) => line !== "") }
}

const expectOneLine = (result: { code: number; stdout: string; errors: ReadonlyArray<string> }, expected: string | RegExp) => {
  expect(result.code).toBe(1)
  expect(result.errors).toHaveLength(1)
  if (typeof expected === "string") expect(result.errors[0]).toBe(expected)
  else expect(result.errors[0]).toMatch(expected)
  expect(result.errors[0]).not.toContain("PgConnection")
}

describe("plinth invite", () => {
  it("an invalid email is one line saying so", async () => {
    expectOneLine(await plinth(["invite", "not-an-address", "member"]), "plinth: invalid email address: \"not-an-address\"")
  })

  it("inviting a user who has not signed in yet again prints a fresh link; the old one still works until used", async () => {
    const first = await plinth(["invite", "again@plinth.test", "staff"])
    expect(first.code).toBe(0)
    expect(first.stdout).toContain("Invited again@plinth.test as staff.")
    const firstToken = first.stdout.match(TOKEN)![1]!

    const second = await plinth(["invite", "Again@plinth.test", "staff"])
    expect(second.code).toBe(0)
    expect(second.stdout).toContain("Again@plinth.test was invited as staff and has not signed in yet. A fresh sign-in link")
    expect(second.stdout).toContain("http://app.test/auth/callback?token=")
    const secondToken = second.stdout.match(TOKEN)![1]!
    expect(secondToken).not.toBe(firstToken)
    const users = await query(db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.users WHERE lower(email) = 'again@plinth.test'`)
    expect(users[0]!.n).toBe(1)

    // Another role for a user who has not signed in is refused, naming the role they have.
    expectOneLine(
      await plinth(["invite", "again@plinth.test", "owner"]),
      "plinth: again@plinth.test was invited as staff and has not signed in yet; invite again@plinth.test staff again for a fresh link"
    )

    // The fresh link signs in.
    const signedIn = await query(db.adminUrl, (sql) => sql<{ email: string }>`SELECT email FROM sys.verify_magic_link(${secondToken})`)
    expect(signedIn).toEqual([{ email: "again@plinth.test" }])

    // Once they have signed in, the answer is how to send a sign-in link.
    expectOneLine(
      await plinth(["invite", "again@plinth.test", "staff"]),
      "plinth: again@plinth.test already has an account (staff) and has signed in; a sign-in link is sent by POST /auth/magic-link {\"email\": \"again@plinth.test\"} (the sign-in page)"
    )
  })

  it("a deactivated user is one line", async () => {
    expect((await plinth(["invite", "gone@plinth.test", "member"])).code).toBe(0)
    await query(db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false WHERE email = 'gone@plinth.test'`)
    expectOneLine(await plinth(["invite", "gone@plinth.test", "member"]), "plinth: gone@plinth.test has an account, and it is deactivated")
  })

  it("a database that does not answer is one line", async () => {
    const dead = `postgres://postgres:x@127.0.0.1:${await freePort()}/nowhere`
    expectOneLine(await plinth(["invite", "x@plinth.test", "member"], { DATABASE_ADMIN_URL: dead }), /^plinth: cannot invite x@plinth\.test: \S/)
  })
})

describe("plinth users", () => {
  const userOf = async (email: string) =>
    (await query(db.adminUrl, (sql) => sql<{ role: string; is_active: boolean }>`SELECT role, is_active FROM sys.users WHERE lower(email) = lower(${email})`))[0]

  it("lists, deactivates, activates and changes roles, as a database administrator; each answer one line", async () => {
    await inviteAsDatabaseAdmin(db, "boss@users.test", "owner")
    await inviteAsDatabaseAdmin(db, "clerk@users.test", "member")

    const listed = await plinth(["users", "list"])
    expect(listed.code).toBe(0)
    const lines = listed.stdout.trim().split("\n")
    expect(lines[0]).toMatch(/^EMAIL\s+ROLE\s+STATUS\s+LAST SIGN-IN\s+INVITED BY$/)
    expect(lines.find((line) => line.startsWith("clerk@users.test"))).toMatch(/^clerk@users\.test\s+member\s+active\s+never\s+-$/)

    const deactivated = await plinth(["users", "deactivate", "Clerk@users.test"])
    expect(deactivated.code).toBe(0)
    expect(deactivated.stdout.trim()).toBe("Deactivated Clerk@users.test (member): they can no longer sign in; tokens already issued stay valid until they expire (JWT_TTL).")
    expect(await userOf("clerk@users.test")).toEqual({ role: "member", is_active: false })
    expect((await plinth(["users", "deactivate", "clerk@users.test"])).stdout.trim()).toBe("clerk@users.test is already deactivated.")

    const activated = await plinth(["users", "activate", "clerk@users.test"])
    expect(activated.stdout.trim()).toBe("Activated clerk@users.test (member): they can sign in again.")
    expect(await userOf("clerk@users.test")).toEqual({ role: "member", is_active: true })

    const promoted = await plinth(["users", "role", "clerk@users.test", "admin"])
    expect(promoted.code).toBe(0)
    expect(promoted.stdout.trim()).toBe("clerk@users.test is now admin (was member); tokens already issued keep the old role until they expire (JWT_TTL).")
    expect(await userOf("clerk@users.test")).toEqual({ role: "admin", is_active: true })
  }, 120_000)

  it("refuses to leave no active owner, an unknown user, a bad role and a bad address, each in one line", async () => {
    // Whatever earlier tests left: one active owner only.
    await query(db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false WHERE role = 'owner'`)
    await inviteAsDatabaseAdmin(db, "only-owner@users.test", "owner")
    expectOneLine(await plinth(["users", "deactivate", "only-owner@users.test"]), "plinth: cannot deactivate only-owner@users.test: they are the last active owner (make another user an owner first)")
    expectOneLine(await plinth(["users", "role", "only-owner@users.test", "admin"]), "plinth: cannot demote only-owner@users.test: they are the last active owner (make another user an owner first)")
    expect(await userOf("only-owner@users.test")).toEqual({ role: "owner", is_active: true })
    expectOneLine(await plinth(["users", "deactivate", "nobody@users.test"]), "plinth: no user has the email address nobody@users.test")
    expectOneLine(await plinth(["users", "activate", "not-an-address"]), "plinth: invalid email address: \"not-an-address\"")
    const badRole = await plinth(["users", "role", "only-owner@users.test", "boss"])
    expect(badRole.code).toBe(1)
    expect(badRole.errors[0]).toBe("plinth: Invalid value for argument <role>: \"boss\". Expected: \"owner\" | \"admin\" | \"staff\" | \"member\"")
  }, 120_000)

  it("in multi-tenant mode, without --tenant, says to name the tenant", async () => {
    expectOneLine(await plinth(["users", "list"], { MULTI_TENANT: "true" }), "plinth: multi-tenant mode: name the tenant with --tenant <name>")
    expectOneLine(await plinth(["users", "list", "--tenant", "Bad-Name"], { MULTI_TENANT: "true" }), /^plinth: invalid tenant name "Bad-Name"/)
  })
})

describe("a mistyped command line is the error and a one-line usage", () => {
  it("an invalid role", async () => {
    const result = await plinth(["invite", "role@plinth.test", "boss"])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe("")
    expect(result.errors).toEqual([
      "plinth: Invalid value for argument <role>: \"boss\". Expected: \"owner\" | \"admin\" | \"staff\" | \"member\"",
      "usage: plinth invite [flags] <email> <role> (see plinth invite --help)"
    ])
  })

  it("an unknown command", async () => {
    const result = await plinth(["strat"])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe("")
    expect(result.errors).toHaveLength(2)
    expect(result.errors[0]).toMatch(/^plinth: Unknown subcommand "strat" for "plinth"/)
    expect(result.errors.join("\n")).not.toContain("Help requested")
  })
})

describe("plinth db url", () => {
  it("with URLs prints DATABASE_ADMIN_URL, the operator's own", async () => {
    const result = await plinth(["db", "url"])
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe(db.adminUrl)
  })

  it("with DATABASE_URL but no DATABASE_ADMIN_URL names the variable", async () => {
    expectOneLine(await plinth(["db", "url"], { DATABASE_ADMIN_URL: "" }), "plinth: invalid configuration: DATABASE_ADMIN_URL: required when DATABASE_URL is set")
  })

  it("without a data directory says how to get one", async () => {
    expectOneLine(
      await plinth(["db", "url"], { DATABASE_URL: "", PLINTH_DATA_DIR: "/nonexistent/plinth-db-url" }),
      "plinth: no embedded database in /nonexistent/plinth-db-url yet: npm start creates it (or set PLINTH_DATA_DIR)"
    )
  })
})

describe("the README", () => {
  it("gives every command as `npm run plinth -- <command>` (no `plinth` is on PATH after npm ci)", () => {
    const readme = readFileSync("README.md", "utf8")
    expect(readme).not.toMatch(/`plinth (start|serve|migrate|invite|db|tenant)\b/)
    expect(readme).toContain("`npm run plinth -- db url`")
  })
})
