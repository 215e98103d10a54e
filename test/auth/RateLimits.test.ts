/**
 * Spec §8 over HTTP: POST /auth/magic-link admits 3 requests per mailbox (spelling variants of
 * one mailbox share a bucket) and 10 per client address in 15 minutes, answering 429 with a
 * Retry-After in whole seconds; the client address comes from CLIENT_IP_HEADER
 * (`cf-connecting-ip` unless told), believed only from a peer in TRUSTED_PROXIES (loopback unless
 * told), and falls back to the socket's address; rate limits are checked before the challenge, so
 * refused challenges still count.
 */
import { request as httpRequest } from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, inviteAsDatabaseAdmin, mailedToken, post, signedIn, startAuthStack } from "../support/auth.ts"
import { type FakeSiteverify, startFakeSiteverify } from "../support/FakeSiteverify.ts"

/** Default configuration: the client address is `cf-connecting-ip`. */
let stack: AuthStack
/** CLIENT_IP_HEADER=x-real-ip. */
let realIp: AuthStack
/** CHALLENGE_SECRET set, verified against `siteverify`. */
let challenged: AuthStack
/** TRUSTED_PROXIES=127.0.0.1/32: a peer at 127.0.0.2 is a client like any other. */
let oneProxy: AuthStack
let siteverify: FakeSiteverify

beforeAll(async () => {
  siteverify = await startFakeSiteverify()
  ;[stack, realIp, challenged, oneProxy] = await Promise.all([
    startAuthStack(),
    startAuthStack({ CLIENT_IP_HEADER: "x-real-ip" }),
    startAuthStack({ CHALLENGE_SECRET: "turnstile-secret-for-rate-limits", CHALLENGE_VERIFY_URL: siteverify.url }),
    startAuthStack({ TRUSTED_PROXIES: "127.0.0.1/32" })
  ])
})
afterAll(async () => {
  await Promise.all([stack?.close(), realIp?.close(), challenged?.close(), oneProxy?.close()])
  await siteverify?.close()
})

let counter = 0
const freshEmail = (label: string) => `${label}-${++counter}-${Date.now()}@plinth.test`
/** A client address used by nothing else in the file. */
let lastOctet = 0
const freshAddress = () => {
  lastOctet += 1
  return `198.51.${100 + Math.floor(lastOctet / 250)}.${lastOctet % 250}`
}

const requestLink = (target: AuthStack, email: string, headers: Record<string, string> = { "cf-connecting-ip": freshAddress() }) =>
  post(target.main.url, "/auth/magic-link", { email }, { headers })

const expectSent = (response: { readonly status: number; readonly body: unknown }) => {
  expect(response.status).toBe(200)
  expect(response.body).toEqual({ sent: true })
}

const expectLimited = (response: { readonly status: number; readonly headers: Headers; readonly body: unknown }) => {
  expect(response.status).toBe(429)
  expect(response.body).toEqual({ error: expect.any(String) })
  const retryAfter = response.headers.get("retry-after")
  expect(retryAfter).toMatch(/^[0-9]+$/)
  const seconds = Number(retryAfter)
  expect(seconds).toBeGreaterThan(0)
  expect(seconds).toBeLessThanOrEqual(900)
  return seconds
}

/** POST /auth/magic-link from a chosen local (socket) address, with no client-address header unless given. */
const postFromSocket = (target: AuthStack, email: string, localAddress: string, extraHeaders: Record<string, string> = {}) =>
  new Promise<{ status: number; headers: Headers; body: unknown }>((resolve, reject) => {
    const url = new URL("/auth/magic-link", target.main.url)
    const body = JSON.stringify({ email })
    const req = httpRequest(url, {
      method: "POST",
      localAddress,
      agent: false,
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)), ...extraHeaders }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => {
        const headers = new Headers()
        for (const [name, value] of Object.entries(res.headers)) if (typeof value === "string") headers.set(name, value)
        resolve({ status: res.statusCode ?? 0, headers, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) })
      })
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(body)
  })

describe("per mailbox: 3 requests in 15 minutes", () => {
  it("the 4th request for one mailbox is 429 { error } with Retry-After in whole seconds in (0, 900], from any address", async () => {
    const email = freshEmail("mailbox")
    for (let i = 0; i < 3; i++) expectSent(await requestLink(stack, email))
    const seconds = expectLimited(await requestLink(stack, email))
    // The first of the three was admitted moments ago: its slot frees in about 15 minutes.
    expect(seconds).toBeGreaterThan(800)
    // Still refused on the next try (the refusal does not reset anything).
    expectLimited(await requestLink(stack, email))
  })

  it("a.b+x@d.test, AB@D.TEST and ab+y@d.test share one bucket; ab@d.test is then refused; abc@d.test still passes", async () => {
    expectSent(await requestLink(stack, "a.b+x@d.test"))
    expectSent(await requestLink(stack, "AB@D.TEST"))
    expectSent(await requestLink(stack, "ab+y@d.test"))
    expectLimited(await requestLink(stack, "ab@d.test"))
    expectLimited(await requestLink(stack, "A.B+Z@d.test"))
    expectSent(await requestLink(stack, "abc@d.test"))
    // The domain is part of the mailbox.
    expectSent(await requestLink(stack, "ab@e.test"))
  })

  it("an unknown email is limited exactly like a known one (no way to tell them apart)", async () => {
    const known = freshEmail("known-limited")
    await inviteAsDatabaseAdmin(stack.db, known, "member")
    const unknown = freshEmail("unknown-limited")
    for (let i = 0; i < 3; i++) {
      expectSent(await requestLink(stack, known))
      expectSent(await requestLink(stack, unknown))
    }
    expectLimited(await requestLink(stack, known))
    expectLimited(await requestLink(stack, unknown))
  })

  it("answers { sent: true } for an unknown email and mails nothing to it, while a known email gets its link", async () => {
    const unknown = freshEmail("nobody")
    const known = freshEmail("somebody")
    await inviteAsDatabaseAdmin(stack.db, known, "member")
    const requestsBefore = stack.mail.requestCount()
    expectSent(await requestLink(stack, unknown))
    expectSent(await requestLink(stack, known))
    expect(await mailedToken(stack.mail, known)).toMatch(/^[0-9a-f]{64}$/)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(stack.mail.messages.filter((m) => m.to === unknown)).toEqual([])
    expect(stack.mail.requestCount() - requestsBefore).toBe(1)
  })
})

describe("per client address: 10 requests in 15 minutes", () => {
  it("from cf-connecting-ip 203.0.113.7, 10 mailboxes pass, the 11th is 429, and another address still passes", async () => {
    const headers = { "cf-connecting-ip": "203.0.113.7" }
    for (let i = 0; i < 10; i++) expectSent(await requestLink(stack, freshEmail("from-7"), headers))
    const email = freshEmail("from-7-eleventh")
    const seconds = expectLimited(await requestLink(stack, email, headers))
    expect(seconds).toBeGreaterThan(800)
    expectSent(await requestLink(stack, freshEmail("from-8"), { "cf-connecting-ip": "203.0.113.8" }))
    expectLimited(await requestLink(stack, freshEmail("from-7-twelfth"), headers))
  })

  it("CLIENT_IP_HEADER=x-real-ip: that header is the key, and cf-connecting-ip no longer is", async () => {
    for (let i = 0; i < 10; i++) {
      // A different cf-connecting-ip every time: ignored under this configuration.
      expectSent(await requestLink(realIp, freshEmail("real-50"), { "x-real-ip": "192.0.2.50", "cf-connecting-ip": freshAddress() }))
    }
    expectLimited(await requestLink(realIp, freshEmail("real-50-eleventh"), { "x-real-ip": "192.0.2.50", "cf-connecting-ip": freshAddress() }))
    expectSent(await requestLink(realIp, freshEmail("real-51"), { "x-real-ip": "192.0.2.51" }))
  })

  it("without the header, the socket's address is the key: 10 requests from 127.0.0.1 exhaust it, 127.0.0.2 still passes", async () => {
    // realIp's requests above all carried x-real-ip, so its socket-address buckets are untouched.
    for (let i = 0; i < 10; i++) expectSent(await postFromSocket(realIp, freshEmail("socket-1"), "127.0.0.1"))
    expectLimited(await postFromSocket(realIp, freshEmail("socket-1-eleventh"), "127.0.0.1"))
    // cf-connecting-ip is not the configured header here, so it does not help either.
    expectLimited(await requestLink(realIp, freshEmail("socket-1-cf"), { "cf-connecting-ip": freshAddress() }))
    expectSent(await postFromSocket(realIp, freshEmail("socket-2"), "127.0.0.2"))
    expectSent(await requestLink(realIp, freshEmail("socket-header"), { "x-real-ip": "192.0.2.52" }))
  })
})

describe("TRUSTED_PROXIES", () => {
  it("attack: a client that is no trusted proxy picks its rate-limit bucket with cf-connecting-ip (15 requests from one socket)", async () => {
    // 127.0.0.2 is not in TRUSTED_PROXIES=127.0.0.1/32: its header is ignored and its socket address is the key.
    const answers = []
    for (let i = 0; i < 15; i++) {
      answers.push(await postFromSocket(oneProxy, freshEmail("spoofer"), "127.0.0.2", { "cf-connecting-ip": freshAddress() }))
    }
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(10)
    for (const answer of answers.slice(10)) expectLimited(answer)
  })

  it("the trusted proxy (127.0.0.1) is believed: its header names the client, so another client behind it still passes", async () => {
    expectSent(await postFromSocket(oneProxy, freshEmail("behind-proxy"), "127.0.0.1", { "cf-connecting-ip": "203.0.113.70" }))
    expectSent(await requestLink(oneProxy, freshEmail("behind-proxy-2"), { "cf-connecting-ip": "203.0.113.71" }))
    // A list (an appending proxy): the last hop that is no trusted proxy is the client; what comes before it is the client's own text.
    for (let i = 0; i < 10; i++) {
      expectSent(await requestLink(oneProxy, freshEmail("appended"), { "cf-connecting-ip": `${freshAddress()}, 203.0.113.80, 127.0.0.1` }))
    }
    expectLimited(await requestLink(oneProxy, freshEmail("appended-11th"), { "cf-connecting-ip": `${freshAddress()}, 203.0.113.80` }))
    expectLimited(await requestLink(oneProxy, freshEmail("appended-12th"), { "cf-connecting-ip": "203.0.113.80" }))
    // The spoofer's bucket (127.0.0.2) stays full whatever it claims to be.
    expectLimited(await postFromSocket(oneProxy, freshEmail("spoofer-again"), "127.0.0.2", { "cf-connecting-ip": "203.0.113.72" }))
  })
  it("attack: a client behind the proxy pads the header past 1 KB (or gives a port) to leave its own bucket", async () => {
    // The proxy appends the address it saw; the padding in front is the client's own text.
    const padding = Array.from({ length: 200 }, (_, i) => `198.51.100.${i % 250}`).join(", ")
    for (let i = 0; i < 10; i++) {
      expectSent(await requestLink(oneProxy, freshEmail("padded"), { "cf-connecting-ip": `${padding}, 203.0.113.90` }))
    }
    expectLimited(await requestLink(oneProxy, freshEmail("padded-11th"), { "cf-connecting-ip": `${padding}, 203.0.113.90` }))
    // A port a balancer appended is no new address.
    expectLimited(await requestLink(oneProxy, freshEmail("padded-port"), { "cf-connecting-ip": "203.0.113.90:41234" }))
  })
})

describe("development POST /auth/login: 10 per mailbox, 30 per client address in 15 minutes", () => {
  const login = (email: string, password: string, address: string = freshAddress()) =>
    post(stack.main.url, "/auth/login", { email, password }, { headers: { "cf-connecting-ip": address } })

  it("attack: development /auth/login takes unlimited password guesses for one mailbox", async () => {
    const email = freshEmail("guessed")
    const user = await signedIn(stack, email, "member")
    expect((await post(stack.main.url, "/auth/set-password", { password: "the real password" }, { token: user.token })).status).toBe(200)
    // Each guess from another address: only the mailbox's bucket fills.
    for (let i = 0; i < 10; i++) expect((await login(email, `guess number ${i}`)).status).toBe(401)
    const seconds = expectLimited(await login(email.toUpperCase(), "the real password"))
    expect(seconds).toBeGreaterThan(800)
    // The magic-link buckets are others: the user can still ask for a sign-in link.
    expectSent(await requestLink(stack, email))
  })

  it("one client address gets 30 attempts over many mailboxes, then 429; another address still gets through", async () => {
    const address = freshAddress()
    for (let i = 0; i < 30; i++) expect((await login(freshEmail("sprayed"), "password123", address)).status).toBe(401)
    expectLimited(await login(freshEmail("sprayed-31st"), "password123", address))
    expect((await login(freshEmail("sprayed-elsewhere"), "password123")).status).toBe(401)
  })
})

describe("order of checks", () => {
  it("rate limits come before the challenge: three refused challenges count, and the 4th request is 429 even with a passing token", async () => {
    const email = freshEmail("challenged")
    const callsBefore = siteverify.calls.length
    for (let i = 1; i <= 3; i++) {
      const refused = await post(challenged.main.url, "/auth/magic-link", { email, challenge_token: `fail-${i}-${Date.now()}` }, {
        headers: { "cf-connecting-ip": freshAddress() }
      })
      expect(refused.status).toBe(403)
      expect(refused.body).toEqual({ error: expect.any(String) })
    }
    expect(siteverify.calls.length - callsBefore).toBe(3)
    const limited = await post(challenged.main.url, "/auth/magic-link", { email, challenge_token: `pass-${Date.now()}` }, {
      headers: { "cf-connecting-ip": freshAddress() }
    })
    expectLimited(limited)
    // Refused before the challenge: the service was not asked about the passing token.
    expect(siteverify.calls.length - callsBefore).toBe(3)
  })

  it("a passing challenge for a fresh mailbox still gets through on the same stack (control)", async () => {
    const response = await post(challenged.main.url, "/auth/magic-link", { email: freshEmail("challenged-ok"), challenge_token: `pass-ok-${Date.now()}` }, {
      headers: { "cf-connecting-ip": freshAddress() }
    })
    expectSent(response)
  })
})
