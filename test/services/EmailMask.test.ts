/**
 * Production logs name no email address (issue #19): the Mailer's warning, the production logger
 * (whatever code logged the address) and `plinth invite` in production mask them as `j***@example.com`.
 */
import { ConfigProvider, Console, Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MailerLive } from "../../src/layers/Integrations.ts"
import { LoggingLive } from "../../src/layers/Logging.ts"
import { maskEmail, maskEmails } from "../../src/services/EmailMask.ts"
import { Mailer } from "../../src/services/Mailer.ts"
import { PlinthConfig } from "../../src/services/PlinthConfig.ts"
import { runPlinth } from "../support/cli.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"

const PRODUCTION = { NODE_ENV: "production", JWT_SECRET: "p".repeat(32) }

/** Runs `effect` under LoggingLive built from `env`, returning what it wrote to the console. */
const logged = async (env: Record<string, string>, effect: Effect.Effect<void, never, Mailer>) => {
  const lines: Array<string> = []
  const console_: Console.Console = Object.assign(Object.create(globalThis.console) as Console.Console, {
    log: (...args: ReadonlyArray<unknown>) => {
      lines.push(args.map(String).join(" "))
    }
  })
  const config = PlinthConfig.layer.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))
  await Effect.runPromise(effect.pipe(
    Effect.provide(Layer.mergeAll(LoggingLive, MailerLive).pipe(Layer.provide(config))),
    Effect.provideService(Console.Console, console_)
  ))
  return lines
}

describe("maskEmail / maskEmails", () => {
  it.each([
    ["jane.doe@example.com", "j***@example.com"],
    ["J@x.test", "J***@x.test"],
    ["élodie@exemple.fr", "é***@exemple.fr"],
    ["no-at-sign", "***"]
  ])("%s → %s", (email, masked) => {
    expect(maskEmail(email)).toBe(masked)
  })

  it("masks every address in a text and leaves the rest", () => {
    expect(maskEmails(`Key (lower(email))=(ada@x.test) already exists; to: "o'neil+tag@mail.example.co.uk", at 10:00`))
      .toBe(`Key (lower(email))=(a***@x.test) already exists; to: "o***@mail.example.co.uk", at 10:00`)
    expect(maskEmails("GET /health 200 3ms")).toBe("GET /health 200 3ms")
  })
})

describe("production logs", () => {
  it("attack: production logs carry the email address of everyone who asks for a sign-in link", async () => {
    const lines = await logged(PRODUCTION, Effect.gen(function*() {
      const mailer = yield* Mailer
      // No provider configured: the production Mailer logs a warning instead of sending.
      yield* Effect.orDie(mailer.sendMagicLink({ to: "jane.doe@example.com", token: "t".repeat(64), kind: "sign-in" }))
      // Any other line that happens to name an address (a database error's detail, say).
      yield* Effect.logError("request failed", new Error("Key (lower(email))=(newhire@x.test) already exists"))
    }))
    const everything = lines.join("\n")
    expect(lines.length).toBeGreaterThanOrEqual(2)
    expect(everything).not.toContain("jane.doe@example.com")
    expect(everything).not.toContain("newhire@x.test")
    expect(everything).toContain("j***@example.com")
    expect(everything).toContain("n***@x.test")
    // Still one JSON object per line.
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow()
  })
})

describe("plinth invite", () => {
  let db: TestDatabase
  beforeAll(async () => {
    db = await createTestDatabase()
  })
  afterAll(() => db?.drop())

  it("in production prints the link but masks the address", async () => {
    const plinth = runPlinth(["invite", "first.owner@plinth.test", "owner"], {
      ...PRODUCTION,
      DATABASE_URL: db.mainUrl,
      DATABASE_ADMIN_URL: db.adminUrl,
      APP_URL: "http://app.test"
    })
    expect(await plinth.exited).toBe(0)
    expect(plinth.stdout()).toMatch(/http:\/\/app\.test\/auth\/callback\?token=[0-9a-f]{64}/)
    expect(plinth.stdout()).toContain("Invited f***@plinth.test as owner")
    expect(`${plinth.stdout()}${plinth.stderr()}`).not.toContain("first.owner@plinth.test")
  }, 60_000)
})
