#!/usr/bin/env -S node --max-semi-space-size=16 --no-allocation-site-pretenuring
/**
 * The `plinth` command: `start` (everything in one process, on the embedded database unless URLs
 * are set), `serve main|chat` (one service: the production shape), `migrate`, `invite`,
 * `users list|deactivate|activate|role`, `db url`, `audit prune`, `app export|import`, and
 * `tenant create|list|migrate|move|cleanup` and `cluster add|list|drain|activate` for multi-tenant mode.
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Console, Effect, Exit, Layer, Option, Redacted, Schema } from "effect"
import { Argument, CliError, CliOutput, Command, Flag } from "effect/cli"
import { SqlClient, SqlError } from "effect/sql"
import { existsSync } from "node:fs"
import { readFile, stat } from "node:fs/promises"
import * as path from "node:path"
import * as AppDefinition from "../services/AppDefinition.ts"
import { pruneAuditEvents } from "../services/AuditTrail.ts"
import { describeFailure } from "../services/DatabaseError.ts"
import { maskEmail } from "../services/EmailMask.ts"
import { magicLinkUrl } from "../services/Mailer.ts"
import { PageChecker } from "../services/PageChecker.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import * as UserAdmin from "../services/UserAdmin.ts"
import { ensureConsoleBuilt } from "../layers/ConsoleBuild.ts"
import { DatabaseUrls, EMBEDDED_DATABASE, migrateDatabase, requireUrl, withDatabase } from "../layers/Database.ts"
import { portTaken, runningServer } from "../layers/EmbeddedPostgres.ts"
import { loadLocalSecrets } from "../layers/LocalSecrets.ts"
import { LoggingLive } from "../layers/Logging.ts"
import { ChatService, MainService } from "../layers/Services.ts"
import { addCluster, listClusters, setClusterState } from "../layers/Clusters.ts"
import { createTenant, listTenants, migrateTenants, tenantAdminUrl } from "../layers/TenantAdmin.ts"
import { cleanupTenant, moveTenant } from "../layers/TenantMove.ts"

/**
 * Configuration, logging and the database location: what every command stands on. Provided per
 * command, so that `--help` starts nothing.
 */
const Base = DatabaseUrls.layer.pipe(Layer.provideMerge(LoggingLive), Layer.provideMerge(PlinthConfig.layer))

/** A failure the operator can act on, reported as its one line. */
class CliFailure extends Schema.TaggedError<CliFailure>()("CliFailure", { message: Schema.String }) {}

const applyMigrations = Effect.gen(function*() {
  const applied = yield* migrateDatabase(yield* requireUrl("admin"))
  yield* Effect.logInfo(applied.length > 0 ? `applied migrations: ${applied.join(", ")}` : "migrations: up to date")
})

const DEFAULT_DATA_DIR = ".plinth"
const DEFAULT_PG_PORT = 54329

/**
 * The command that invites the first owner, carrying the settings this server runs with (so it
 * reaches this data directory and port), shown only while no owner exists.
 */
const firstOwnerHint = Effect.gen(function*() {
  const config = yield* PlinthConfig
  if (config.multiTenant) return
  const hasOwner = yield* withDatabase(yield* requireUrl("admin"), Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ found: boolean }>`SELECT EXISTS (SELECT FROM sys.users WHERE role = 'owner' AND is_active) AS found`
    return rows[0]?.found === true
  })).pipe(Effect.orElseSucceed(() => false))
  if (hasOwner) return
  const settings = [
    path.resolve(config.dataDir) === path.resolve(DEFAULT_DATA_DIR) ? "" : `PLINTH_DATA_DIR=${shellWord(path.resolve(config.dataDir))} `,
    config.pgPort === DEFAULT_PG_PORT ? "" : `PLINTH_PG_PORT=${config.pgPort} `
  ].join("")
  yield* Console.log(`Invite the first owner: ${settings}npm run plinth -- invite you@example.com owner`)
})

/** A value as one shell word (quoted when it holds anything but safe characters). */
const shellWord = (value: string) => /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`

/**
 * The HTTP ports are checked before anything starts (the embedded PostgreSQL checks its own
 * before initdb), so a conflict costs nothing and names the variable to change.
 */
const checkPorts = Effect.fn("Cli.checkPorts")(function*(services: ReadonlyArray<"main" | "chat">) {
  const config = yield* PlinthConfig
  for (const service of services) {
    const [port, variable] = service === "main" ? [config.port, "PORT"] : [config.chatPort, "CHAT_PORT"]
    if (yield* Effect.promise(() => portTaken(config.host, port))) {
      return yield* new CliFailure({ message: `${service} service: port ${port} is already in use (set ${variable})` })
    }
  }
}, Effect.provide(PlinthConfig.layer))

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
    // Beside the start, not before it: the API is served at once, the console once it is built.
    if (services.includes("main")) yield* Effect.forkScoped(ensureConsoleBuilt)
    // One page checker for the process, whichever services it runs: its workers are the process's bound.
    const pages = Layer.succeedContext(yield* Layer.build(PageChecker.layer))
    for (const service of services) yield* Layer.build((service === "main" ? MainService : ChatService).pipe(Layer.provide(pages)))
    const base = (port: number) => `http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${port}`
    if (services.includes("main")) yield* Console.log(`Plinth main service: ${base(config.port)}`)
    if (services.includes("main")) yield* Console.log(`Plinth console: ${base(config.port)}/console/`)
    if (services.includes("chat")) yield* Console.log(`Plinth chat service: ${base(config.chatPort)}`)
    if (urls.embedded) yield* firstOwnerHint
    return yield* Effect.never
  })).pipe(Effect.provide(Base), (run) => Effect.andThen(checkPorts(services), run))

const start = Command.make("start", {}, () => runServices(["main", "chat"])).pipe(
  Command.withDescription("Run both services (on the embedded PostgreSQL unless DATABASE_URL is set)")
)

const serve = Command.make("serve", {
  service: Argument.Literals("service", ["main", "chat"]).pipe(Argument.withDescription("main or chat"))
}, ({ service }) => runServices([service])).pipe(
  Command.withDescription("Run one service (production shape: one process per service)")
)

const ROLES = ["owner", "admin", "staff", "member"] as const

/** The same rule as sys.invite_user's, checked before any database is started. */
const EMAIL = /^[^@\s]+@[^@\s]+$/

interface ExistingUser { readonly id: string; readonly role: string; readonly is_active: boolean; readonly signed_in: boolean }

/**
 * Invites `email`, or, for a user who was invited but has never signed in (the link expired), issues
 * a fresh link; anyone else is a one-line refusal that says what to do.
 */
const inviteOrReissue = Effect.fn("Cli.inviteOrReissue")(function*(email: string, role: string) {
  const sql = yield* SqlClient.SqlClient
  // Signed in = has a password or a spent link; issuing a link deletes spent ones, so a user who
  // signed in by link alone and asked for a link since gets a fresh one here, which is harmless.
  const [existing] = yield* sql<ExistingUser>`
    SELECT u.id, u.role, u.is_active,
      u.password_hash IS NOT NULL OR EXISTS (SELECT FROM sys.magic_links l WHERE l.user_id = u.id AND l.consumed_at IS NOT NULL) AS signed_in
    FROM sys.users u WHERE lower(u.email) = lower(${email})`
  if (existing === undefined) {
    const [row] = yield* sql<{ token: string }>`SELECT sys.invite_user(${email}, ${role}) AS token`
    return { token: row!.token, again: false }
  }
  if (!existing.is_active) return yield* new CliFailure({ message: `${email} has an account, and it is deactivated` })
  if (existing.signed_in) {
    return yield* new CliFailure({
      message: `${email} already has an account (${existing.role}) and has signed in; a sign-in link is sent by POST /auth/magic-link {"email": "${email}"} (the sign-in page)`
    })
  }
  if (existing.role !== role) {
    return yield* new CliFailure({
      message: `${email} was invited as ${existing.role} and has not signed in yet; invite ${email} ${existing.role} again for a fresh link`
    })
  }
  const [row] = yield* sql<{ token: string }>`SELECT sys.issue_magic_link(${existing.id}::uuid) AS token`
  return { token: row!.token, again: true }
})

/** `--tenant <name>`, optional: which tenant a command works on in multi-tenant mode. */
const tenantFlag = (which: string) => Flag.String("tenant").pipe(Flag.optional, Flag.withDescription(`multi-tenant mode: ${which}`))

const invite = Command.make("invite", {
  email: Argument.String("email").pipe(Argument.withDescription("the new user's email address")),
  role: Argument.Literals("role", ROLES).pipe(Argument.withDescription("owner, admin, staff or member")),
  tenant: tenantFlag("the tenant to invite into")
}, ({ email, role, tenant }) =>
  Effect.gen(function*() {
    const config = yield* PlinthConfig
    const adminUrl = Option.isSome(tenant) ? yield* tenantAdminUrl(tenant.value) : yield* requireUrl("admin")
    // As a database administrator: no app role is set, which is what lets the first owner in.
    const { token, again } = yield* withDatabase(adminUrl, inviteOrReissue(email, role)).pipe(
      Effect.catchIf(SqlError.isSqlError, (error) => Effect.fail(new CliFailure({ message: `cannot invite ${email}: ${describeFailure(error)}` })))
    )
    // Production output tends to end up in collected logs: the address is masked there, the link is what the operator needs.
    const who = config.isProduction ? maskEmail(email) : email
    yield* Console.log(again
      ? `${who} was invited as ${role} and has not signed in yet. A fresh sign-in link (valid 15 minutes, single use):`
      : `Invited ${who} as ${role}. Sign-in link (valid 15 minutes, single use):`)
    yield* Console.log(magicLinkUrl(config.appUrl, token, Option.getOrUndefined(tenant)))
  }).pipe(
    Effect.provide(Base),
    // Before Base: a mistyped address starts no database.
    (run) => email.length > 320 || !EMAIL.test(email)
      ? Effect.fail(new CliFailure({ message: `invalid email address: ${JSON.stringify(email.slice(0, 320))}` }))
      : run
  )).pipe(
  Command.withDescription("Invite a user as a database administrator (how the first owner gets in) and print the sign-in link; again for a user who has not signed in yet: a fresh link")
)

/** The database a `--tenant` command works on: the tenant's in multi-tenant mode (required there), else the one. */
const adminUrlFor = Effect.fn("Cli.adminUrlFor")(function*(tenant: Option.Option<string>) {
  const config = yield* PlinthConfig
  if (Option.isSome(tenant)) return yield* tenantAdminUrl(tenant.value)
  if (config.multiTenant) return yield* new CliFailure({ message: "multi-tenant mode: name the tenant with --tenant <name>" })
  return yield* requireUrl("admin")
})

const userEmail = Argument.String("email").pipe(Argument.withDescription("the user's email address"))

const when = (at: Date | null) => at === null ? "never" : `${at.toISOString().slice(0, 16).replace("T", " ")} UTC`

/** Columns padded to their widest cell, two spaces apart. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)))
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n")
}

const listUsers = (tenant: Option.Option<string>) =>
  Effect.gen(function*() {
    const users = yield* withDatabase(yield* adminUrlFor(tenant), UserAdmin.asAdministrator.list())
    if (users.length === 0) return yield* Console.log("No users yet: npm run plinth -- invite <email> owner")
    yield* Console.log(table([
      ["EMAIL", "ROLE", "STATUS", "LAST SIGN-IN", "INVITED BY"],
      ...users.map((user) => [
        user.email,
        user.role,
        user.is_active ? "active" : "deactivated",
        when(user.last_sign_in_at),
        user.invited_by_email ?? "-"
      ])
    ]))
  })

/** Applies `change` to the user of `email` as a database administrator and says what happened, in a line. */
const changeUser = (email: string, change: UserAdmin.UserChange, tenant: Option.Option<string>) =>
  Effect.gen(function*() {
    const config = yield* PlinthConfig
    const who = config.isProduction ? maskEmail(email) : email
    const { before, after } = yield* withDatabase(yield* adminUrlFor(tenant), UserAdmin.asAdministrator.update(email, change)).pipe(
      Effect.catchTags({
        UserNotFound: () => Effect.fail(new CliFailure({ message: `no user has the email address ${who}` })),
        // The database's refusal names the user and the reason.
        UserChangeRefused: (error) => Effect.fail(new CliFailure({ message: error.message })),
        UserChangeConflict: (error) => Effect.fail(new CliFailure({ message: error.message })),
        InvalidUserChange: (error) => Effect.fail(new CliFailure({ message: error.message })),
        SqlError: (error) => Effect.fail(new CliFailure({ message: `cannot change ${who}: ${describeFailure(error)}` }))
      })
    )
    if (change.is_active !== undefined) {
      if (before.is_active === after.is_active) return yield* Console.log(`${who} is already ${after.is_active ? "active" : "deactivated"}.`)
      return yield* Console.log(after.is_active
        ? `Activated ${who} (${after.role}): they can sign in again.`
        : `Deactivated ${who} (${after.role}): they can no longer sign in; tokens already issued stay valid until they expire (JWT_TTL).`)
    }
    if (before.role === after.role) return yield* Console.log(`${who} is already ${after.role}.`)
    yield* Console.log(`${who} is now ${after.role} (was ${before.role}); tokens already issued keep the old role until they expire (JWT_TTL).`)
  }).pipe(
    Effect.provide(Base),
    // Before Base: a mistyped address starts no database.
    (run) => email.length > 320 || !EMAIL.test(email)
      ? Effect.fail(new CliFailure({ message: `invalid email address: ${JSON.stringify(email.slice(0, 320))}` }))
      : run
  )

const usersTenant = tenantFlag("the tenant whose users these are")

const users = Command.make("users").pipe(
  Command.withDescription("List users, deactivate and reactivate them, change their roles (as a database administrator)"),
  Command.withSubcommands([
    Command.make("list", { tenant: usersTenant }, ({ tenant }) => listUsers(tenant).pipe(Effect.provide(Base))).pipe(
      Command.withDescription("List every user: email, role, active or deactivated, last sign-in, who invited them")
    ),
    Command.make("deactivate", { email: userEmail, tenant: usersTenant }, ({ email, tenant }) => changeUser(email, { is_active: false }, tenant)).pipe(
      Command.withDescription("Deactivate a user: no more sign-ins (tokens already issued stay valid until they expire)")
    ),
    Command.make("activate", { email: userEmail, tenant: usersTenant }, ({ email, tenant }) => changeUser(email, { is_active: true }, tenant)).pipe(
      Command.withDescription("Reactivate a deactivated user")
    ),
    Command.make("role", {
      email: userEmail,
      role: Argument.Literals("role", ROLES).pipe(Argument.withDescription("owner, admin, staff or member")),
      tenant: usersTenant
    }, ({ email, role, tenant }) => changeUser(email, { role }, tenant)).pipe(
      Command.withDescription("Give a user another role (the last active owner stays one)")
    )
  ])
)

/**
 * The superuser URL of the embedded database (for psql), read from the data directory's secrets
 * without starting anything; with URLs, DATABASE_ADMIN_URL (the operator's own).
 */
const dbUrl = Effect.gen(function*() {
  const config = yield* PlinthConfig
  if (Option.isSome(config.databaseUrl)) {
    if (Option.isNone(config.adminDatabaseUrl)) {
      return yield* new CliFailure({ message: "invalid configuration: DATABASE_ADMIN_URL: required when DATABASE_URL is set" })
    }
    return yield* Console.log(Redacted.value(config.adminDatabaseUrl.value))
  }
  const dataDir = path.resolve(config.dataDir)
  if (!existsSync(path.join(dataDir, "secrets.json"))) {
    return yield* new CliFailure({ message: `no embedded database in ${dataDir} yet: npm start creates it (or set PLINTH_DATA_DIR)` })
  }
  const secrets = yield* loadLocalSecrets(dataDir)
  const running = yield* runningServer(path.join(dataDir, "pg"))
  const port = Option.isSome(running) ? running.value.port : config.pgPort
  yield* Console.log(`postgres://postgres:${encodeURIComponent(secrets.postgres)}@127.0.0.1:${port}/${EMBEDDED_DATABASE}`)
}).pipe(Effect.provide(PlinthConfig.layer))

const db = Command.make("db").pipe(
  Command.withDescription("The database behind Plinth"),
  Command.withSubcommands([
    Command.make("url", {}, () => dbUrl).pipe(
      Command.withDescription("Print the administrator's URL of the database (the embedded one's superuser; else DATABASE_ADMIN_URL), e.g. for psql")
    )
  ])
)

/** A date or time as JavaScript reads ISO 8601 (a date alone is midnight UTC), or none. */
const parseDate = (text: string): Option.Option<Date> => {
  const date = new Date(text)
  return /^\d{4}-\d{2}-\d{2}/.test(text) && !Number.isNaN(date.getTime()) ? Option.some(date) : Option.none()
}

const audit = Command.make("audit").pipe(
  Command.withDescription("The audit trail: events are kept until pruned"),
  Command.withSubcommands([
    Command.make("prune", {
      before: Flag.String("before").pipe(Flag.withDescription("an ISO 8601 date or time (2026-01-01, 2026-01-01T12:00:00Z): events older than it are deleted")),
      tenant: tenantFlag("the tenant whose audit trail to prune")
    }, ({ before, tenant }) =>
      // Before Base: a mistyped date starts no database.
      Option.match(parseDate(before), {
        onNone: () => Effect.fail(new CliFailure({ message: `invalid date: ${JSON.stringify(before.slice(0, 64))} (use 2026-01-01 or 2026-01-01T12:00:00Z)` })),
        onSome: (date) =>
          Effect.gen(function*() {
            const adminUrl = Option.isSome(tenant) ? yield* tenantAdminUrl(tenant.value) : yield* requireUrl("admin")
            // As a database administrator: no app role may delete events.
            const deleted = yield* withDatabase(adminUrl, pruneAuditEvents(date)).pipe(
              Effect.catchIf(SqlError.isSqlError, (error) => Effect.fail(new CliFailure({ message: `cannot prune the audit trail: ${describeFailure(error)}` })))
            )
            yield* Console.log(`Deleted ${deleted} audit ${deleted === 1 ? "event" : "events"} older than ${date.toISOString()}.`)
          }).pipe(Effect.provide(Base))
      })).pipe(
      Command.withDescription("Delete the audit events older than --before, as a database administrator, and print how many")
    )
  ])
)

/** A definition file larger than this is refused before it is read (pages are at most 1 MB each). */
const MAX_DEFINITION_BYTES = 64 * 1024 * 1024

const cannotRead = (file: string) => (error: unknown) =>
  new CliFailure({ message: `cannot read ${file}: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}` })

/** The definition in `file`, decoded; each way it can be wrong is one line naming the file. */
const readDefinition = (file: string) =>
  Effect.tryPromise({ try: () => stat(file), catch: cannotRead(file) }).pipe(
    Effect.filterOrFail(
      (info) => info.size <= MAX_DEFINITION_BYTES,
      () => new CliFailure({ message: `cannot read ${file}: larger than ${MAX_DEFINITION_BYTES / 1024 / 1024} MiB` })
    ),
    Effect.andThen(Effect.tryPromise({ try: () => readFile(file, "utf8"), catch: cannotRead(file) })),
    Effect.flatMap((text) =>
      Effect.try({
        try: (): unknown => JSON.parse(text),
        catch: () => new CliFailure({ message: `${file} is not JSON (an app definition is what plinth app export prints)` })
      })
    ),
    Effect.flatMap(AppDefinition.decode),
    Effect.mapError((error) => error._tag === "InvalidAppDefinition" ? new CliFailure({ message: `invalid app definition ${file}: ${error.message}` }) : error)
  )

const app = Command.make("app").pipe(
  Command.withDescription("App definitions: an app schema's tables, views, permissions and pages as JSON (no rows)"),
  Command.withSubcommands([
    Command.make("export", {
      schema: Argument.String("schema").pipe(Argument.withDescription("the app's schema name, or public")),
      tenant: tenantFlag("the tenant whose app this is")
    }, ({ schema, tenant }) =>
      Effect.gen(function*() {
        const definition = yield* withDatabase(yield* adminUrlFor(tenant), AppDefinition.exportApp(schema)).pipe(
          Effect.catchTags({
            AppNotFound: () => Effect.fail(new CliFailure({ message: `no app ${schema} (plinth app export <schema>: an app's schema name, or public)` })),
            InvalidAppDefinition: (error) => Effect.fail(new CliFailure({ message: `cannot export ${schema}: ${error.message}` })),
            SqlError: (error) => Effect.fail(new CliFailure({ message: `cannot export ${schema}: ${describeFailure(error)}` }))
          })
        )
        yield* Console.log(JSON.stringify(definition, null, 2))
      }).pipe(Effect.provide(Base))).pipe(
      Command.withDescription("Print the JSON definition of an app schema (or public): tables, column specs, views, permissions, pages, home pages")
    ),
    Command.make("import", {
      file: Argument.String("file").pipe(Argument.withDescription("a JSON app definition, as plinth app export prints it")),
      as: Flag.String("as").pipe(Flag.optional, Flag.withDescription("the schema to create (default: the definition's own)")),
      tenant: tenantFlag("the tenant to import into")
    }, ({ as, file, tenant }) =>
      // Before Base: a broken file starts no database.
      Effect.flatMap(readDefinition(file), (definition) =>
        Effect.gen(function*() {
          const target = Option.getOrElse(as, () => definition.schema)
          const result = yield* withDatabase(yield* adminUrlFor(tenant), AppDefinition.importApp(definition, target)).pipe(
            Effect.catchTags({
              AppImportRefused: (error) => Effect.fail(new CliFailure({ message: `cannot import ${file} as ${target}: ${error.message}` })),
              SqlError: (error) => Effect.fail(new CliFailure({ message: `cannot import ${file} as ${target}: ${describeFailure(error)}` }))
            })
          )
          const count = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`
          yield* Console.log(`Imported ${file} as ${result.schema}: ${count(result.tables, "table")}, ${count(result.views, "view")}, ${count(result.pages, "page")}.`)
        }).pipe(Effect.provide(Base)))).pipe(
      Command.withDescription("Create an app (or public's tables) from a JSON definition, in one transaction; refused when the app exists")
    )
  ])
)

const tenantName = Argument.String("name").pipe(Argument.withDescription("a-z, 0-9 and _, starting with a letter"))

const clusterName = Argument.String("name").pipe(Argument.withDescription("a-z, 0-9 and _, starting with a letter"))

const tenant = Command.make("tenant").pipe(
  Command.withDescription("Multi-tenant mode: create, list, migrate and move tenants"),
  Command.withSubcommands([
    Command.make("create", {
      name: tenantName,
      cluster: Flag.String("cluster").pipe(Flag.optional, Flag.withDescription("the cluster to create it on (default: the active cluster with the fewest tenants that has room)"))
    }, ({ cluster, name }) =>
      Effect.gen(function*() {
        const created = yield* createTenant(name, cluster)
        yield* Console.log(`Tenant ${name} is ready on cluster ${created.cluster} (${created.applied.length} migrations applied).`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Create (and migrate) a tenant's database on a cluster and register it")),
    Command.make("list", {}, () =>
      Effect.gen(function*() {
        for (const row of yield* listTenants()) {
          const moving = row.moving_to === null ? "" : ` (moving to ${row.moving_to})`
          const previous = row.previous_cluster === null ? "" : ` (old copy on ${row.previous_cluster})`
          yield* Console.log(`${row.name}\t${row.created_at}\t${row.cluster}\t${row.state}${moving}${previous}`)
        }
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("List the registered tenants: name, created, cluster, state")),
    Command.make("move", {
      name: tenantName,
      to: Flag.String("to").pipe(Flag.withDescription("the cluster to move it to"))
    }, ({ name, to }) =>
      Effect.gen(function*() {
        const moved = yield* moveTenant(name, to)
        yield* Console.log(`Moved ${name} from ${moved.from} to ${moved.to} (epoch ${moved.epoch}; fenced ${moved.fenceMillis} ms; source applied to ${moved.lsn}).`)
        yield* Console.log(`Its old database stays on ${moved.from}, read-only, until: plinth tenant cleanup ${name}`)
      }).pipe(Effect.provide(Base))).pipe(
      Command.withDescription("Move a tenant's database to another cluster with logical replication (writes refused for about a second; undone on failure)")
    ),
    Command.make("cleanup", { name: tenantName }, ({ name }) =>
      Effect.gen(function*() {
        const done = yield* cleanupTenant(name)
        if (Option.isSome(done.undone)) yield* Console.log(`Undid the interrupted move of ${name} to ${done.undone.value}: it stays on its cluster.`)
        if (Option.isSome(done.dropped)) yield* Console.log(`Dropped the old database of ${name} on ${done.dropped.value}.`)
        if (Option.isNone(done.undone) && Option.isNone(done.dropped)) yield* Console.log(`${name} has nothing to clean up.`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Drop the old database a move left on the tenant's previous cluster; undo a move whose process was killed")),
    Command.make("migrate", {}, () =>
      Effect.gen(function*() {
        for (const result of yield* migrateTenants()) {
          yield* Console.log(`${result.name}: ${result.applied.length > 0 ? result.applied.join(", ") : "up to date"}`)
        }
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Apply pending migrations to every tenant"))
  ])
)

const cluster = Command.make("cluster").pipe(
  Command.withDescription("Multi-tenant mode: the PostgreSQL clusters tenants are placed on"),
  Command.withSubcommands([
    Command.make("add", {
      name: clusterName,
      adminUrl: Flag.String("admin-url").pipe(Flag.withDescription("postgres://superuser:…@host:port/{tenant}: creates, migrates and moves databases")),
      url: Flag.String("url").pipe(Flag.withDescription("postgres://authenticator:…@host:port/{tenant}: the main service")),
      chatUrl: Flag.String("chat-url").pipe(Flag.withDescription("postgres://chat_authenticator:…@host:port/{tenant}: the chat service")),
      maxDatabases: Flag.Int("max-databases").pipe(Flag.optional, Flag.withDescription("at most this many tenant databases (default: no cap)"))
    }, ({ adminUrl, chatUrl, maxDatabases, name, url }) =>
      Effect.gen(function*() {
        yield* addCluster({ name, adminUrl, url, chatUrl, maxDatabases })
        yield* Console.log(`Cluster ${name} is ready: Plinth's roles and grants are there; new tenants may be placed on it.`)
      }).pipe(Effect.provide(Base))).pipe(
      Command.withDescription("Register a cluster: creates Plinth's roles and grants there (database plinth) and checks the login roles")
    ),
    Command.make("list", {}, () =>
      Effect.gen(function*() {
        const loads = yield* listClusters()
        yield* Console.log(table([
          ["NAME", "STATE", "TENANTS", "CAP", "CONNECTIONS"],
          ...loads.map((load) => [
            load.name,
            load.state,
            String(load.databases),
            load.maxDatabases === null ? "-" : String(load.maxDatabases),
            load.connections === undefined ? "unreachable" : `${load.connections.used}/${load.connections.max}`
          ])
        ]))
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("List the clusters: state, tenant databases, cap, connections open")),
    Command.make("drain", { name: clusterName }, ({ name }) =>
      Effect.gen(function*() {
        yield* setClusterState(name, "draining")
        yield* Console.log(`Cluster ${name} is draining: no new tenants go there; move its tenants with plinth tenant move <name> --to <cluster>.`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Place no new tenants on a cluster")),
    Command.make("activate", { name: clusterName }, ({ name }) =>
      Effect.gen(function*() {
        yield* setClusterState(name, "active")
        yield* Console.log(`Cluster ${name} is active: new tenants may be placed on it.`)
      }).pipe(Effect.provide(Base))).pipe(Command.withDescription("Place new tenants on a drained cluster again"))
  ])
)

const migrate = Command.make("migrate", {}, () => applyMigrations.pipe(Effect.provide(Base))).pipe(
  Command.withDescription("Apply pending migrations with DATABASE_ADMIN_URL (or the embedded database)")
)

export const plinth = Command.make("plinth").pipe(
  Command.withDescription("Plinth: a backend for data-driven business applications on PostgreSQL"),
  Command.withSubcommands([start, serve, migrate, invite, users, db, audit, app, tenant, cluster])
)

/** A mistyped command line is its error and the command's one-line usage, not the whole help. */
const presenter: CliOutput.Presenter = {
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Console.error([
        ...event.errors.map((error) => `plinth: ${error.message.split("\n")[0]}`),
        `usage: ${event.helpDoc.usage} (see ${event.commandPath.join(" ")} --help)`
      ].join("\n"))
      : CliOutput.defaultPresenter.present(event)
}

/** Failures that reach the top are one line for the operator; anything else is a bug and shows its trace. */
const reportFailure = (cause: Cause.Cause<unknown>) => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.void
  const error = Cause.squash(cause)
  // Its message was presented already (or it was a plain request for help).
  if (CliError.isCliError(error) && error._tag === "ShowHelp") return Effect.void
  if (SqlError.isSqlError(error)) return Console.error(`plinth: ${describeFailure(error)}`)
  const known = Cause.hasFails(cause) && typeof (error as { message?: unknown }).message === "string"
  return Console.error(known ? `plinth: ${(error as { message: string }).message}` : `plinth: unexpected failure\n${Cause.pretty(cause)}`)
}

/**
 * A Plinth whose parent is gone (npm killed, its shell gone) or whose terminal closed (SIGHUP) stops
 * as if signalled: nobody is left to stop it, and it would keep its ports and the embedded PostgreSQL.
 */
const stopWithParent = () => {
  process.on("SIGHUP", () => process.kill(process.pid, "SIGTERM"))
  const parent = process.ppid
  const watch = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(watch)
    process.kill(process.pid, "SIGTERM")
  }, 500).unref()
}

if (import.meta.main) {
  stopWithParent()
  plinth.pipe(
    Command.run({ version: "0.1.0" }),
    Effect.tapCause(reportFailure),
    Effect.provide(CliOutput.layerPresenter(presenter)),
    Effect.provide(NodeServices.layer),
    NodeRuntime.runMain({
      disableErrorReporting: true,
      // A signal is the normal way to stop a server: that is a clean exit.
      teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
    })
  )
}
