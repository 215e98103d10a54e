/**
 * `plinth tenant move <name> --to <cluster>` and `plinth tenant cleanup <name>` (issue #27): a
 * tenant's database moved to another cluster with PostgreSQL's logical replication, without
 * losing a row.
 *
 * The target's schema is built from what Plinth knows (the migrations, then each app's definition
 * imported through the management functions, as an owner's calls made it); its rows are then
 * emptied, and a subscription to a publication of every table of the source copies them and
 * follows the source's changes. Once the copy has caught up, a short fence: the tenant is marked
 * `moving` (replicas answer it 503 with Retry-After), its database stops taking connections and
 * its sessions are ended, a mark is committed there last and awaited on the target (every earlier
 * commit has then been applied), sequences are set to the source's values, the subscription goes,
 * and the registry is flipped (cluster, epoch + 1, NOTIFY). The source is kept, read-only and
 * closed to the services, until `plinth tenant cleanup` drops it.
 *
 * A failure or interruption before the flip undoes every step (the tenant stays on its source,
 * open again, with nothing lost); after the flip the tenant is served from the target, and only
 * the tidying that remains is left for cleanup.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Exit, Layer, Option, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import * as AppDefinition from "../services/AppDefinition.ts"
import { describeFailure } from "../services/DatabaseError.ts"
import { quoteIdentifier } from "../services/SqlIdentifier.ts"
import { tenantUrl } from "../services/TenantName.ts"
import { adminTemplateOf, chooseCluster, type ClusterRow, onControl, readCluster, serverUrlOf } from "./Clusters.ts"
import { ensureDatabase, migrateDatabase, requireUrl, withDatabase } from "./Database.ts"
import { readTenant } from "./TenantAdmin.ts"

export class MoveRefused extends Schema.TaggedError<MoveRefused>()("MoveRefused", { message: Schema.String }) {}

/** The steps of a move, in order; `flip` is where the registry changes (its hook runs before it). */
export type MoveStep = "schema" | "subscribe" | "catch-up" | "fence" | "apply" | "sequences" | "flip" | "finish"

export interface MoveOptions {
  /** Runs before each step; a failure there aborts the move (tests abort at chosen steps). */
  readonly beforeStep?: (step: MoveStep) => Effect.Effect<void, MoveRefused>
  /** How long the initial copy may take. */
  readonly catchUpTimeout?: Duration.Duration
}

export interface MoveResult {
  readonly from: string
  readonly to: string
  readonly epoch: number
  /** From the `moving` mark to the flip. */
  readonly fenceMillis: number
  /** The source's WAL position the target applied before the flip. */
  readonly lsn: string
}

const PUBLICATION = "plinth_move"
/** Names the advisory locks of moves (with the tenant's name's hash); any constant of Plinth's own. */
const MOVE_LOCK = 7_270_027
/** The subscription's (and its slot's) name: slots are cluster-wide, so it names the tenant. */
const subscriptionOf = (tenant: string) => `plinth_move_${tenant}`.slice(0, 63)
/** The fence waits this long for the mark to reach the target before giving up (and undoing). */
const APPLY_TIMEOUT = Duration.seconds(30)
const POLL = Duration.millis(20)

const refused = (what: string) => (error: unknown) => new MoveRefused({ message: `${what}: ${describeFailure(error)}` })

/** Runs `run` against `url` with a SqlClient. */
const on = <A, E>(url: string, run: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  withDatabase(url, Effect.flatMap(SqlClient.SqlClient, run))

/** Polls `probe` until it holds, at most `timeout`; false when it never did. */
const until = <E>(probe: Effect.Effect<boolean, E>, timeout: Duration.Duration) =>
  Effect.gen(function*() {
    const deadline = Date.now() + Duration.toMillis(timeout)
    while (Date.now() < deadline) {
      if (yield* probe) return true
      yield* Effect.sleep(POLL)
    }
    return yield* probe
  })

/** Every table of a tenant's database (what a publication FOR ALL TABLES carries). */
const tablesOf = (sql: SqlClient.SqlClient) =>
  sql<{ schema: string; name: string }>`
    SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND c.relpersistence = 'p' AND NOT c.relispartition
      AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
    ORDER BY 1, 2`

const qualified = (table: { readonly schema: string; readonly name: string }) => `${quoteIdentifier(table.schema)}.${quoteIdentifier(table.name)}`

/** A connection string as an SQL literal (CREATE SUBSCRIPTION takes no parameters). */
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`

/** Where a move goes from and to. */
interface Sides {
  readonly source: ClusterRow
  readonly target: ClusterRow
  readonly sourceUrl: string
  readonly sourceServer: string
  readonly targetUrl: string
  readonly targetServer: string
  readonly subscription: string
}

const sidesOf = Effect.fn("TenantMove.sides")(function*(name: string, source: ClusterRow, target: ClusterRow) {
  return {
    source,
    target,
    sourceUrl: tenantUrl(yield* adminTemplateOf(source), name),
    sourceServer: yield* serverUrlOf(source),
    targetUrl: tenantUrl(yield* adminTemplateOf(target), name),
    targetServer: yield* serverUrlOf(target),
    subscription: subscriptionOf(name)
  } satisfies Sides
})

const databaseExists = (serverUrl: string, name: string) =>
  Effect.map(on(serverUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_database WHERE datname = ${name}`), (rows) => rows[0]!.n > 0)

/** The subscription goes, detached from its slot first: dropping it then needs no connection to the (fenced) source. */
const dropSubscription = (name: string, sides: Sides) =>
  Effect.gen(function*() {
    if (!(yield* databaseExists(sides.targetServer, name))) return
    yield* on(sides.targetUrl, (sql) =>
      Effect.gen(function*() {
        const [found] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_subscription WHERE subname = ${sides.subscription}`
        if (found!.n === 0) return
        yield* sql.unsafe(`ALTER SUBSCRIPTION ${quoteIdentifier(sides.subscription)} DISABLE`).unprepared
        yield* sql.unsafe(`ALTER SUBSCRIPTION ${quoteIdentifier(sides.subscription)} SET (slot_name = NONE)`).unprepared
        yield* sql.unsafe(`DROP SUBSCRIPTION ${quoteIdentifier(sides.subscription)}`).unprepared
      }))
  })

/** The slot is free once the disabled subscription's sender has gone, which takes a moment. */
const dropSlot = (sides: Sides) =>
  on(sides.sourceServer, (sql) =>
    until(
      Effect.gen(function*() {
        const [slot] = yield* sql<{ active: boolean }>`SELECT active FROM pg_replication_slots WHERE slot_name = ${sides.subscription}`
        if (slot === undefined) return true
        if (!slot.active) yield* sql`SELECT pg_drop_replication_slot(${sides.subscription})`
        return false
      }).pipe(Effect.orElseSucceed(() => false)),
      Duration.seconds(10)
    ))

/**
 * Undoes a move that has not flipped, whatever it had reached (each part is safe to run again, and
 * runs on its own, so one failing leaves the rest done): the tenant stays on its source, open.
 */
const undoMove = (name: string, sides: Sides) =>
  Effect.gen(function*() {
    const attempt = <R>(what: string, effect: Effect.Effect<unknown, unknown, R>) =>
      effect.pipe(Effect.catchCause((cause) => Effect.logWarning(`undoing the move of ${name}: ${what} failed`, cause)))
    yield* attempt("dropping the subscription", dropSubscription(name, sides))
    yield* attempt("opening the source again", on(sides.sourceServer, (sql) => sql.unsafe(`ALTER DATABASE ${quoteIdentifier(name)} ALLOW_CONNECTIONS true`).unprepared))
    yield* attempt("marking the tenant active", onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`UPDATE plinth.tenants SET state = 'active', moving_to = NULL WHERE name = ${name} AND cluster = ${sides.source.name}`)))
    yield* attempt("dropping the replication slot", dropSlot(sides))
    yield* attempt("dropping the publication", on(sides.sourceUrl, (sql) => sql.unsafe(`DROP PUBLICATION IF EXISTS ${PUBLICATION}`).unprepared))
    yield* attempt("dropping the target's database", on(sides.targetServer, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`).unprepared))
    yield* Effect.logWarning(`the move of ${name} was undone: it stays on cluster ${sides.source.name}`)
  })

/** Held by a move (and by cleanup) for the tenant, on a control connection of its own: one at a time. */
const holdMoveLock = (name: string) =>
  Effect.gen(function*() {
    const control = Context.get(yield* Layer.build(PgClient.layer({ url: Redacted.make(yield* requireUrl("admin")), maxConnections: 1 })), SqlClient.SqlClient)
    const [lock] = yield* control<{ held: boolean }>`SELECT pg_try_advisory_lock(${MOVE_LOCK}, hashtext(${name})) AS held`
    if (!lock!.held) return yield* new MoveRefused({ message: `a move of ${name} is running` })
  })

/** Moves tenant `name` to cluster `to`; see the module's comment. */
export const moveTenant = Effect.fn("TenantMove.move")(function*(name: string, to: string, options: MoveOptions = {}) {
  let current: MoveStep | "checks" = "checks"
  const step = (which: MoveStep) =>
    Effect.suspend(() => {
      current = which
      return options.beforeStep?.(which) ?? Effect.void
    })
  yield* holdMoveLock(name)
  const tenant = yield* readTenant(name)
  if (Option.isNone(tenant)) return yield* new MoveRefused({ message: `no tenant ${JSON.stringify(name)} (plinth tenant list)` })
  if (tenant.value.state !== "active" || tenant.value.moving_to !== null) {
    return yield* new MoveRefused({ message: `tenant ${name} has a move that did not finish: plinth tenant cleanup ${name} undoes it` })
  }
  if (tenant.value.previous_cluster !== null) {
    return yield* new MoveRefused({
      message: `tenant ${name} still has its old database on cluster ${tenant.value.previous_cluster}: plinth tenant cleanup ${name} first`
    })
  }
  const source = yield* readCluster(tenant.value.cluster)
  if (source.name === to) return yield* new MoveRefused({ message: `tenant ${name} is on cluster ${to} already` })
  const target: ClusterRow = yield* chooseCluster(name, Option.some(to)).pipe(
    Effect.mapError((error) => new MoveRefused({ message: error.message }))
  )
  const sides = yield* sidesOf(name, source, target)
  const { sourceServer, sourceUrl, subscription, targetServer, targetUrl } = sides

  // What logical replication cannot carry, and what it needs, refused before anything is made.
  const [level] = yield* on(sourceServer, (sql) => sql<{ wal_level: string }>`SELECT current_setting('wal_level') AS wal_level`)
  if (level!.wal_level !== "logical") {
    return yield* new MoveRefused({
      message: `cluster ${source.name} runs with wal_level=${level!.wal_level}; a move needs wal_level=logical (set it and restart that PostgreSQL; the embedded one gets it when Plinth starts it again)`
    })
  }
  const [objects] = yield* on(sourceUrl, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_largeobject_metadata`)
  if (objects!.n > 0) {
    return yield* new MoveRefused({ message: `tenant ${name} has ${objects!.n} large objects, which logical replication does not carry; nothing was moved` })
  }
  if (yield* databaseExists(targetServer, name)) {
    return yield* new MoveRefused({ message: `cluster ${target.name} has a database ${name} already; drop it or move elsewhere` })
  }
  // Recorded before anything is made: a move whose process is killed is undone by cleanup.
  yield* onControl(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE plinth.tenants SET moving_to = ${target.name} WHERE name = ${name}`))
  let flipped = false

  const run = Effect.gen(function*() {
    yield* step("schema")
    yield* ensureDatabase(targetServer, name)
    yield* migrateDatabase(targetUrl)
    const apps = yield* on(sourceUrl, (sql) => sql<{ schema_name: string }>`SELECT schema_name FROM sys.apps ORDER BY created_at, schema_name`)
    for (const schema of ["public", ...apps.map((app) => app.schema_name)]) {
      const definition = yield* withDatabase(sourceUrl, AppDefinition.exportApp(schema)).pipe(Effect.mapError(refused(`exporting ${schema}`)))
      yield* withDatabase(targetUrl, AppDefinition.importApp(definition, schema)).pipe(Effect.mapError(refused(`importing ${schema}`)))
    }
    // Every table must exist on both sides; then the target's rows go (the copy brings the source's).
    const sourceTables = yield* on(sourceUrl, tablesOf)
    const targetTables = yield* on(targetUrl, tablesOf)
    const missing = sourceTables.filter((table) => !targetTables.some((other) => other.schema === table.schema && other.name === table.name))
    if (missing.length > 0) {
      return yield* new MoveRefused({ message: `tables Plinth did not make cannot be moved: ${missing.map(qualified).join(", ")}` })
    }
    // As a replica applies changes: the append-only audit trail's triggers keep out callers, not this.
    yield* on(targetUrl, (sql) =>
      sql.withTransaction(Effect.andThen(
        sql`SELECT set_config('session_replication_role', 'replica', true)`,
        sql.unsafe(`TRUNCATE ${targetTables.map(qualified).join(", ")} CASCADE`).unprepared
      )))

    yield* step("subscribe")
    yield* on(sourceUrl, (sql) =>
      Effect.gen(function*() {
        // Updates and deletes of a table without a key would be refused on the source once it is published.
        const keyless = yield* sql<{ schema: string; name: string }>`
          SELECT n.nspname AS schema, c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind = 'r' AND c.relreplident = 'd' AND c.relpersistence = 'p'
            AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
            AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')`
        for (const table of keyless) yield* sql.unsafe(`ALTER TABLE ${qualified(table)} REPLICA IDENTITY FULL`).unprepared
        yield* sql.unsafe(`DROP PUBLICATION IF EXISTS ${PUBLICATION}`).unprepared
        yield* sql.unsafe(`CREATE PUBLICATION ${PUBLICATION} FOR ALL TABLES`).unprepared
      }))
    yield* on(targetUrl, (sql) =>
      sql.unsafe(`CREATE SUBSCRIPTION ${quoteIdentifier(subscription)} CONNECTION ${literal(sourceUrl)} PUBLICATION ${PUBLICATION}
        WITH (slot_name = ${literal(subscription)}, copy_data = true)`).unprepared)

    yield* step("catch-up")
    const copied = yield* on(targetUrl, (sql) =>
      until(
        Effect.map(sql<{ waiting: number }>`SELECT count(*)::int AS waiting FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
          WHERE s.subname = ${subscription} AND r.srsubstate <> 'r'`, (rows) => rows[0]!.waiting === 0),
        options.catchUpTimeout ?? Duration.minutes(30)
      ))
    if (!copied) return yield* new MoveRefused({ message: `the copy of ${name} did not finish in time` })

    // The fence, on connections opened before it: the source's is the one left open there, and no
    // step waits for a connection to be made.
    return yield* Effect.scoped(Effect.gen(function*() {
      const open = (url: string) =>
        Effect.map(
          Layer.build(PgClient.layer({ url: Redacted.make(url), maxConnections: 1, idleTimeout: Duration.minutes(10) })),
          (context) => Context.get(context, SqlClient.SqlClient)
        )
      const held = yield* open(sourceUrl)
      const onTarget = yield* open(targetUrl)
      const onSourceServer = yield* open(sourceServer)
      const onRegistry = yield* open(yield* requireUrl("admin"))
      yield* Effect.all([held`SELECT 1`, onTarget`SELECT 1`, onSourceServer`SELECT 1`, onRegistry`SELECT 1`], { concurrency: 4, discard: true })
      yield* step("fence")
      const fencedAt = Date.now()
      yield* onRegistry`UPDATE plinth.tenants SET state = 'moving' WHERE name = ${name}`
      // From another database of the cluster: a session may not close its own database.
      yield* onSourceServer.unsafe(`ALTER DATABASE ${quoteIdentifier(name)} ALLOW_CONNECTIONS false`).unprepared
      // Ended sessions roll back what they had not committed: nothing commits there after this.
      // OFFSET 0 keeps the subquery whole: its own session is left out before any is ended.
      const ended = yield* until(
        Effect.map(held<{ left: number }>`SELECT count(*)::int AS left FROM (
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid() OFFSET 0
          ) others WHERE pg_terminate_backend(pid) IS NOT NULL`, (rows) => rows[0]!.left === 0),
        Duration.seconds(10)
      )
      if (!ended) return yield* new MoveRefused({ message: `the sessions of ${name} did not end` })

      yield* step("apply")
      const token = randomBytes(12).toString("hex")
      yield* held`INSERT INTO plinth.move_marks (token) VALUES (${token})`
      const [position] = yield* held<{ lsn: string }>`SELECT pg_current_wal_lsn()::text AS lsn`
      const applied = yield* until(
        Effect.map(onTarget<{ n: number }>`SELECT count(*)::int AS n FROM plinth.move_marks WHERE token = ${token}`, (rows) => rows[0]!.n > 0),
        APPLY_TIMEOUT
      )
      if (!applied) return yield* new MoveRefused({ message: `the target did not apply ${name}'s last changes in time` })

      yield* step("sequences")
      const sequences = yield* held<{ schema: string; name: string; last_value: string | null }>`
        SELECT schemaname AS schema, sequencename AS name, last_value::text FROM pg_sequences
        WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`
      yield* Effect.forEach(sequences, (sequence) =>
        sequence.last_value === null
          ? Effect.void
          : Effect.asVoid(onTarget`SELECT setval(${qualified(sequence)}::regclass, ${sequence.last_value}::bigint, true)`), { discard: true })
      // The target takes nothing more from the source; its slot goes after the flip.
      for (const statement of ["DISABLE", "SET (slot_name = NONE)"]) {
        yield* onTarget.unsafe(`ALTER SUBSCRIPTION ${quoteIdentifier(subscription)} ${statement}`).unprepared
      }
      yield* onTarget.unsafe(`DROP SUBSCRIPTION ${quoteIdentifier(subscription)}`).unprepared

      yield* step("flip")
      const [flip] = yield* onRegistry<{ epoch: number }>`UPDATE plinth.tenants
        SET cluster = ${target.name}, previous_cluster = ${source.name}, moving_to = NULL, state = 'active', epoch = epoch + 1
        WHERE name = ${name} AND state = 'moving' RETURNING epoch`
      if (flip === undefined) return yield* new MoveRefused({ message: `the registry's row of ${name} changed during the move` })
      flipped = true
      const fenceMillis = Date.now() - fencedAt

      // Kept for a rollback window: read-only, and closed to the services (only an administrator connects).
      yield* step("finish")
      yield* dropSlot(sides)
      yield* held.unsafe(`DROP PUBLICATION IF EXISTS ${PUBLICATION}`).unprepared
      yield* held.unsafe(`ALTER DATABASE ${quoteIdentifier(name)} SET default_transaction_read_only = on`).unprepared
      yield* held.unsafe(`REVOKE CONNECT ON DATABASE ${quoteIdentifier(name)} FROM PUBLIC`).unprepared
      yield* held.unsafe(`ALTER DATABASE ${quoteIdentifier(name)} ALLOW_CONNECTIONS true`).unprepared
      return { from: source.name, to: target.name, epoch: flip.epoch, fenceMillis, lsn: position!.lsn } satisfies MoveResult
    }))
  })
  return yield* run.pipe(
    Effect.mapError((error) => error._tag === "MoveRefused" ? error : refused(`moving ${name} (${current})`)(error)),
    Effect.onExit((exit) => Exit.isFailure(exit) && !flipped ? undoMove(name, sides) : Effect.void)
  )
}, Effect.scoped)

/**
 * What a move left: a move that did not finish (its process was killed) is undone, and the old
 * database a finished move kept on the previous cluster is dropped and forgotten.
 */
export const cleanupTenant = Effect.fn("TenantMove.cleanup")(function*(name: string) {
  yield* holdMoveLock(name)
  const tenant = yield* readTenant(name)
  if (Option.isNone(tenant)) return yield* new MoveRefused({ message: `no tenant ${JSON.stringify(name)} (plinth tenant list)` })
  const movingTo = tenant.value.moving_to
  if (movingTo !== null) {
    yield* undoMove(name, yield* sidesOf(name, yield* readCluster(tenant.value.cluster), yield* readCluster(movingTo)))
  }
  const previous = tenant.value.previous_cluster
  if (previous !== null) {
    const server = yield* serverUrlOf(yield* readCluster(previous))
    yield* on(server, (sql) =>
      Effect.gen(function*() {
        yield* sql`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = ${subscriptionOf(name)} AND NOT active`
        yield* sql.unsafe(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`).unprepared
      })).pipe(Effect.mapError(refused(`dropping ${name} on ${previous}`)))
    yield* onControl(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql`UPDATE plinth.tenants SET previous_cluster = NULL WHERE name = ${name} AND previous_cluster = ${previous}`))
  }
  return { undone: Option.fromNullishOr(movingTo), dropped: Option.fromNullishOr(previous) }
}, Effect.scoped)
