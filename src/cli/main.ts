#!/usr/bin/env -S node --max-semi-space-size=16 --no-allocation-site-pretenuring
/**
 * The `plinth` command: `start` (everything in one process, on the embedded database unless URLs
 * are set), `serve main|chat` (one service: the production shape), `migrate`, `invite`, and
 * `tenant create|list|migrate` for multi-tenant mode.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { SqlClient } from "effect/sql"
import { maskEmail } from "../services/EmailMask.ts"
import { magicLinkUrl } from "../services/Mailer.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { DatabaseUrls, migrateDatabase, requireUrl, withDatabase } from "../layers/Database.ts"
import { LoggingLive } from "../layers/Logging.ts"
import { ChatService, MainService } from "../layers/Services.ts"
import { createTenant, listTenants, migrateTenants, tenantAdminUrl } from "../layers/TenantAdmin.ts"

/**
 * Configuration, logging and the database location: what every command stands on. Provided per
 * command, so that `--help` starts nothing.
 */
const Base = DatabaseUrls.layer.pipe(Layer.provideMerge(LoggingLive), Layer.provideMerge(PlinthConfig.layer))

const applyMigrations = Effect.gen(function*() {
  const applied = yield* migrateDatabase(yield* requireUrl("admin"))
  yield* Effect.logInfo(applied.length > 0 ? `applied migrations: ${applied.join(", ")}` : "migrations: up to date")
})

/**
 * Each service is built on its own (Layer.build has its own memo map), so the two HTTP servers
 * never share a router.
 */
const runServices = (services: ReadonlyArray<"main" | "chat">) =>
  Effect.scoped(Effect.gen(function*() {
    const config = yield* PlinthConfig
    const urls = yield* DatabaseUrls
    // The embedded database was migrated as it started; with URLs, an admin URL means "migrate first".
    if (!urls.embedded && Option.isSome(urls.admin)) yield* applyMigrations
    if (config.multiTenant && Option.isSome(urls.admin)) {
      for (const result of yield* migrateTenants()) {
        if (result.applied.length > 0) yield* Effect.logInfo(`tenant ${result.name}: applied ${result.applied.join(", ")}`)
      }
    }
    for (const service of services) yield* Layer.build(service === "main" ? MainService : ChatService)
    const base = (port: number) => `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`
    if (services.includes("main")) yield* Console.log(`Plinth main service: ${base(config.port)}`)
    if (services.includes("chat")) yield* Console.log(`Plinth chat service: ${base(config.chatPort)}`)
    if (urls.embedded) yield* Console.log("Invite the first owner: npm run plinth -- invite you@example.com owner")
    return yield* Effect.never
  }))

const start = Command.make("start", {}, () => runServices(["main", "chat"]).pipe(Effect.provide(Base))).pipe(
  Command.withDescription("Run both services (on the embedded PostgreSQL unless DATABASE_URL is set)")
)

const serve = Command.make("serve", {
  service: Argument.Literals("service", ["main", "chat"]).pipe(Argument.withDescription("main or chat"))
}, ({ service }) => runServices([service]).pipe(Effect.provide(Base))).pipe(
  Command.withDescription("Run one service (production shape: one process per service)")
)

const invite = Command.make("invite", {
  email: Argument.String("email").pipe(Argument.withDescription("the new user's email address")),
  role: Argument.Literals("role", ["owner", "admin", "staff", "member"]).pipe(Argument.withDescription("owner, admin, staff or member")),
  tenant: Flag.String("tenant").pipe(Flag.optional, Flag.withDescription("multi-tenant mode: the tenant to invite into"))
}, ({ email, role, tenant }) =>
  Effect.gen(function*() {
    const config = yield* PlinthConfig
    const adminUrl = Option.isSome(tenant) ? yield* tenantAdminUrl(tenant.value) : yield* requireUrl("admin")
    // As a database administrator: no app role is set, which is what lets the first owner in.
    const token = yield* withDatabase(adminUrl, Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [row] = yield* sql<{ token: string }>`SELECT sys.invite_user(${email}, ${role}) AS token`
      return row!.token
    }))
    // Production output tends to end up in collected logs: the address is masked there, the link is what the operator needs.
    yield* Console.log(`Invited ${config.isProduction ? maskEmail(email) : email} as ${role}. Sign-in link (valid 15 minutes, single use):`)
    yield* Console.log(magicLinkUrl(config.appUrl, token))
  }).pipe(Effect.provide(Base))).pipe(
  Command.withDescription("Invite a user as a database administrator (how the first owner gets in) and print the sign-in link")
)

const tenantName = Argument.String("name").pipe(Argument.withDescription("a-z, 0-9 and _, starting with a letter"))

const tenant = Command.make("tenant").pipe(
  Command.withDescription("Multi-tenant mode: create, list and migrate tenants"),
  Command.withSubcommands([
    Command.make("create", { name: tenantName }, ({ name }) =>
      Effect.gen(function*() {
        const applied = yield* createTenant(name)
        yield* Console.log(`Tenant ${name} is ready (${applied.length} migrations applied).`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Create (and migrate) a tenant's database and register it")),
    Command.make("list", {}, () =>
      Effect.gen(function*() {
        for (const row of yield* listTenants()) yield* Console.log(`${row.name}\t${row.created_at}`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("List the registered tenants")),
    Command.make("migrate", {}, () =>
      Effect.gen(function*() {
        for (const result of yield* migrateTenants()) {
          yield* Console.log(`${result.name}: ${result.applied.length > 0 ? result.applied.join(", ") : "up to date"}`)
        }
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Apply pending migrations to every tenant"))
  ])
)

const migrate = Command.make("migrate", {}, () => applyMigrations.pipe(Effect.provide(Base))).pipe(
  Command.withDescription("Apply pending migrations with DATABASE_ADMIN_URL (or the embedded database)")
)

export const plinth = Command.make("plinth").pipe(
  Command.withDescription("Plinth: a backend for data-driven business applications on PostgreSQL"),
  Command.withSubcommands([start, serve, migrate, invite, tenant])
)

/** Failures that reach the top are one line for the operator; anything else is a bug and shows its trace. */
const reportFailure = (cause: Cause.Cause<unknown>) => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.void
  const error = Cause.squash(cause)
  const known = Cause.hasFails(cause) && typeof (error as { message?: unknown }).message === "string"
  return Console.error(known ? `plinth: ${(error as { message: string }).message}` : `plinth: unexpected failure\n${Cause.pretty(cause)}`)
}

if (import.meta.main) {
  plinth.pipe(
    Command.run({ version: "0.1.0" }),
    Effect.tapCause(reportFailure),
    Effect.provide(NodeServices.layer),
    NodeRuntime.runMain({
      disableErrorReporting: true,
      // A signal is the normal way to stop a server: that is a clean exit.
      teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
    })
  )
}
