/** Every variable of the README's configuration table: its default, and one clear line for a bad value. */
import { ConfigProvider, Duration, Effect, Option, Redacted } from "effect"
import { describe, expect, it } from "vitest"
import { loadConfig, parseDuration } from "../../src/services/PlinthConfig.ts"

const load = (env: Record<string, string>) =>
  Effect.runPromise(Effect.result(loadConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))))

const loadOk = async (env: Record<string, string>) => {
  const result = await load(env)
  if (result._tag === "Failure") throw new Error(result.failure.message)
  return result.success
}
const loadError = async (env: Record<string, string>) => {
  const result = await load(env)
  if (result._tag === "Success") throw new Error("expected a configuration error")
  return result.failure.message
}

describe("defaults", () => {
  it("an empty environment gives the README's defaults", async () => {
    const config = await loadOk({})
    expect(config).toMatchObject({
      nodeEnv: "development",
      isProduction: false,
      host: "127.0.0.1",
      port: 3000,
      chatPort: 3001,
      dataDir: ".plinth",
      pgPort: 54329,
      clientIpHeader: "cf-connecting-ip",
      multiTenant: false,
      logLevel: "Info"
    })
    expect(Duration.toHours(config.jwtTtl)).toBe(24)
    expect(config.appUrl.toString()).toBe("http://127.0.0.1:3000/console")
    expect(config.mailApiUrl.toString()).toBe("https://api.mailgun.net/")
    expect(config.challengeVerifyUrl.toString()).toBe("https://challenges.cloudflare.com/turnstile/v0/siteverify")
    for (const key of ["databaseUrl", "chatDatabaseUrl", "adminDatabaseUrl", "jwtSecret", "mailApiKey", "challengeSecret", "anthropicApiKey"] as const) {
      expect(Option.isNone(config[key])).toBe(true)
    }
  })

  it("reads every variable", async () => {
    const config = await loadOk({
      NODE_ENV: "production",
      HOST: "0.0.0.0",
      PORT: "8080",
      CHAT_PORT: "8081",
      DATABASE_URL: "postgres://authenticator:pw@db/app",
      CHAT_DATABASE_URL: "postgres://chat_authenticator:pw@db/app",
      DATABASE_ADMIN_URL: "postgres://admin:pw@db/app",
      PLINTH_DATA_DIR: "/var/lib/plinth",
      PLINTH_PG_PORT: "6543",
      JWT_SECRET: "x".repeat(32),
      JWT_TTL: "15m",
      APP_URL: "https://app.example.com",
      MAIL_API_KEY: "key",
      MAIL_DOMAIN: "mg.example.com",
      MAIL_FROM: "Plinth <no-reply@example.com>",
      MAIL_API_URL: "http://127.0.0.1:9999",
      CHALLENGE_SECRET: "s",
      CHALLENGE_VERIFY_URL: "http://127.0.0.1:9998/siteverify",
      CLIENT_IP_HEADER: "x-forwarded-for",
      MULTI_TENANT: "true",
      TENANT_DATABASE_URL: "postgres://authenticator:pw@db/{tenant}",
      TENANT_CHAT_DATABASE_URL: "postgres://chat_authenticator:pw@db/{tenant}",
      TENANT_ADMIN_DATABASE_URL: "postgres://admin:pw@db/{tenant}",
      ANTHROPIC_API_KEY: "sk-test",
      ANTHROPIC_BASE_URL: "http://127.0.0.1:9997",
      ANTHROPIC_MODEL: "claude-test",
      LOG_LEVEL: "Debug"
    })
    expect(config.isProduction).toBe(true)
    expect(config.port).toBe(8080)
    expect(config.chatPort).toBe(8081)
    expect(config.pgPort).toBe(6543)
    expect(Duration.toMinutes(config.jwtTtl)).toBe(15)
    expect(config.multiTenant).toBe(true)
    expect(config.logLevel).toBe("Debug")
    expect(Option.map(config.databaseUrl, Redacted.value)).toEqual(Option.some("postgres://authenticator:pw@db/app"))
    expect(config.mailFrom).toEqual(Option.some("Plinth <no-reply@example.com>"))
    expect(config.anthropicModel).toBe("claude-test")
  })

  it("secrets stay redacted when printed", async () => {
    const config = await loadOk({ JWT_SECRET: "very-secret-value-that-must-not-leak", DATABASE_URL: "postgres://u:hunter2@h/d" })
    const printed = `${JSON.stringify(config)} ${String(config.jwtSecret)}`
    expect(printed).not.toContain("very-secret-value")
    expect(printed).not.toContain("hunter2")
  })
})

describe("invalid values: one line naming the variable and what was expected", () => {
  it.each([
    [{ PORT: "abc" }, "PORT"],
    [{ PORT: "70000" }, "PORT"],
    [{ CHAT_PORT: "-1" }, "CHAT_PORT"],
    [{ PLINTH_PG_PORT: "x" }, "PLINTH_PG_PORT"],
    [{ JWT_TTL: "soon" }, "JWT_TTL"],
    [{ JWT_TTL: "0h" }, "JWT_TTL"],
    [{ NODE_ENV: "staging" }, "NODE_ENV"],
    [{ APP_URL: "not a url" }, "APP_URL"],
    [{ MULTI_TENANT: "maybe" }, "MULTI_TENANT"],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
    [{ NODE_ENV: "production" }, "JWT_SECRET"],
    [{ NODE_ENV: "production", JWT_SECRET: "short" }, "JWT_SECRET"]
  ])("%j names %s", async (env, variable) => {
    const message = await loadError(env)
    expect(message).not.toContain("\n")
    expect(message).toMatch(new RegExp(`^invalid configuration: ${variable}: \\S`))
  })

  it("the JWT_TTL message says what a valid value looks like", async () => {
    expect(await loadError({ JWT_TTL: "soon" })).toContain("24h")
  })
})

it.each(["debug", "DEBUG", "Debug"])("LOG_LEVEL=%s is Debug", async (level) => {
  expect((await loadOk({ LOG_LEVEL: level })).logLevel).toBe("Debug")
})

describe("JWT_TTL forms", () => {
  it.each([
    ["24h", 24 * 3600],
    ["15m", 15 * 60],
    ["30s", 30],
    ["7d", 7 * 86400],
    ["2 hours", 7200]
  ])("%s = %i s", (text, seconds) => {
    expect(Option.map(parseDuration(text), Duration.toSeconds)).toEqual(Option.some(seconds))
  })
  it.each(["", "h", "-1h", "0s", "soon", "1 fortnight"])("%j is refused", (text) => {
    expect(Option.isNone(parseDuration(text))).toBe(true)
  })
})
