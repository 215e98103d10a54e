/**
 * What `plinth cluster add|list|drain|activate` do, as a database administrator, and what tenant
 * placement asks of the clusters (issue #27). The registry of clusters is plinth.clusters in the
 * control database; the control cluster is the cluster `default`, whose URLs are the configured
 * ones (DATABASE_ADMIN_URL, TENANT_*_DATABASE_URL or the templates derived from them).
 */
import { Effect, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { describeFailure } from "../services/DatabaseError.ts"
import { type ClusterLoad, place, refusal } from "../services/Placement.ts"
import { PlinthConfig } from "../services/PlinthConfig.ts"
import { deriveTenantTemplate, TENANT_NAME, tenantUrl } from "../services/TenantName.ts"
import { EMBEDDED_DATABASE, ensureDatabase, migrateDatabase, requireUrl, setLoginPasswords, withDatabase } from "./Database.ts"

export class ClusterRefused extends Schema.TaggedError<ClusterRefused>()("ClusterRefused", { message: Schema.String }) {}

export const DEFAULT_CLUSTER = "default"

export interface ClusterRow {
  readonly name: string
  readonly admin_url_template: string | null
  readonly url_template: string | null
  readonly chat_url_template: string | null
  readonly state: "active" | "draining"
  readonly max_databases: number | null
}

/** Runs `effect` on the control database as its administrator. */
export const onControl = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flatMap(requireUrl("admin"), (url) => withDatabase(url, effect))

const clusterRows = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<ClusterRow & { readonly databases: number }>`
    SELECT c.name, c.admin_url_template, c.url_template, c.chat_url_template, c.state, c.max_databases,
      (SELECT count(*)::int FROM plinth.tenants t WHERE c.name IN (t.cluster, t.moving_to, t.previous_cluster)) AS databases
    FROM plinth.clusters c ORDER BY c.name`
})

/** The cluster named `name`, or a refusal naming it. */
export const readCluster = Effect.fn("Clusters.read")(function*(name: string) {
  const rows = yield* onControl(clusterRows)
  const row = rows.find((cluster) => cluster.name === name)
  if (row === undefined) return yield* new ClusterRefused({ message: `no cluster ${JSON.stringify(name)} (plinth cluster list)` })
  return row
})

/** The administrator's template of a cluster's databases (`{tenant}` in place of the name). */
export const adminTemplateOf = Effect.fn("Clusters.adminTemplate")(function*(cluster: ClusterRow) {
  if (cluster.admin_url_template !== null) return cluster.admin_url_template
  const config = yield* PlinthConfig
  return Option.isSome(config.tenantAdminDatabaseUrl)
    ? Redacted.value(config.tenantAdminDatabaseUrl.value)
    : deriveTenantTemplate(yield* requireUrl("admin"))
})

/**
 * A database of the cluster to work on the cluster itself from (create a database, end sessions,
 * replication slots): the control database on the control cluster, `postgres` elsewhere.
 */
export const serverUrlOf = Effect.fn("Clusters.serverUrl")(function*(cluster: ClusterRow) {
  if (cluster.name === DEFAULT_CLUSTER) return yield* requireUrl("admin")
  return tenantUrl(yield* adminTemplateOf(cluster), "postgres")
})

/** The cluster's connection budget now; absent when it does not answer. */
const connectionsOf = (cluster: ClusterRow) =>
  Effect.flatMap(serverUrlOf(cluster), (url) =>
    withDatabase(url, Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ max: number; used: number }>`SELECT current_setting('max_connections')::int AS max,
        (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') AS used`))
  ).pipe(
    Effect.timeout("5 seconds"),
    Effect.map((rows) => rows[0]),
    Effect.catchCause((cause) => Effect.as(Effect.logWarning(`cluster ${cluster.name} does not answer`, cause), undefined))
  )

/** Each cluster with its tenant databases and its connections now. */
export const clusterLoads = Effect.fn("Clusters.loads")(function*() {
  const rows = yield* onControl(clusterRows)
  return yield* Effect.forEach(rows, (row) =>
    Effect.map(connectionsOf(row), (connections): ClusterLoad & { readonly row: ClusterRow } => ({
      row,
      name: row.name,
      state: row.state,
      maxDatabases: row.max_databases,
      databases: row.databases,
      ...(connections === undefined ? {} : { connections })
    })), { concurrency: 4 })
})

/** The cluster a new tenant goes to: `requested`, if it can take one, else the placement's choice. */
export const chooseCluster = Effect.fn("Clusters.choose")(function*(tenant: string, requested: Option.Option<string>) {
  const config = yield* PlinthConfig
  const loads = yield* clusterLoads()
  if (Option.isSome(requested)) {
    const load = loads.find((cluster) => cluster.name === requested.value)
    if (load === undefined) return yield* new ClusterRefused({ message: `no cluster ${JSON.stringify(requested.value)} (plinth cluster list)` })
    const reason = refusal(load, config.clusterConnectionReserve)
    if (reason !== undefined) return yield* new ClusterRefused({ message: `cannot place tenant ${tenant} on ${reason}` })
    return load.row
  }
  const placed = place(loads, config.clusterConnectionReserve)
  if (placed._tag === "Full") {
    return yield* new ClusterRefused({
      message: `no cluster can take tenant ${tenant}: ${placed.reasons.join("; ")}; add one (plinth cluster add) or raise a cap`
    })
  }
  return loads.find((cluster) => cluster.name === placed.cluster)!.row
})

export const listClusters = Effect.fn("Clusters.list")(function*() {
  return yield* clusterLoads()
})

const URL_TEMPLATE = /^postgres(ql)?:\/\/.*\{tenant\}/

/** The password in a runtime template, for the login role it names. */
const passwordOf = (template: string) => decodeURIComponent(new URL(tenantUrl(template, "plinth")).password)

export interface NewCluster {
  readonly name: string
  readonly adminUrl: string
  readonly url: string
  readonly chatUrl: string
  readonly maxDatabases: Option.Option<number>
}

/**
 * Registers a cluster, after giving it what Plinth needs there: its database `plinth`, migrated as
 * the control database is (that is what creates the cluster-wide roles and their grants and
 * settings), the login roles' passwords of its runtime templates, and a check that each login works.
 */
export const addCluster = Effect.fn("Clusters.add")(function*(cluster: NewCluster) {
  if (!TENANT_NAME.test(cluster.name) || cluster.name === DEFAULT_CLUSTER) {
    return yield* new ClusterRefused({ message: `invalid cluster name ${JSON.stringify(cluster.name)}: a-z, 0-9 and _, starting with a letter; not default` })
  }
  for (const [flag, template] of [["--admin-url", cluster.adminUrl], ["--url", cluster.url], ["--chat-url", cluster.chatUrl]] as const) {
    if (!URL_TEMPLATE.test(template) || !URL.canParse(tenantUrl(template, "plinth"))) {
      return yield* new ClusterRefused({ message: `${flag}: a postgres:// URL with {tenant} in place of the database name` })
    }
  }
  if ((yield* onControl(clusterRows)).some((row) => row.name === cluster.name)) {
    return yield* new ClusterRefused({ message: `cluster ${cluster.name} exists already` })
  }
  yield* ensureDatabase(tenantUrl(cluster.adminUrl, "postgres"), EMBEDDED_DATABASE)
  const plinthUrl = tenantUrl(cluster.adminUrl, EMBEDDED_DATABASE)
  yield* migrateDatabase(plinthUrl)
  yield* setLoginPasswords(plinthUrl, { authenticator: passwordOf(cluster.url), chat_authenticator: passwordOf(cluster.chatUrl) })
  for (const template of [cluster.url, cluster.chatUrl]) {
    yield* withDatabase(tenantUrl(template, EMBEDDED_DATABASE), Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`)).pipe(
      Effect.mapError((error) => new ClusterRefused({ message: `cannot sign in with ${new URL(tenantUrl(template, "x")).username}: ${describeFailure(error)}` }))
    )
  }
  yield* onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO plinth.clusters (name, admin_url_template, url_template, chat_url_template, max_databases)
      VALUES (${cluster.name}, ${cluster.adminUrl}, ${cluster.url}, ${cluster.chatUrl}, ${Option.getOrNull(cluster.maxDatabases)})`))
})

/** `draining`: no new tenants go there (its tenants stay until moved); `active`: they may again. */
export const setClusterState = Effect.fn("Clusters.setState")(function*(name: string, state: "active" | "draining") {
  const rows = yield* onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ name: string }>`UPDATE plinth.clusters SET state = ${state} WHERE name = ${name} RETURNING name`))
  if (rows.length === 0) return yield* new ClusterRefused({ message: `no cluster ${JSON.stringify(name)} (plinth cluster list)` })
})
