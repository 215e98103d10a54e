/**
 * Access tokens over HTTP (spec §2.2, §5.2): the bearer middleware refuses every token Plinth did
 * not issue, or would not issue, with 401 `{ error }`, and accepts a well-formed HS256 token with
 * the test secret (30 s leeway on expiry). The JWT handed out by verify carries exactly the
 * claims of §2.2, and lives JWT_TTL (24 h by default).
 */
import { decodeProtectedHeader, type JWTPayload, SignJWT, UnsecuredJWT } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, claimsOf, inviteAsDatabaseAdmin, post, type SignIn, signedIn, startAuthStack, verify } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { TEST_JWT_SECRET } from "../support/services.ts"

let stack: AuthStack
let base: string
/** A member without a password: set-password with a token for them succeeds only if the token is accepted. */
let victim: SignIn
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  base = stack.main.url
  ;[victim, owner] = await Promise.all([
    signedIn(stack, "victim@plinth.test", "member"),
    signedIn(stack, "jwt-owner@plinth.test", "owner")
  ])
})
afterAll(() => stack?.close())

const now = () => Math.floor(Date.now() / 1000)

const sign = (payload: JWTPayload, options: { readonly alg?: string; readonly secret?: string } = {}) =>
  new SignJWT(payload)
    .setProtectedHeader({ alg: options.alg ?? "HS256", typ: "JWT" })
    .sign(new TextEncoder().encode(options.secret ?? TEST_JWT_SECRET))

/** The claims Plinth itself would put in a token for `user`, valid for another hour. */
const goodClaims = (user: SignIn["user"]): JWTPayload => ({
  sub: user.id,
  role: user.role,
  email: user.email,
  iat: now() - 60,
  exp: now() + 3600
})

const without = (claims: JWTPayload, name: string): JWTPayload => {
  const copy = { ...claims }
  delete copy[name]
  return copy
}

let counter = 0
const freshEmail = (label: string) => `${label}-${++counter}-${Date.now()}@plinth.test`

/** Calls an authenticated endpoint with a body that would succeed for an accepted token. */
const endpoints = {
  "POST /auth/set-password": (headers: Record<string, string>) =>
    post(base, "/auth/set-password", { password: "a perfectly fine password" }, { headers }),
  "POST /admin/invite": (headers: Record<string, string>) =>
    post(base, "/admin/invite", { email: freshEmail("invitee"), role: "staff" }, { headers }),
  // Plain router routes (DataRoutes.ts), authenticated by the same function as HttpApi's.
  "POST /sql": (headers: Record<string, string>) => post(base, "/sql", { sql: "SELECT 1 AS one" }, { headers }),
  "POST /function/now": (headers: Record<string, string>) => post(base, "/function/now", [], { headers })
} as const
type EndpointName = keyof typeof endpoints

/** Each negative case: the Authorization header (or none) for the subject the endpoint acts as. */
const negativeCases: ReadonlyArray<readonly [string, (user: SignIn["user"]) => Promise<Record<string, string>>]> = [
  ["no Authorization header", async () => ({})],
  ["the Basic scheme", async (user) => ({ authorization: `Basic ${Buffer.from(`${user.email}:secret`).toString("base64")}` })],
  ["the Basic scheme carrying a valid JWT", async (user) => ({ authorization: `Basic ${await sign(goodClaims(user))}` })],
  ["an empty Bearer credential", async () => ({ authorization: "Bearer " })],
  ["Bearer garbage", async () => ({ authorization: "Bearer not-a-jwt-at-all" })],
  ["Bearer three garbage segments", async () => ({ authorization: "Bearer aaaa.bbbb.cccc" })],
  ["alg none (unsigned) with otherwise valid claims", async (user) => ({ authorization: `Bearer ${new UnsecuredJWT(goodClaims(user)).encode()}` })],
  ["HS512 signed with the right secret", async (user) => ({ authorization: `Bearer ${await sign(goodClaims(user), { alg: "HS512" })}` })],
  ["HS256 signed with a wrong secret", async (user) => ({
    authorization: `Bearer ${await sign(goodClaims(user), { secret: "another-secret-0123456789abcdef0123456789" })}`
  })],
  ["a valid token with one signature character changed", async (user) => {
    const token = await sign(goodClaims(user))
    const last = token.at(-2) === "A" ? "B" : "A"
    return { authorization: `Bearer ${token.slice(0, -2)}${last}${token.at(-1)}` }
  }],
  ["expired 60 s ago (past the 30 s leeway)", async (user) => ({
    authorization: `Bearer ${await sign({ ...goodClaims(user), iat: now() - 3600, exp: now() - 60 })}`
  })],
  ["role superuser", async (user) => ({ authorization: `Bearer ${await sign({ ...goodClaims(user), role: "superuser" })}` })],
  ["role anon", async (user) => ({ authorization: `Bearer ${await sign({ ...goodClaims(user), role: "anon" })}` })],
  ["role postgres", async (user) => ({ authorization: `Bearer ${await sign({ ...goodClaims(user), role: "postgres" })}` })],
  ["no role claim", async (user) => ({ authorization: `Bearer ${await sign(without(goodClaims(user), "role"))}` })],
  ["no email claim", async (user) => ({ authorization: `Bearer ${await sign(without(goodClaims(user), "email"))}` })],
  ["no sub claim", async (user) => ({ authorization: `Bearer ${await sign(without(goodClaims(user), "sub"))}` })],
  ["a sub that is not a UUID", async (user) => ({ authorization: `Bearer ${await sign({ ...goodClaims(user), sub: "not-a-uuid" })}` })],
  ["no exp claim", async (user) => ({ authorization: `Bearer ${await sign(without(goodClaims(user), "exp"))}` })],
  ["a 5000-character token (otherwise valid, padded with an extra claim)", async (user) => {
    const claims = goodClaims(user)
    const unpadded = await sign({ ...claims, pad: "" })
    // Base64url turns 3 characters of claim into 4 of token.
    const padded = await sign({ ...claims, pad: "x".repeat(Math.floor(((5000 - unpadded.length) * 3) / 4)) })
    expect(unpadded.length).toBeLessThan(4096)
    expect(Math.abs(padded.length - 5000)).toBeLessThanOrEqual(4)
    return { authorization: `Bearer ${padded}` }
  }]
]

describe("the bearer middleware refuses with 401 { error }", () => {
  for (const name of Object.keys(endpoints) as Array<EndpointName>) {
    describe(name, () => {
      it.each(negativeCases)("%s", async (_label, header) => {
        const subject = name === "POST /admin/invite" ? owner.user : victim.user
        const response = await endpoints[name](await header(subject))
        expect(response.status).toBe(401)
        expect(response.body).toEqual({ error: expect.any(String) })
        expect((response.body as { error: string }).error).not.toBe("")
      })
    })
  }

  it("a well-signed token whose sub is no user at all is refused by set-password with 401 { error }", async () => {
    const ghost = { ...victim.user, id: "00000000-0000-4000-8000-000000000000", email: "ghost@plinth.test" }
    const response = await post(base, "/auth/set-password", { password: "a perfectly fine password" }, { token: await sign(goodClaims(ghost)) })
    expect(response.status).toBe(401)
    expect(response.body).toEqual({ error: expect.any(String) })
  })

  it("none of the refused tokens set the victim's password or invited anyone", async () => {
    const rows = await query(stack.db.adminUrl, (sql) =>
      sql<{ password_hash: string | null; invited: string }>`
        SELECT password_hash, (SELECT count(*) FROM sys.users WHERE email LIKE 'invitee-%')::text AS invited
        FROM sys.users WHERE id = ${victim.user.id}`)
    expect(rows).toEqual([{ password_hash: null, invited: "0" }])
  })
})

describe("forged claims Plinth would never issue", () => {
  const expectRefusedEverywhere = async (label: string, authorization: (user: SignIn["user"]) => Promise<string>) => {
    for (const name of Object.keys(endpoints) as Array<EndpointName>) {
      const subject = name === "POST /admin/invite" ? owner.user : victim.user
      const response = await endpoints[name]({ authorization: `Bearer ${await authorization(subject)}` })
      expect(response.status, `${label} on ${name}`).toBe(401)
      expect(response.body).toEqual({ error: expect.any(String) })
    }
  }

  it("attack: a token with a tenant claim is accepted by a single-tenant service", async () => {
    await expectRefusedEverywhere("tenant claim", (user) => sign({ ...goodClaims(user), tenant: "acme" }))
  })

  it("attack: a token issued in the future (iat two minutes ahead, past the 30 s leeway) is accepted", async () => {
    await expectRefusedEverywhere("future iat", (user) => sign({ ...goodClaims(user), iat: now() + 120, exp: now() + 3600 }))
  })

  it("an iat 10 s ahead (clock skew within the leeway) is still accepted", async () => {
    const response = await post(base, "/sql", { sql: "SELECT 1 AS one" }, { token: await sign({ ...goodClaims(victim.user), iat: now() + 10 }) })
    expect(response.status).toBe(200)
  })
})

describe("the bearer middleware accepts", () => {
  it("a forged HS256 token with the right secret and good claims for an existing user", async () => {
    const user = await verify(base, await inviteAsDatabaseAdmin(stack.db, freshEmail("forged"), "staff"))
    const response = await post<{ ok: boolean; token: string }>(
      base,
      "/auth/set-password",
      { password: "a perfectly fine password" },
      { token: await sign(goodClaims(user.user)) }
    )
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ ok: true, token: expect.any(String) })
    expect(claimsOf(response.body.token)).toMatchObject({ sub: user.user.id, role: "staff", email: user.user.email })
  })

  it("a forged owner token for POST /admin/invite", async () => {
    const response = await post(base, "/admin/invite", { email: freshEmail("accepted-invitee"), role: "member" }, {
      token: await sign(goodClaims(owner.user))
    })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ ok: true })
  })

  it("a token that expired 10 s ago (within the 30 s leeway)", async () => {
    const user = await verify(base, await inviteAsDatabaseAdmin(stack.db, freshEmail("leeway"), "member"))
    const response = await post(base, "/auth/set-password", { password: "a perfectly fine password" }, {
      token: await sign({ ...goodClaims(user.user), iat: now() - 3600, exp: now() - 10 })
    })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ ok: true, token: expect.any(String) })
  })

  it.each(["bearer", "BEARER", "Bearer  "])("the scheme written %j (case-insensitive, more than one space), on HttpApi and plain routes", async (scheme) => {
    const user = await signedIn(stack, freshEmail("scheme"), "member")
    const headers = { authorization: `${scheme} ${user.token}` }
    expect((await post(base, "/auth/set-password", { password: "a perfectly fine password" }, { headers })).status).toBe(200)
    expect(await post(base, "/sql", { sql: "SELECT 1 AS one" }, { headers })).toMatchObject({ status: 200, body: { rows: [{ one: 1 }] } })
  })

  it("the token verify issued", async () => {
    const user = await signedIn(stack, freshEmail("issued"), "member")
    const response = await post(base, "/auth/set-password", { password: "a perfectly fine password" }, { token: user.token })
    expect(response.status).toBe(200)
    expect(response.body).toEqual({ ok: true, token: expect.any(String) })
  })
})

describe("the JWT verify issues", () => {
  it("is HS256 with exactly the claims sub, role, email, iat, exp (no needs_password), sub = user id, 24 h by default", async () => {
    const before = now()
    const email = freshEmail("claims")
    const { token, user } = await signedIn(stack, email, "staff")
    const after = now()
    expect(user.needs_password).toBe(true)
    expect(decodeProtectedHeader(token).alg).toBe("HS256")
    const claims = claimsOf(token)
    expect(Object.keys(claims).sort()).toEqual(["email", "exp", "iat", "role", "sub"])
    expect(claims).toEqual({ sub: user.id, role: "staff", email, iat: expect.any(Number), exp: expect.any(Number) })
    expect(claims.iat).toBeGreaterThanOrEqual(before)
    expect(claims.iat).toBeLessThanOrEqual(after)
    expect(claims.exp! - claims.iat!).toBe(24 * 60 * 60)
  })

  it("set-password's fresh token has the same claims and lifetime", async () => {
    const { token, user } = await signedIn(stack, freshEmail("fresh"), "member")
    const response = await post<{ ok: boolean; token: string }>(base, "/auth/set-password", { password: "a perfectly fine password" }, { token })
    expect(response.status).toBe(200)
    const claims = claimsOf(response.body.token)
    expect(Object.keys(claims).sort()).toEqual(["email", "exp", "iat", "role", "sub"])
    expect(claims).toMatchObject({ sub: user.id, role: "member", email: user.email })
    expect(claims.exp! - claims.iat!).toBe(24 * 60 * 60)
  })

  it("lives 15 minutes with JWT_TTL=15m", async () => {
    const short = await startAuthStack({ JWT_TTL: "15m" })
    try {
      const { token, user } = await signedIn(short, "short-lived@plinth.test", "member")
      const claims = claimsOf(token)
      expect(Object.keys(claims).sort()).toEqual(["email", "exp", "iat", "role", "sub"])
      expect(claims.sub).toBe(user.id)
      expect(claims.exp! - claims.iat!).toBe(15 * 60)
    } finally {
      await short.close()
    }
  })
})

describe("the verified-token cache", () => {
  it("accepts a token again from memory, and still refuses it once it has expired", async () => {
    const { makeAccessTokens } = await import("../../src/services/AccessTokens.ts")
    const { Duration, Effect, Redacted } = await import("effect")
    const { TestClock } = await import("effect/testing")
    const tokens = makeAccessTokens({ secret: Redacted.make("a-cache-test-secret-0123456789abcdef"), ttl: Duration.seconds(60) })
    const outcome = await Effect.runPromise(Effect.gen(function*() {
      yield* TestClock.setTime(Date.now())
      const token = yield* tokens.issue({ userId: "0b1e3c8e-3f55-4c8b-9f1c-2d3f4a5b6c7d", role: "member", email: "cache@plinth.test" })
      const first = yield* tokens.verify(token)
      const second = yield* tokens.verify(token)
      // Past exp + 30 s leeway by the clock the cache reads.
      yield* TestClock.adjust("2 minutes")
      const late = yield* Effect.flip(tokens.verify(token))
      return { same: first.userId === second.userId, late: late.reason }
    }).pipe(Effect.provide(TestClock.layer())))
    expect(outcome.same).toBe(true)
    expect(outcome.late).toMatch(/expired|invalid/)
  })
})
