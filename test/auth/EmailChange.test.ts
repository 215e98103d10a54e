/**
 * Email changes over HTTP (issue #19, finding 7): an address changes only once a link mailed to it
 * is verified. sys.update_profile no longer changes it; POST /auth/change-email mails the link
 * (a pending change reserves nothing); POST /auth/change-email/verify applies it once, within
 * 15 minutes, and answers a fresh JWT.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  APP_URL,
  type AuthStack,
  claimsOf,
  mailedToken,
  post,
  type SignIn,
  signedIn,
  startAuthStack,
  verify
} from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

let stack: AuthStack
let base: string
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  base = stack.main.url
  owner = await signedIn(stack, "change-owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

let counter = 0
const fresh = (label: string) => `${label}-${++counter}-${Date.now()}@plinth.test`

const member = (label: string) => signedIn(stack, fresh(label), "member")

const sql = (user: SignIn, text: string, params?: ReadonlyArray<unknown>) =>
  post<{ error: unknown; rows?: ReadonlyArray<Record<string, unknown>> }>(base, "/sql", params === undefined ? { sql: text } : { sql: text, params }, { token: user.token })

const requestChange = (user: SignIn, email: string) => post(base, "/auth/change-email", { email }, { token: user.token })
const confirm = (token: string) => post<SignIn & { error?: string }>(base, "/auth/change-email/verify", { token })

const emailOf = async (id: string) =>
  (await query(stack.db.adminUrl, (q) => q<{ email: string }>`SELECT email FROM sys.users WHERE id = ${id}`))[0]!.email

const settle = () => new Promise((resolve) => setTimeout(resolve, 200))

describe("sys.update_profile", () => {
  it("attack: a member's update_profile to another address claims it, and the owner's later invite of that address gets 409", async () => {
    const attacker = await member("claimer")
    const newhire = fresh("newhire")
    const claimed = await sql(attacker, "SELECT * FROM sys.update_profile($1, NULL)", [newhire])
    expect(claimed.status).toBe(400)
    expect(JSON.stringify(claimed.body)).toContain("/auth/change-email")
    expect(await emailOf(attacker.user.id)).toBe(attacker.user.email)
    const invite = await post(base, "/admin/invite", { email: newhire, role: "member" }, { token: owner.token })
    expect(invite).toMatchObject({ status: 200, body: { ok: true } })
    expect(await mailedToken(stack.mail, newhire)).toMatch(/^[0-9a-f]{64}$/)
  })

  it("still changes the display name with NULL or the current address (any case)", async () => {
    const user = await member("renamed")
    const withNull = await sql(user, "SELECT email, display_name FROM sys.update_profile(NULL, 'Ada')")
    expect(withNull).toMatchObject({ status: 200, body: { rows: [{ email: user.user.email, display_name: "Ada" }] } })
    const withCurrent = await sql(user, "SELECT email, display_name FROM sys.update_profile($1, 'Ada L.')", [user.user.email.toUpperCase()])
    expect(withCurrent).toMatchObject({ status: 200, body: { rows: [{ email: user.user.email, display_name: "Ada L." }] } })
  })

  it("no client's SQL can mint or apply an email change itself (the functions are the service's, as anon)", async () => {
    const user = await member("minter")
    for (const text of ["SELECT sys.request_email_change('minted@plinth.test')", "SELECT * FROM sys.confirm_email_change('x')", "SELECT * FROM sys.email_changes"]) {
      expect((await sql(user, text)).status, text).toBe(403)
      expect((await sql(owner, text)).status, text).toBe(403)
    }
  })
})

describe("POST /auth/change-email → POST /auth/change-email/verify", () => {
  it("mails a link to the new address only; the address changes once it is verified, with a fresh JWT", async () => {
    const user = await member("mover")
    const target = fresh("moved")
    expect(await requestChange(user, target)).toMatchObject({ status: 200, body: { sent: true } })
    const token = await mailedToken(stack.mail, target)
    const mail = stack.mail.messages.find((m) => m.to === target)!
    expect(mail.subject).toBe("Confirm your new email address")
    expect(mail.text).toContain(`${APP_URL}/auth/confirm-email?token=${token}`)
    expect(stack.mail.messages.filter((m) => m.to === user.user.email && m.text.includes("confirm-email"))).toEqual([])
    // Pending: nothing changed yet, and only the hash is stored.
    expect(await emailOf(user.user.id)).toBe(user.user.email)
    const [stored] = await query(stack.db.adminUrl, (q) =>
      q<{ hash: string }>`SELECT encode(token_hash, 'hex') AS hash FROM sys.email_changes WHERE user_id = ${user.user.id}`)
    expect(stored!.hash).not.toBe(token)

    const confirmed = await confirm(token)
    expect(confirmed.status).toBe(200)
    expect(confirmed.body.user).toEqual({ ...user.user, email: target })
    expect(claimsOf(confirmed.body.token)).toMatchObject({ sub: user.user.id, email: target, role: "member" })
    expect(await emailOf(user.user.id)).toBe(target)
    // The fresh JWT works, and the new address signs in.
    expect((await sql(confirmed.body, "SELECT 1 AS one")).status).toBe(200)
    expect(await post(base, "/auth/magic-link", { email: target })).toMatchObject({ status: 200 })
    const signInMail = () => stack.mail.messages.find((m) => m.to === target && m.text.includes("/auth/callback?token="))
    expect(await eventually(async () => signInMail() !== undefined, 5_000)).toBe(true)
    const signIn = await verify(base, signInMail()!.text.match(/token=([0-9a-f]{64})/)![1]!)
    expect(signIn.user.id).toBe(user.user.id)
  })

  it("a link works once: the same token again is 401, and of ten concurrent verifications exactly one succeeds", async () => {
    const user = await member("once")
    const target = fresh("once-target")
    await requestChange(user, target)
    const token = await mailedToken(stack.mail, target)
    expect((await confirm(token)).status).toBe(200)
    expect(await confirm(token)).toMatchObject({ status: 401, body: { error: expect.any(String) } })

    const racer = await member("racer")
    const raced = fresh("raced")
    await requestChange(racer, raced)
    const racedToken = await mailedToken(stack.mail, raced)
    const statuses = (await Promise.all(Array.from({ length: 10 }, () => confirm(racedToken)))).map((r) => r.status)
    expect(statuses.filter((s) => s === 200)).toHaveLength(1)
    expect(statuses.filter((s) => s === 401)).toHaveLength(9)
  })

  it("an expired link (past 15 minutes) is 401 and changes nothing", async () => {
    const user = await member("late")
    const target = fresh("late-target")
    await requestChange(user, target)
    const token = await mailedToken(stack.mail, target)
    const [row] = await query(stack.db.adminUrl, (q) =>
      q<{ minutes: number }>`SELECT round(extract(epoch FROM expires_at - created_at) / 60)::int AS minutes FROM sys.email_changes WHERE user_id = ${user.user.id}`)
    expect(row!.minutes).toBe(15)
    await query(stack.db.adminUrl, (q) => q`UPDATE sys.email_changes SET expires_at = now() - interval '1 second' WHERE user_id = ${user.user.id}`)
    expect(await confirm(token)).toMatchObject({ status: 401, body: { error: expect.any(String) } })
    expect(await emailOf(user.user.id)).toBe(user.user.email)
  })

  it("a newer request replaces the older one: the first link is then 401", async () => {
    const user = await member("twice")
    const first = fresh("first-target")
    const second = fresh("second-target")
    await requestChange(user, first)
    const firstToken = await mailedToken(stack.mail, first)
    await requestChange(user, second)
    const secondToken = await mailedToken(stack.mail, second)
    expect((await confirm(firstToken)).status).toBe(401)
    expect((await confirm(secondToken)).body.user.email).toBe(second)
  })

  it("a pending change reserves nothing: the owner invites the address, and the late verification is 409", async () => {
    const user = await member("slow")
    const target = fresh("contested")
    await requestChange(user, target)
    const token = await mailedToken(stack.mail, target)
    expect(await post(base, "/admin/invite", { email: target.toUpperCase(), role: "staff" }, { token: owner.token }))
      .toMatchObject({ status: 200, body: { ok: true } })
    expect(await confirm(token)).toMatchObject({ status: 409, body: { error: expect.any(String) } })
    expect(await emailOf(user.user.id)).toBe(user.user.email)
  })

  it("an address another user has: the same {sent: true}, and nothing is mailed or recorded", async () => {
    const user = await member("copycat")
    const taken = await member("taken")
    const before = stack.mail.requestCount()
    expect(await requestChange(user, taken.user.email.toUpperCase())).toMatchObject({ status: 200, body: { sent: true } })
    await settle()
    expect(stack.mail.requestCount()).toBe(before)
    const rows = await query(stack.db.adminUrl, (q) => q<{ n: number }>`SELECT count(*)::int AS n FROM sys.email_changes WHERE user_id = ${user.user.id}`)
    expect(rows[0]!.n).toBe(0)
  })

  it("refuses a malformed address or the current one (400), a caller without a JWT (401), a bad or missing token (401, 400)", async () => {
    const user = await member("refused")
    expect(await requestChange(user, "not-an-address")).toMatchObject({ status: 400, body: { error: expect.any(String) } })
    expect(await requestChange(user, user.user.email.toUpperCase())).toMatchObject({ status: 400, body: { error: expect.any(String) } })
    expect(await post(base, "/auth/change-email", { email: fresh("anonymous") })).toMatchObject({ status: 401, body: { error: expect.any(String) } })
    expect(await confirm("0".repeat(64))).toMatchObject({ status: 401, body: { error: expect.any(String) } })
    expect(await post(base, "/auth/change-email/verify", {})).toMatchObject({ status: 400, body: { error: expect.any(String) } })
  })

  it("is rate limited per user: the 4th request in 15 minutes is 429 with Retry-After", async () => {
    const user = await member("eager")
    for (let i = 0; i < 3; i++) expect((await requestChange(user, fresh("eager-target"))).status).toBe(200)
    const limited = await requestChange(user, fresh("eager-target"))
    expect(limited).toMatchObject({ status: 429, body: { error: expect.any(String) } })
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0)
  })

  it("is rate limited per new mailbox, whoever asks", async () => {
    const target = fresh("popular")
    for (let i = 0; i < 3; i++) expect((await requestChange(await member(`fan-${i}`), target)).status).toBe(200)
    expect((await requestChange(await member("fan-4"), target.replace("@", "+x@"))).status).toBe(429)
  })

  it("both endpoints are in /openapi.json", async () => {
    const response = await fetch(`${base}/openapi.json`)
    const document = (await response.json()) as { paths: Record<string, unknown> }
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining(["/auth/change-email", "/auth/change-email/verify"]))
  })
})
