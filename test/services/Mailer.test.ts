/**
 * The Mailer with its production HTTP client against a local Mailgun-compatible endpoint: the exact
 * request, retries of transient failures only, error messages free of secrets, and the console /
 * log fallback when no provider is configured.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Console, Effect, Layer, Logger } from "effect"
import { MailerLive } from "../../src/layers/Integrations.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { confirmEmailUrl, type MagicLinkMail, Mailer, magicLinkUrl } from "../../src/services/Mailer.ts"
import { type FakeMailApi, startFakeMailApi } from "../support/FakeMailApi.ts"

const API_KEY = "key-3ax6xnjp29jd6fds4gc373sgvjxteol0"
const TOKEN = "tok/en+with=odd&chars"
const ENCODED_TOKEN = encodeURIComponent(TOKEN)
const PRODUCTION = { NODE_ENV: "production", JWT_SECRET: "p".repeat(32) }

let fake: FakeMailApi
beforeAll(async () => {
  fake = await startFakeMailApi()
})
afterAll(async () => {
  await fake?.close()
})
beforeEach(() => {
  fake.messages.length = 0
  fake.failNext(0)
})

const providerEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
  NODE_ENV: "test",
  MAIL_API_KEY: API_KEY,
  MAIL_DOMAIN: "mg.example.com",
  MAIL_FROM: "Plinth <no-reply@example.com>",
  MAIL_API_URL: fake.url,
  APP_URL: "https://app.example.com",
  ...extra
})

interface Captured {
  readonly console: Array<string>
  readonly logs: Array<{ readonly level: string; readonly message: string }>
}

/** Builds the Mailer from `env` and runs `send` with console and logger captured. */
const withMailer = <A, E>(env: Record<string, string>, send: (mailer: Mailer["Service"]) => Effect.Effect<A, E>) => {
  const captured: Captured = { console: [], logs: [] }
  const console_: Console.Console = Object.assign(Object.create(globalThis.console) as Console.Console, {
    log: (...args: ReadonlyArray<unknown>) => {
      captured.console.push(args.map(String).join(" "))
    }
  })
  const logger = Logger.layer([Logger.make(({ logLevel, message }) => {
    captured.logs.push({ level: logLevel, message: (Array.isArray(message) ? message : [message]).map(String).join(" ") })
  })])
  const layer = MailerLive.pipe(
    Layer.provide(PlinthConfig.layer),
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
  )
  return Effect.gen(function*() {
    const result = yield* Effect.result(Mailer.use(send))
    return { result, captured }
  }).pipe(Effect.provide(layer), Effect.provide(logger), Effect.provideService(Console.Console, console_))
}

const signIn: MagicLinkMail = { to: "ada@example.com", token: TOKEN, kind: "sign-in" }

describe("with a provider", () => {
  it.live("sends the Mailgun request: path, basic auth, form fields, the link in text and html", () =>
    Effect.gen(function*() {
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink(signIn))
      expect(result._tag).toBe("Success")
      expect(fake.messages).toHaveLength(1)
      const link = `https://app.example.com/auth/callback?token=${ENCODED_TOKEN}`
      const [message] = fake.messages
      expect(message).toMatchObject({
        domain: "mg.example.com",
        auth: `api:${API_KEY}`,
        from: "Plinth <no-reply@example.com>",
        to: "ada@example.com",
        subject: "Your sign-in link"
      })
      expect(message!.text).toContain(link)
      expect(message!.html).toContain(`href="${link}"`)
    }))

  it.live("an invite has its own subject, and the html escapes the link", () =>
    Effect.gen(function*() {
      const env = providerEnv({ APP_URL: "https://app.example.com/o'neil/" })
      const { result } = yield* withMailer(env, (mailer) => mailer.sendMagicLink({ ...signIn, kind: "invite" }))
      expect(result._tag).toBe("Success")
      const [message] = fake.messages
      expect(message!.subject).toBe("You're invited to Plinth")
      expect(message!.text).toContain(`https://app.example.com/o'neil/auth/callback?token=${ENCODED_TOKEN}`)
      expect(message!.html).toContain(`href="https://app.example.com/o&#39;neil/auth/callback?token=${ENCODED_TOKEN}"`)
      expect(message!.html).not.toContain("o'neil")
    }))

  it.live("an email change goes to the new address with its own subject and the /auth/confirm-email link", () =>
    Effect.gen(function*() {
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink({ ...signIn, to: "new@example.com", kind: "email-change" }))
      expect(result._tag).toBe("Success")
      const [message] = fake.messages
      expect(message).toMatchObject({ to: "new@example.com", subject: "Confirm your new email address" })
      const link = `https://app.example.com/auth/confirm-email?token=${ENCODED_TOKEN}`
      expect(message!.text).toContain(link)
      expect(message!.html).toContain(`href="${link}"`)
      expect(message!.text).not.toContain("/auth/callback")
    }))

  it.live("retries 503s, then succeeds", () =>
    Effect.gen(function*() {
      fake.failNext(2, 503)
      const before = fake.requestCount()
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink(signIn))
      expect(result._tag).toBe("Success")
      expect(fake.requestCount() - before).toBe(3)
      expect(fake.messages).toHaveLength(1)
    }))

  it.live("retries a 429 too", () =>
    Effect.gen(function*() {
      fake.failNext(1, 429)
      const before = fake.requestCount()
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink(signIn))
      expect(result._tag).toBe("Success")
      expect(fake.requestCount() - before).toBe(2)
    }))

  it.live("does not retry a 400; the MailError names the status and neither the key nor the token", () =>
    Effect.gen(function*() {
      fake.failNext(1, 400)
      const before = fake.requestCount()
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink(signIn))
      expect(fake.requestCount() - before).toBe(1)
      expect(fake.messages).toHaveLength(0)
      if (result._tag !== "Failure") throw new Error("expected a MailError")
      expect(result.failure._tag).toBe("MailError")
      expect(result.failure.message).toContain("400")
      const printed = `${result.failure.message} ${JSON.stringify(result.failure)} ${String(result.failure)}`
      expect(printed).not.toContain(API_KEY)
      expect(printed).not.toContain(TOKEN)
      expect(printed).not.toContain(ENCODED_TOKEN)
    }))

  it.live("gives up after 3 retries (4 attempts) with a MailError naming the status", () =>
    Effect.gen(function*() {
      fake.failNext(10, 503)
      const before = fake.requestCount()
      const { result } = yield* withMailer(providerEnv(), (mailer) => mailer.sendMagicLink(signIn))
      expect(fake.requestCount() - before).toBe(4)
      if (result._tag !== "Failure") throw new Error("expected a MailError")
      expect(result.failure.message).toContain("503")
      expect(result.failure.message).not.toContain(API_KEY)
    }))

  it.live("an unreachable provider is a MailError without secrets", () =>
    Effect.gen(function*() {
      const closed = yield* Effect.promise(() => startFakeMailApi())
      yield* Effect.promise(() => closed.close())
      const { result } = yield* withMailer(providerEnv({ MAIL_API_URL: closed.url }), (mailer) => mailer.sendMagicLink(signIn))
      if (result._tag !== "Failure") throw new Error("expected a MailError")
      expect(result.failure.message).toBe("mail provider unreachable")
    }))
})

describe("without a provider", () => {
  it.live("development: one console line with the full link", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* withMailer(
        { NODE_ENV: "development", APP_URL: "http://localhost:5173/" },
        (mailer) => mailer.sendMagicLink(signIn)
      )
      expect(result._tag).toBe("Success")
      expect(captured.console).toEqual([
        `Magic link for ada@example.com (sign-in): http://localhost:5173/auth/callback?token=${ENCODED_TOKEN}`
      ])
      expect(captured.console[0]).toContain("token=")
      expect(captured.logs.filter((entry) => entry.level === "Warn")).toEqual([])
    }))

  it.live("development: an email change's console line shows its /auth/confirm-email link", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* withMailer(
        { NODE_ENV: "development", APP_URL: "http://localhost:5173/" },
        (mailer) => mailer.sendMagicLink({ ...signIn, to: "new@example.com", kind: "email-change" })
      )
      expect(result._tag).toBe("Success")
      expect(captured.console).toEqual([
        `Magic link for new@example.com (email-change): http://localhost:5173/auth/confirm-email?token=${ENCODED_TOKEN}`
      ])
    }))

  it.live("production: a warning without the token or the full address, nothing on the console, and success", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* withMailer(PRODUCTION, (mailer) => mailer.sendMagicLink(signIn))
      expect(result._tag).toBe("Success")
      expect(captured.console).toEqual([])
      expect(captured.logs).toContainEqual({
        level: "Warn",
        message: "no mail provider configured: magic link for a***@example.com not sent"
      })
      expect(JSON.stringify(captured)).not.toContain("ada@example.com")
      const everything = JSON.stringify(captured)
      expect(everything).not.toContain(ENCODED_TOKEN)
      expect(everything).not.toContain("token=")
    }))

  it.live("partially configured: one warning naming the missing variables, then the fallback", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* withMailer(
        { NODE_ENV: "development", MAIL_API_KEY: API_KEY, MAIL_API_URL: fake.url },
        (mailer) => Effect.andThen(mailer.sendMagicLink(signIn), mailer.sendMagicLink(signIn))
      )
      expect(result._tag).toBe("Success")
      const warnings = captured.logs.filter((entry) => entry.level === "Warn")
      expect(warnings).toHaveLength(1)
      expect(warnings[0]!.message).toContain("MAIL_DOMAIN, MAIL_FROM")
      expect(warnings[0]!.message).not.toContain("MAIL_API_KEY")
      expect(warnings[0]!.message).not.toContain(API_KEY)
      expect(captured.console).toHaveLength(2)
      expect(fake.messages).toHaveLength(0)
    }))
})

describe("magicLinkUrl", () => {
  it.each([
    ["http://localhost:5173", "http://localhost:5173/auth/callback?token=abc"],
    ["http://localhost:5173/", "http://localhost:5173/auth/callback?token=abc"],
    ["https://example.com/app", "https://example.com/app/auth/callback?token=abc"],
    ["https://example.com/app/", "https://example.com/app/auth/callback?token=abc"],
    ["https://example.com/app/?x=1#frag", "https://example.com/app/auth/callback?token=abc"]
  ])("%s", (appUrl, expected) => {
    expect(magicLinkUrl(new URL(appUrl), "abc")).toBe(expected)
  })

  it("URL-encodes the token", () => {
    expect(magicLinkUrl(new URL("http://localhost:5173"), "a b&c=d/+")).toBe(
      "http://localhost:5173/auth/callback?token=a%20b%26c%3Dd%2F%2B"
    )
  })
  it("carries the tenant in multi-tenant mode, after the token", () => {
    expect(magicLinkUrl(new URL("http://localhost:3000/console"), "abc", "acme")).toBe("http://localhost:3000/console/auth/callback?token=abc&tenant=acme")
    expect(confirmEmailUrl(new URL("http://localhost:3000/console"), "abc", "acme")).toBe("http://localhost:3000/console/auth/confirm-email?token=abc&tenant=acme")
  })
})
