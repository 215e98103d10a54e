/**
 * Spec §4.2 end to end, over real HTTP against a real database and a fake mail API: the full
 * invitation flow from `plinth invite` to a password login, and every status each endpoint lists.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  APP_URL,
  type AuthStack,
  claimsOf,
  inviteAsDatabaseAdmin,
  mailedToken,
  post,
  type SignIn,
  signedIn,
  startAuthStack,
  verify
} from "../support/auth.ts"
import { runPlinth } from "../support/cli.ts"
import { query } from "../support/database.ts"
import { startService } from "../support/services.ts"

let stack: AuthStack
let base: string
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  base = stack.main.url
  owner = await signedIn(stack, "owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

let counter = 0
/** A fresh address per test, so tests do not share users or rate-limit buckets. */
const fresh = (label: string) => `${label}-${++counter}-${Date.now()}@plinth.test`

describe("the full flow", () => {
  it("plinth invite → verify → owner invites an admin → admin invites staff → staff sets a password → dev login", async () => {
    const plinth = runPlinth(["invite", "first-owner@plinth.test", "owner"], {
      DATABASE_URL: stack.db.mainUrl,
      DATABASE_ADMIN_URL: stack.db.adminUrl,
      APP_URL
    })
    expect(await plinth.exited).toBe(0)
    const link = plinth.stdout().match(/http:\/\/app\.test\/auth\/callback\?token=([0-9a-f]{64})/)
    expect(link).not.toBeNull()

    const first = await verify(base, link![1]!)
    expect(first.user).toMatchObject({ email: "first-owner@plinth.test", role: "owner", needs_password: true, display_name: "first-owner" })
    const claims = claimsOf(first.token)
    expect(Object.keys(claims).sort()).toEqual(["email", "exp", "iat", "role", "sub"])
    expect(claims).toMatchObject({ sub: first.user.id, role: "owner", email: "first-owner@plinth.test" })

    expect(await post(base, "/admin/invite", { email: "second-admin@plinth.test", role: "admin" }, { token: first.token }))
      .toMatchObject({ status: 200, body: { ok: true } })
    const adminMail = stack.mail.messages.find((m) => m.to === "second-admin@plinth.test")
    expect(adminMail?.text).toContain(`${APP_URL}/auth/callback?token=`)
    const admin = await verify(base, await mailedToken(stack.mail, "second-admin@plinth.test"))
    expect(admin.user.role).toBe("admin")

    expect(await post(base, "/admin/invite", { email: "third-staff@plinth.test", role: "staff" }, { token: admin.token }))
      .toMatchObject({ status: 200, body: { ok: true } })
    const staff = await verify(base, await mailedToken(stack.mail, "third-staff@plinth.test"))
    expect(staff.user).toMatchObject({ role: "staff", needs_password: true })

    const set = await post<{ ok: boolean; token: string }>(base, "/auth/set-password", { password: "correct horse" }, { token: staff.token })
    expect(set.status).toBe(200)
    expect(set.body.ok).toBe(true)
    expect(claimsOf(set.body.token)).toMatchObject({ sub: staff.user.id, role: "staff" })

    const login = await post<SignIn>(base, "/auth/login", { email: "Third-Staff@plinth.test", password: "correct horse" })
    expect(login.status).toBe(200)
    expect(login.body.user).toMatchObject({ id: staff.user.id, role: "staff", needs_password: false })
    expect(claimsOf(login.body.token).sub).toBe(staff.user.id)
  })
})

describe("POST /auth/magic-link", () => {
  it("answers {sent: true} for known, unknown and inactive emails alike, and mails only the known one", async () => {
    const known = fresh("known")
    const inactive = fresh("inactive")
    await inviteAsDatabaseAdmin(stack.db, known, "member")
    await inviteAsDatabaseAdmin(stack.db, inactive, "member")
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false WHERE email = ${inactive}`)
    for (const email of [known, fresh("unknown"), inactive]) {
      expect(await post(base, "/auth/magic-link", { email })).toEqual(expect.objectContaining({ status: 200, body: { sent: true } }))
    }
    const signIn = await verify(base, await mailedToken(stack.mail, known))
    expect(signIn.user.email).toBe(known)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(stack.mail.messages.filter((m) => m.to === inactive)).toHaveLength(0)
  })

  it("is 400 {error} for a missing or malformed email", async () => {
    for (const body of [{}, { email: "not-an-email" }, { email: 42 }, { email: `${"a".repeat(320)}@x.test` }]) {
      const response = await post<{ error: string }>(base, "/auth/magic-link", body)
      expect(response.status).toBe(400)
      expect(typeof response.body.error).toBe("string")
    }
  })
})

describe("POST /auth/magic-link/verify", () => {
  it("returns a JWT and the user; the same token again is 401", async () => {
    const email = fresh("verify")
    const token = await inviteAsDatabaseAdmin(stack.db, email, "member")
    const first = await post<SignIn>(base, "/auth/magic-link/verify", { token })
    expect(first.status).toBe(200)
    expect(first.body.user).toEqual({ id: expect.any(String), email, display_name: email.split("@")[0], role: "member", needs_password: true })
    expect(await post(base, "/auth/magic-link/verify", { token })).toMatchObject({ status: 401, body: { error: expect.any(String) } })
  })

  it("is 401 for an unknown token and 400 for a missing one", async () => {
    expect((await post(base, "/auth/magic-link/verify", { token: "0".repeat(64) })).status).toBe(401)
    expect((await post(base, "/auth/magic-link/verify", { token: "" })).status).toBe(401)
    expect((await post(base, "/auth/magic-link/verify", {})).status).toBe(400)
  })

  it("is 401 for an expired token", async () => {
    const email = fresh("expired")
    const token = await inviteAsDatabaseAdmin(stack.db, email, "member")
    await query(stack.db.adminUrl, (sql) =>
      sql`UPDATE sys.magic_links SET expires_at = now() - interval '1 second'
          WHERE user_id = (SELECT id FROM sys.users WHERE email = ${email})`)
    expect((await post(base, "/auth/magic-link/verify", { token })).status).toBe(401)
  })

  it("of ten concurrent verifications of one token, exactly one succeeds", async () => {
    const token = await inviteAsDatabaseAdmin(stack.db, fresh("race"), "member")
    const results = await Promise.all(Array.from({ length: 10 }, () => post(base, "/auth/magic-link/verify", { token })))
    expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401, 401, 401, 401, 401, 401, 401])
  })

  it("stores only the token's hash", async () => {
    const token = await inviteAsDatabaseAdmin(stack.db, fresh("hash"), "member")
    const rows = await query(stack.db.adminUrl, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.magic_links WHERE token_hash = sha256(convert_to(${token}, 'UTF8'))`)
    expect(rows[0]!.n).toBe(1)
    const raw = await query(stack.db.adminUrl, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.magic_links WHERE encode(token_hash, 'hex') = ${token}`)
    expect(raw[0]!.n).toBe(0)
  })
})

describe("a deactivated user", () => {
  it("is rejected by magic-link, verify and login, while a JWT already issued stays valid", async () => {
    const email = fresh("deactivated")
    const user = await signedIn(stack, email, "member")
    expect((await post(base, "/auth/set-password", { password: "password-1" }, { token: user.token })).status).toBe(200)
    const outstanding = await inviteAsDatabaseAdmin(stack.db, fresh("other"), "member") // unrelated, stays valid
    const pending = await query(stack.db.adminUrl, (sql) =>
      sql<{ token: string }>`SELECT sys.issue_magic_link(id) AS token FROM sys.users WHERE email = ${email}`)
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.users SET is_active = false WHERE email = ${email}`)

    const before = stack.mail.messages.length
    expect(await post(base, "/auth/magic-link", { email })).toMatchObject({ status: 200, body: { sent: true } })
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(stack.mail.messages.slice(before).filter((m) => m.to === email)).toHaveLength(0)
    expect((await post(base, "/auth/magic-link/verify", { token: pending[0]!.token })).status).toBe(401)
    expect((await post(base, "/auth/login", { email, password: "password-1" })).status).toBe(401)

    // The issued JWT is still accepted: the password is already set, so this is the 409, not a 401.
    expect((await post(base, "/auth/set-password", { password: "password-2" }, { token: user.token })).status).toBe(409)
    expect((await verify(base, outstanding)).user.role).toBe("member")
  })
})

describe("POST /auth/set-password", () => {
  it.each([
    ["7 characters", "1234567", 400],
    ["129 characters", "x".repeat(129), 400],
    ["8 characters", "12345678", 200],
    ["128 characters", "y".repeat(128), 200]
  ])("%s → %i", async (_, password, status) => {
    const user = await signedIn(stack, fresh("pw"), "member")
    const response = await post<{ error?: string; ok?: boolean; token?: string }>(base, "/auth/set-password", { password }, { token: user.token })
    expect(response.status).toBe(status)
    if (status === 400) expect(response.body.error).toContain("password")
    else expect(response.body).toEqual({ ok: true, token: expect.any(String) })
  })

  it("a second password is 409; the fresh token works", async () => {
    const user = await signedIn(stack, fresh("twice"), "staff")
    const first = await post<{ token: string }>(base, "/auth/set-password", { password: "first password" }, { token: user.token })
    expect(first.status).toBe(200)
    const second = await post(base, "/auth/set-password", { password: "second password" }, { token: first.body.token })
    expect(second).toMatchObject({ status: 409, body: { error: "password already set" } })
  })

  it("stores a bcrypt hash, never the password", async () => {
    const email = fresh("hashed")
    const user = await signedIn(stack, email, "member")
    await post(base, "/auth/set-password", { password: "plain text secret" }, { token: user.token })
    const rows = await query(stack.db.adminUrl, (sql) => sql<{ password_hash: string }>`SELECT password_hash FROM sys.users WHERE email = ${email}`)
    expect(rows[0]!.password_hash).toMatch(/^\$2a\$\d\d\$/)
    expect(rows[0]!.password_hash).not.toContain("plain text secret")
  })

  it("is 401 without a JWT", async () => {
    expect((await post(base, "/auth/set-password", { password: "long enough" })).status).toBe(401)
  })
})

describe("POST /admin/invite", () => {
  let admin: SignIn
  let staff: SignIn
  let member: SignIn
  beforeAll(async () => {
    admin = await signedIn(stack, fresh("admin"), "admin")
    staff = await signedIn(stack, fresh("staff"), "staff")
    member = await signedIn(stack, fresh("member"), "member")
  })

  it.each(["owner", "admin", "staff", "member"])("an owner may invite a(n) %s, who receives a mail", async (role) => {
    const email = fresh(`by-owner-${role}`)
    expect(await post(base, "/admin/invite", { email, role }, { token: owner.token })).toMatchObject({ status: 200, body: { ok: true } })
    expect((await verify(base, await mailedToken(stack.mail, email))).user.role).toBe(role)
  })

  it.each(["staff", "member"])("an admin may invite %s", async (role) => {
    expect((await post(base, "/admin/invite", { email: fresh(`by-admin-${role}`), role }, { token: admin.token })).status).toBe(200)
  })

  it.each(["owner", "admin"])("an admin inviting a(n) %s is 403", async (role) => {
    const email = fresh(`forbidden-${role}`)
    expect(await post(base, "/admin/invite", { email, role }, { token: admin.token })).toMatchObject({ status: 403, body: { error: expect.any(String) } })
    const rows = await query(stack.db.adminUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM sys.users WHERE email = ${email}`)
    expect(rows[0]!.n).toBe(0)
  })

  it("staff and member callers are 403", async () => {
    for (const caller of [staff, member]) {
      expect((await post(base, "/admin/invite", { email: fresh("nope"), role: "member" }, { token: caller.token })).status).toBe(403)
    }
  })

  it("a duplicate email is 409, whatever its case", async () => {
    const email = fresh("dup")
    expect((await post(base, "/admin/invite", { email, role: "member" }, { token: owner.token })).status).toBe(200)
    expect(await post(base, "/admin/invite", { email: email.toUpperCase(), role: "member" }, { token: owner.token }))
      .toMatchObject({ status: 409, body: { error: expect.any(String) } })
  })

  it.each(["superuser", "anon", "", "Owner"])("role %j is 400", async (role) => {
    const response = await post<{ error: string }>(base, "/admin/invite", { email: fresh("badrole"), role }, { token: owner.token })
    expect(response.status).toBe(400)
    expect(response.body.error).toContain("role")
  })

  it("is 401 without a JWT", async () => {
    expect((await post(base, "/admin/invite", { email: fresh("anon"), role: "member" })).status).toBe(401)
  })

  it("a mail failure is 502 {error}, and the invited user can still sign in through /auth/magic-link", async () => {
    const email = fresh("mailfail")
    stack.mail.failNext(1, 400) // a 4xx is not retried: the failure is immediate
    const response = await post<{ error: string }>(base, "/admin/invite", { email, role: "member" }, { token: owner.token })
    expect(response.status).toBe(502)
    expect(response.body.error).toContain("invited")
    expect(await post(base, "/auth/magic-link", { email })).toMatchObject({ status: 200 })
    expect((await verify(base, await mailedToken(stack.mail, email))).user.email).toBe(email)
  })
})

describe("POST /auth/login", () => {
  let email: string
  beforeAll(async () => {
    email = fresh("login")
    const user = await signedIn(stack, email, "member")
    await post(base, "/auth/set-password", { password: "the right one" }, { token: user.token })
  })

  it("succeeds with the right password, case-insensitively on the email", async () => {
    const response = await post<SignIn>(base, "/auth/login", { email: email.toUpperCase(), password: "the right one" })
    expect(response.status).toBe(200)
    expect(response.body.user).toMatchObject({ email, needs_password: false })
  })

  it.each([
    ["a wrong password", () => ({ email, password: "the wrong one" })],
    ["an unknown email", () => ({ email: fresh("ghost"), password: "whatever1" })],
    ["a user without a password", () => ({ email: "owner@plinth.test", password: "anything" })]
  ])("is 401 for %s", async (_, body) => {
    expect(await post(base, "/auth/login", body())).toMatchObject({ status: 401, body: { error: expect.any(String) } })
  })

  it("does not exist in production (404)", async () => {
    const production = await startService("main", stack.db.mainUrl, {
      ...stack.env,
      NODE_ENV: "production",
      JWT_SECRET: "a-production-secret-of-at-least-32-bytes"
    })
    try {
      expect(await post(production.url, "/auth/login", { email, password: "the right one" }))
        .toMatchObject({ status: 404, body: { error: "not found" } })
    } finally {
      await production.close()
    }
  })
})
