/**
 * Plinth's configuration: every environment variable of the README's configuration table, read once through Effect `Config`
 * with its default. An invalid value becomes one line naming the variable and what was expected.
 */
import { Config, Context, Duration, Effect, Layer, type LogLevel, Option, Redacted, Schema, SchemaIssue, SchemaTransformation } from "effect"
import { DEFAULT_TRUSTED_PROXIES, TrustedProxies } from "./TrustedProxies.ts"

/** Where the main service serves the console (src/http/ConsoleRoutes.ts), and so APP_URL's default path. */
export const CONSOLE_PATH = "/console"

const Environment = Schema.Literals(["development", "production", "test"])

/** `24h`, `15m`, `30s`, `7d`, or Effect's own `"24 hours"`. */
const DurationPattern = /^(\d+)\s*(s|m|h|d)$/
const durationUnits = { s: "seconds", m: "minutes", h: "hours", d: "days" } as const
export const parseDuration = (text: string): Option.Option<Duration.Duration> => {
  const short = DurationPattern.exec(text.trim())
  if (short) {
    const amount = Number(short[1])
    return amount > 0 ? Option.some(Duration.fromInputUnsafe(`${amount} ${durationUnits[short[2] as keyof typeof durationUnits]}`)) : Option.none()
  }
  return Duration.fromInput(text as Duration.Input).pipe(Option.filter(Duration.isGreaterThan(Duration.zero)))
}

const PositiveDuration = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Duration,
    SchemaTransformation.transformEffect({
      decode: (text: string) =>
        Option.match(parseDuration(text), {
          onNone: () =>
            Effect.fail(new SchemaIssue.InvalidValue({ message: "Expected a positive duration such as 24h, 15m, 30s or 7d" })),
          onSome: Effect.succeed
        }),
      encode: (duration: Duration.Duration) => Effect.succeed(`${Duration.toSeconds(duration)}s`)
    })
  )
)

const LogLevels = Schema.Literals(["All", "Fatal", "Error", "Warn", "Info", "Debug", "Trace", "None"])
/** `info`, `INFO` and `Info` alike: operators write levels in every case. */
const LogLevelName = Schema.String.pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform({
      decode: (text: string) => text.charAt(0).toUpperCase() + text.slice(1).toLowerCase(),
      encode: (level: string) => level
    })
  ),
  Schema.decodeTo(LogLevels, SchemaTransformation.passthroughSupertype())
)

/**
 * One entry of CORS_ORIGINS as it is kept: `*`, an origin (`https://app.example.com`, as browsers
 * write it in `Origin`), or an origin with any port (`http://localhost:*`); none for anything else.
 */
export const parseOrigin = (text: string): Option.Option<string> => {
  const entry = text.trim()
  if (entry === "*") return Option.some(entry)
  const anyPort = entry.endsWith(":*")
  const base = anyPort ? entry.slice(0, -2) : entry
  if (!/^https?:\/\/[^/?#@\s]+\/?$/i.test(base) || !URL.canParse(base)) return Option.none()
  const url = new URL(base)
  if (anyPort && url.port !== "") return Option.none()
  return Option.some(anyPort ? `${url.origin}:*` : url.origin)
}

/** CORS_ORIGINS: comma-separated origins, each kept in the form browsers send. */
const CorsOrigins = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Array(Schema.String),
    SchemaTransformation.transformEffect({
      decode: (text: string) => {
        const entries = text.split(",").map((part) => part.trim()).filter((part) => part !== "")
        const origins: Array<string> = []
        for (const entry of entries) {
          const origin = parseOrigin(entry)
          if (Option.isNone(origin)) {
            return Effect.fail(new SchemaIssue.InvalidValue({
              message: `Expected comma-separated origins such as https://app.example.com,http://localhost:* (or *); not an origin: ${JSON.stringify(entry.slice(0, 80))}`
            }))
          }
          origins.push(origin.value)
        }
        return origins.length === 0
          ? Effect.fail(new SchemaIssue.InvalidValue({ message: "Expected at least one origin" }))
          : Effect.succeed(origins)
      },
      encode: (origins: ReadonlyArray<string>) => Effect.succeed(origins.join(","))
    })
  )
)

/**
 * The origins allowed when CORS_ORIGINS is unset: the web app's (APP_URL), and in development any
 * page served from this machine, whatever its port.
 */
export const defaultCorsOrigins = (appUrl: URL, nodeEnv: string): ReadonlyArray<string> => [
  ...(appUrl.origin === "null" ? [] : [appUrl.origin]),
  ...(nodeEnv === "development" ? ["http://localhost:*", "http://127.0.0.1:*"] : [])
]

/**
 * The address a browser on this machine reaches a service at: its HOST, or `localhost` when it listens
 * on every address (a browser cannot open 0.0.0.0).
 */
export const localServiceUrl = (host: string, port: number, path = "/"): URL => {
  const name = host === "0.0.0.0" || host === "::" || host === "" ? "localhost" : host.includes(":") ? `[${host}]` : host
  return new URL(path, `http://${name}:${port}`)
}

const optionalSecret = (name: string) => Config.option(Config.Redacted(name))
const optionalString = (name: string) => Config.option(Config.NonEmptyString(name))

export const ConfigValues = Config.all({
  nodeEnv: Config.schema(Environment, "NODE_ENV").pipe(Config.withDefault("development" as const)),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  port: Config.Port("PORT").pipe(Config.withDefault(3000)),
  chatPort: Config.Port("CHAT_PORT").pipe(Config.withDefault(3001)),
  databaseUrl: optionalSecret("DATABASE_URL"),
  chatDatabaseUrl: optionalSecret("CHAT_DATABASE_URL"),
  adminDatabaseUrl: optionalSecret("DATABASE_ADMIN_URL"),
  dataDir: Config.NonEmptyString("PLINTH_DATA_DIR").pipe(Config.withDefault(".plinth")),
  pgPort: Config.Port("PLINTH_PG_PORT").pipe(Config.withDefault(54329)),
  jwtSecret: optionalSecret("JWT_SECRET"),
  jwtTtl: Config.schema(PositiveDuration, "JWT_TTL").pipe(Config.withDefault(Duration.hours(24))),
  appUrlSetting: Config.option(Config.URL("APP_URL")),
  chatUrlSetting: Config.option(Config.URL("CHAT_URL")),
  corsOriginsSetting: Config.option(Config.schema(CorsOrigins, "CORS_ORIGINS")),
  mailApiKey: optionalSecret("MAIL_API_KEY"),
  mailDomain: optionalString("MAIL_DOMAIN"),
  mailFrom: optionalString("MAIL_FROM"),
  mailApiUrl: Config.URL("MAIL_API_URL").pipe(Config.withDefault(new URL("https://api.mailgun.net"))),
  challengeSecret: optionalSecret("CHALLENGE_SECRET"),
  challengeSiteKey: optionalString("CHALLENGE_SITE_KEY"),
  challengeVerifyUrl: Config.URL("CHALLENGE_VERIFY_URL").pipe(
    Config.withDefault(new URL("https://challenges.cloudflare.com/turnstile/v0/siteverify"))
  ),
  clientIpHeader: Config.String("CLIENT_IP_HEADER").pipe(Config.withDefault("cf-connecting-ip")),
  trustedProxies: Config.schema(TrustedProxies, "TRUSTED_PROXIES").pipe(Config.withDefault(DEFAULT_TRUSTED_PROXIES)),
  multiTenant: Config.Boolean("MULTI_TENANT").pipe(Config.withDefault(false)),
  tenantDatabaseUrl: optionalSecret("TENANT_DATABASE_URL"),
  tenantChatDatabaseUrl: optionalSecret("TENANT_CHAT_DATABASE_URL"),
  tenantAdminDatabaseUrl: optionalSecret("TENANT_ADMIN_DATABASE_URL"),
  anthropicApiKey: optionalSecret("ANTHROPIC_API_KEY"),
  anthropicBaseUrl: Config.option(Config.URL("ANTHROPIC_BASE_URL")),
  anthropicModel: Config.String("ANTHROPIC_MODEL").pipe(Config.withDefault("claude-sonnet-4-6")),
  sqlTimeout: Config.schema(PositiveDuration, "SQL_TIMEOUT").pipe(Config.withDefault(Duration.seconds(15))),
  sqlMaxResponseBytes: Config.schema(Schema.Int.pipe(Schema.check(Schema.isGreaterThan(0))), "SQL_MAX_RESPONSE_BYTES").pipe(Config.withDefault(64 * 1024 * 1024)),
  sqlMaxConcurrentPerUser: Config.schema(Schema.Int.pipe(Schema.check(Schema.isGreaterThan(0))), "SQL_MAX_CONCURRENT_PER_USER").pipe(
    Config.withDefault(4)
  ),
  tenantIdleTimeout: Config.schema(PositiveDuration, "TENANT_IDLE_TIMEOUT").pipe(Config.withDefault(Duration.minutes(5))),
  tenantMaxLive: Config.schema(Schema.Int.pipe(Schema.check(Schema.isGreaterThan(0))), "TENANT_MAX_LIVE").pipe(Config.withDefault(100)),
  clusterConnectionReserve: Config.schema(Schema.Int.pipe(Schema.check(Schema.isGreaterThanOrEqualTo(0))), "CLUSTER_CONNECTION_RESERVE").pipe(
    Config.withDefault(20)
  ),
  chatMaxSteps: Config.schema(Schema.Int.pipe(Schema.check(Schema.isBetween({ minimum: 1, maximum: 200 }))), "CHAT_MAX_STEPS").pipe(
    Config.withDefault(25)
  ),
  chatAbandonedAfter: Config.schema(PositiveDuration, "CHAT_ABANDONED_AFTER").pipe(Config.withDefault(Duration.minutes(15))),
  rateLimitStore: Config.option(Config.schema(Schema.Literals(["memory", "postgres"]), "RATE_LIMIT_STORE")),
  eventsHeartbeat: Config.schema(PositiveDuration, "EVENTS_HEARTBEAT").pipe(Config.withDefault(Duration.seconds(30))),
  eventsMaxStreamsPerUser: Config.schema(Schema.Int.pipe(Schema.check(Schema.isGreaterThan(0))), "EVENTS_MAX_STREAMS_PER_USER").pipe(
    Config.withDefault(10)
  ),
  logLevel: Config.schema(LogLevelName, "LOG_LEVEL").pipe(Config.withDefault<LogLevel.LogLevel>("Info")),
  logRequests: Config.Boolean("LOG_REQUESTS").pipe(Config.withDefault(true))
})

export interface ConfigShape extends Config.Success<typeof ConfigValues> {
  readonly isProduction: boolean
  /** The web app links in emails lead to (APP_URL): by default the console this main service serves. */
  readonly appUrl: URL
  /** Where browsers reach the chat service (CHAT_URL): by default HOST:CHAT_PORT. */
  readonly chatUrl: URL
  /** The origins whose pages may call the services (CORS_ORIGINS, or its default). */
  readonly corsOrigins: ReadonlyArray<string>
}

/** A configuration that cannot be used; `message` is one line for the operator. */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("InvalidConfig", {
  message: Schema.String
}) {}

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()
const configErrorLine = (error: Config.ConfigError): string =>
  Schema.isSchemaError(error.cause)
    ? formatIssues(error.cause.issue).issues
      .map((issue) => `${(issue.path ?? []).join(".")}: ${issue.message}`).join("; ")
    : error.message.replace(/\s*\n\s*/g, " ")

/** Rules that span several variables, checked once the values parse. */
const checkCombinations = (values: Config.Success<typeof ConfigValues>): Option.Option<string> => {
  if (values.nodeEnv !== "production") return Option.none()
  if (Option.isSome(values.corsOriginsSetting) && values.corsOriginsSetting.value.includes("*")) {
    return Option.some("CORS_ORIGINS: * is not allowed when NODE_ENV=production; list the origins of your web apps")
  }
  if (Option.isNone(values.jwtSecret)) return Option.some("JWT_SECRET: required when NODE_ENV=production")
  if (Buffer.byteLength(Redacted.value(values.jwtSecret.value)) < 32) {
    return Option.some("JWT_SECRET: Expected at least 32 bytes")
  }
  return Option.none()
}

export const loadConfig: Effect.Effect<ConfigShape, InvalidConfig> = ConfigValues.pipe(
  Effect.mapError((error) => new InvalidConfig({ message: `invalid configuration: ${configErrorLine(error)}` })),
  Effect.flatMap((values) =>
    Option.match(checkCombinations(values), {
      onNone: () => {
        const appUrl = Option.getOrElse(values.appUrlSetting, () => localServiceUrl(values.host, values.port, CONSOLE_PATH))
        return Effect.succeed({
          ...values,
          isProduction: values.nodeEnv === "production",
          appUrl,
          chatUrl: Option.getOrElse(values.chatUrlSetting, () => localServiceUrl(values.host, values.chatPort)),
          corsOrigins: Option.getOrElse(values.corsOriginsSetting, () => defaultCorsOrigins(appUrl, values.nodeEnv))
        })
      },
      onSome: (line) => Effect.fail(new InvalidConfig({ message: `invalid configuration: ${line}` }))
    })
  )
)

export class PlinthConfig extends Context.Service<PlinthConfig, ConfigShape>()("plinth/Config") {
  static readonly layer = Layer.effect(PlinthConfig, loadConfig)
}
