/**
 * Spec §4.2 (magic-link delivery without a mail provider): production never prints a token, only
 * a warning that the link was not sent; tokens, JWTs, passwords and the JWT secret never appear
 * in the console or in the logs. Development, as the positive control, prints a working link.
 * (That a `?token=` query string stays out of the request log is covered in test/http/Server.test.ts.)
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest"
import { maskEmail } from "../../src/services/EmailMask.ts"
import { APP_URL, inviteAsDatabaseAdmin, post, type SignIn, verify } from "../support/auth.ts"
import { createTestDatabase, query, type TestDatabase } from "../support/database.ts"
import { eventually as eventuallyOr } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"

const PRODUCTION_JWT_SECRET = "prod-jwt-secret-Zq81-never-print-me-0123456789"
const PASSWORD = "Secret-Passw0rd-never-logged"
const TOO_LONG_PASSWORD = `Too-Long-Passw0rd-${"y".repeat(120)}`
const HEX_TOKEN = /[0-9a-f]{64}/i
const JWT_LIKE = /eyJ[A-Za-z0-9_-]{4,}/

/** Everything written to the console or the standard streams since the last reset. */
let printed: Array<string> = []
const spies: Array<MockInstance> = []

const show = (value: unknown): string => {
  if (typeof value === "string") return value
  if (value instanceof Uint8Array) return Buffer.from(value).toString("utf8")
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

beforeAll(() => {
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    const spy = vi.spyOn(console, method)
    spy.mockImplementation((...args: Array<unknown>) => {
      printed.push(args.map(show).join(" "))
    })
    spies.push(spy)
  }
  for (const stream of [process.stdout, process.stderr]) {
    const original = stream.write.bind(stream)
    const spy = vi.spyOn(stream, "write")
    spy.mockImplementation(((chunk: unknown, ...rest: Array<unknown>) => {
      printed.push(show(chunk))
      return (original as (...args: Array<unknown>) => boolean)(chunk, ...rest)
    }) as typeof stream.write)
    spies.push(spy)
  }
})
afterAll(() => {
  for (const spy of spies) spy.mockRestore()
})
beforeEach(() => {
  printed = []
})

/** Waits until `found` holds, for mails (and their fallbacks) sent after the response. */
const eventually = async (found: () => boolean, timeoutMs = 5_000) => {
  if (!(await eventuallyOr(async () => found(), timeoutMs))) throw new Error("condition not met in time")
}

const openLinks = async (db: TestDatabase, email: string) => {
  const rows = await query(db.adminUrl, (sql) =>
    sql<{ count: string }>`
      SELECT count(*)::text AS count FROM sys.magic_links l JOIN sys.users u ON u.id = l.user_id
      WHERE lower(u.email) = lower(${email}) AND l.consumed_at IS NULL`)
  return Number(rows[0]!.count)
}

describe("production without a mail provider", () => {
  let db: TestDatabase
  let main: RunningService

  beforeAll(async () => {
    db = await createTestDatabase()
    // No MAIL_API_KEY, MAIL_DOMAIN, MAIL_FROM or MAIL_API_URL at all.
    main = await startService("main", db.mainUrl, { NODE_ENV: "production", JWT_SECRET: PRODUCTION_JWT_SECRET, APP_URL })
  })
  afterAll(async () => {
    await main?.close()
    await db?.drop()
  })

  it("never prints or logs a token, a JWT, a password or the JWT secret, and logs that each link was not sent", async () => {
    const ownerEmail = "prod-owner@plinth.test"
    const inviteeEmail = "prod-invitee@plinth.test"
    const invitationToken = await inviteAsDatabaseAdmin(db, ownerEmail, "owner")
    const owner: SignIn = await verify(main.url, invitationToken)
    const linksBefore = await openLinks(db, ownerEmail)

    // A sign-in link for an existing user.
    const link = await post(main.url, "/auth/magic-link", { email: ownerEmail })
    expect(link.status).toBe(200)
    expect(link.body).toEqual({ sent: true })
    // Production logs name the address masked (issue #19).
    await eventually(() => main.logs.some((entry) => entry.message.includes(maskEmail(ownerEmail)) && /not sent/.test(entry.message)))
    // A link was issued (so there was a token to leak), just not delivered.
    expect(await openLinks(db, ownerEmail)).toBe(linksBefore + 1)

    // An invitation by the owner.
    const invite = await post(main.url, "/admin/invite", { email: inviteeEmail, role: "staff" }, { token: owner.token })
    expect(invite.status).toBe(200)
    expect(invite.body).toEqual({ ok: true })
    await eventually(() => main.logs.filter((entry) => entry.message.includes(maskEmail(inviteeEmail)) && /not sent/.test(entry.message)).length === 2)
    expect(await openLinks(db, inviteeEmail)).toBe(1)

    // Requests that carry a password or a token in their body, accepted and refused.
    const setPassword = await post<{ ok: boolean; token: string }>(main.url, "/auth/set-password", { password: PASSWORD }, { token: owner.token })
    expect(setPassword.status).toBe(200)
    expect(setPassword.body).toEqual({ ok: true, token: expect.stringMatching(/^eyJ/) })
    const tooLong = await post(main.url, "/auth/set-password", { password: TOO_LONG_PASSWORD }, { token: owner.token })
    expect(tooLong.status).toBe(400)
    const login = await post(main.url, "/auth/login", { email: ownerEmail, password: PASSWORD })
    expect(login.status).toBe(404)
    const spent = await post(main.url, "/auth/magic-link/verify", { token: invitationToken })
    expect(spent.status).toBe(401)
    const badBearer = await post(main.url, "/auth/set-password", { password: PASSWORD }, { token: `${owner.token}x` })
    expect(badBearer.status).toBe(401)

    // The capture works: the requests were logged.
    expect(main.logs.some((entry) => entry.message.startsWith("POST /auth/magic-link 200"))).toBe(true)
    expect(main.logs.some((entry) => entry.message.startsWith("POST /admin/invite 200"))).toBe(true)

    const warnings = main.logs.filter((entry) => /not sent/.test(entry.message))
    expect(warnings.map((entry) => entry.level)).toEqual(["Warn", "Warn"])
    // Every line a request logs carries its id, not only its access line.
    const linkRequest = main.logs.find((entry) => entry.message.startsWith("POST /auth/magic-link 200"))!.annotations["requestId"]
    expect(linkRequest).toMatch(/^[0-9a-f-]{36}$/)
    expect(warnings[0]!.annotations["requestId"]).toBe(linkRequest)

    const everything = [...printed, JSON.stringify(main.logs)]
    for (const text of everything) {
      expect(text).not.toMatch(HEX_TOKEN)
      expect(text).not.toMatch(JWT_LIKE)
      expect(text).not.toContain("token=")
      expect(text).not.toContain(invitationToken)
      expect(text).not.toContain(owner.token)
      expect(text).not.toContain(setPassword.body.token)
      expect(text).not.toContain(PASSWORD)
      expect(text).not.toContain(TOO_LONG_PASSWORD.slice(0, 24))
      expect(text).not.toContain(PRODUCTION_JWT_SECRET)
      expect(text).not.toContain(ownerEmail)
      expect(text).not.toContain(inviteeEmail)
    }
    // Nothing went to the console about the links.
    expect(printed.filter((line) => line.includes(ownerEmail) || line.includes(inviteeEmail))).toEqual([])
  })
})

describe("development without a mail provider (positive control)", () => {
  let db: TestDatabase
  let main: RunningService

  beforeAll(async () => {
    db = await createTestDatabase()
    main = await startService("main", db.mainUrl, { NODE_ENV: "development", APP_URL })
  })
  afterAll(async () => {
    await main?.close()
    await db?.drop()
  })

  const printedLink = async (email: string) => {
    let token: string | undefined
    await eventually(() => {
      const line = printed.find((text) => text.includes(email) && text.includes("token="))
      token = line?.match(/\/auth\/callback\?token=([0-9a-f]{64})/)?.[1]
      return token !== undefined
    })
    return token!
  }

  it("prints a console line with token= whose token verifies, and keeps it out of the logs", async () => {
    const email = "dev-user@plinth.test"
    await inviteAsDatabaseAdmin(db, email, "member")
    const response = await post(main.url, "/auth/magic-link", { email })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ sent: true })
    const token = await printedLink(email)
    expect(printed.find((line) => line.includes(token))).toContain(`${APP_URL}/auth/callback?token=${token}`)
    expect(JSON.stringify(main.logs)).not.toContain(token)

    const signIn = await verify(main.url, token)
    expect(signIn.user).toMatchObject({ email, role: "member" })
  })

  it("prints an invitation link that verifies for the invitee", async () => {
    const owner = await verify(main.url, await inviteAsDatabaseAdmin(db, "dev-owner@plinth.test", "owner"))
    const invitee = "dev-invitee@plinth.test"
    const invite = await post(main.url, "/admin/invite", { email: invitee, role: "staff" }, { token: owner.token })
    expect(invite.status).toBe(200)
    expect(invite.body).toEqual({ ok: true })
    const token = await printedLink(invitee)
    expect(JSON.stringify(main.logs)).not.toContain(token)
    const signIn = await verify(main.url, token)
    expect(signIn.user).toMatchObject({ email: invitee, role: "staff", needs_password: true })
  })
})
