/**
 * The parser check in front of POST /sql and /function/:name. PostgreSQL's own parser decides
 * what the text is: exactly one SELECT (without INTO), INSERT, UPDATE or DELETE passes, and no
 * call of a function on the denylist may appear anywhere in it. The database's privileges
 * (0004_sql_defence.sql) refuse the same things again, for whatever this check might miss.
 */
import { Context, Effect, type Exit, Layer, Schema } from "effect"
import type { ParseResult } from "libpg-query"
import { parseSql, type SqlParseError } from "./SqlParser.ts"

/** What the caller's statement is, as far as running it is concerned. */
export interface GuardedStatement {
  readonly kind: "SELECT" | "INSERT" | "UPDATE" | "DELETE"
  /** SELECTs and statements with RETURNING produce rows; the others only a count. */
  readonly returnsRows: boolean
  /** The highest `$n` the statement uses: fewer params than that is the caller's mistake. */
  readonly parameters: number
  /**
   * It calls a sys function (sys is never on a caller's search_path, so only by that name): the
   * one way a caller changes the catalog, so the caches end once it commits (CatalogWatch).
   */
  readonly callsSys: boolean
}

export class StatementRefused extends Schema.TaggedError<StatementRefused>()("StatementRefused", {
  message: Schema.String
}) {}

/**
 * Functions no caller may reach: the settings that carry role and claims, backend signalling,
 * NOTIFY, session-level advisory locks (they would outlive the request on a pooled connection),
 * SQL smuggled in as text, server files, large objects, replication and dblink.
 */
const DENIED_FUNCTIONS = new Set([
  "set_config",
  "pg_terminate_backend", "pg_cancel_backend", "pg_signal_backend", "pg_reload_conf", "pg_rotate_logfile",
  "pg_notify", "pg_listening_channels",
  "pg_advisory_lock", "pg_advisory_lock_shared", "pg_try_advisory_lock", "pg_try_advisory_lock_shared",
  "pg_advisory_unlock", "pg_advisory_unlock_shared", "pg_advisory_unlock_all",
  "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema",
  "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "pg_file_write", "pg_file_unlink", "pg_file_rename",
  "pg_ls_logdir", "pg_ls_waldir", "pg_ls_tmpdir", "pg_ls_archive_statusdir",
  "loread", "lowrite",
  "pg_logical_emit_message", "pg_switch_wal", "pg_create_restore_point", "pg_promote",
  "pg_create_physical_replication_slot", "pg_create_logical_replication_slot", "pg_drop_replication_slot",
  "pg_replication_origin_create", "pg_replication_origin_drop",
  "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u", "dblink_send_query",
  // Full-text helpers that run a query given as text.
  "ts_stat", "ts_rewrite"
])

const isDenied = (name: string) => DENIED_FUNCTIONS.has(name) || name.startsWith("lo_") || name.startsWith("dblink")

const ALLOWED: Record<string, GuardedStatement["kind"]> = {
  SelectStmt: "SELECT",
  InsertStmt: "INSERT",
  UpdateStmt: "UPDATE",
  DeleteStmt: "DELETE"
}

/** `VariableSetStmt` → `SET`, `CreateFunctionStmt` → `CREATE FUNCTION`: how the error names a kind. */
const KIND_NAMES: Record<string, string> = {
  VariableSetStmt: "SET",
  VariableShowStmt: "SHOW",
  TransactionStmt: "transaction control",
  CopyStmt: "COPY",
  DoStmt: "DO",
  CallStmt: "CALL",
  ListenStmt: "LISTEN",
  UnlistenStmt: "UNLISTEN",
  NotifyStmt: "NOTIFY",
  PrepareStmt: "PREPARE",
  ExecuteStmt: "EXECUTE",
  DeallocateStmt: "DEALLOCATE",
  DeclareCursorStmt: "DECLARE",
  FetchStmt: "FETCH",
  ClosePortalStmt: "CLOSE",
  LockStmt: "LOCK",
  VacuumStmt: "VACUUM",
  ExplainStmt: "EXPLAIN",
  MergeStmt: "MERGE",
  CreateStmt: "CREATE TABLE",
  CreateTableAsStmt: "CREATE TABLE AS",
  IndexStmt: "CREATE INDEX",
  ViewStmt: "CREATE VIEW",
  RuleStmt: "CREATE RULE",
  GrantStmt: "GRANT",
  GrantRoleStmt: "GRANT",
  DropStmt: "DROP",
  TruncateStmt: "TRUNCATE",
  DiscardStmt: "DISCARD",
  LoadStmt: "LOAD",
  CheckPointStmt: "CHECKPOINT",
  SecLabelStmt: "SECURITY LABEL",
  CreatedbStmt: "CREATE DATABASE",
  ReindexStmt: "REINDEX",
  ClusterStmt: "CLUSTER"
}

const kindName = (node: string): string =>
  KIND_NAMES[node] ?? node.replace(/Stmt$/, "").replace(/([a-z])([A-Z])/g, "$1 $2").toUpperCase()

/** Every function called anywhere in a parse tree, as the parts of its name (`sys.create_table` → two). */
const calledFunctions = (node: unknown, found: Array<ReadonlyArray<string>> = []): Array<ReadonlyArray<string>> => {
  if (Array.isArray(node)) {
    for (const item of node) calledFunctions(item, found)
  } else if (typeof node === "object" && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === "FuncCall") {
        const parts = (value as { funcname?: ReadonlyArray<{ String?: { sval?: string } }> }).funcname ?? []
        found.push(parts.map((part) => part.String?.sval ?? ""))
      }
      calledFunctions(value, found)
    }
  }
  return found
}

/** The highest `$n` in a parse tree (0 when it has no parameters). */
const highestParameter = (node: unknown): number => {
  let highest = 0
  const stack: Array<unknown> = [node]
  while (stack.length > 0) {
    const current = stack.pop()
    if (Array.isArray(current)) {
      stack.push(...current)
    } else if (typeof current === "object" && current !== null) {
      for (const [key, value] of Object.entries(current)) {
        if (key === "ParamRef") highest = Math.max(highest, Number((value as { number?: number }).number ?? 0))
        else stack.push(value)
      }
    }
  }
  return highest
}

/** PostgreSQL 18's tree names it `returningClause` (with a `exprs` list); older ones `returningList`. */
const hasReturning = (body: Record<string, unknown>): boolean => {
  const clause = body["returningClause"] as { exprs?: ReadonlyArray<unknown> } | undefined
  const list = body["returningList"]
  return (clause?.exprs?.length ?? 0) > 0 || (Array.isArray(list) && list.length > 0)
}

/** The system catalog a data-modifying statement (top level or in a CTE) targets, if any. */
const writtenCatalog = (node: unknown): string | undefined => {
  if (Array.isArray(node)) {
    for (const item of node) {
      const found = writtenCatalog(item)
      if (found !== undefined) return found
    }
  } else if (typeof node === "object" && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if ((key === "InsertStmt" || key === "UpdateStmt" || key === "DeleteStmt" || key === "MergeStmt") && typeof value === "object" && value !== null) {
        const target = (value as { relation?: { relname?: string; schemaname?: string } }).relation
        const schema = target?.schemaname?.toLowerCase()
        const name = target?.relname?.toLowerCase() ?? ""
        if (schema === "pg_catalog" || schema === "information_schema" || name.startsWith("pg_")) return `${schema ?? "pg_catalog"}.${name}`
      }
      const found = writtenCatalog(value)
      if (found !== undefined) return found
    }
  }
  return undefined
}

const classify = (result: ParseResult): Effect.Effect<GuardedStatement, StatementRefused> => {
  const statements = result.stmts ?? []
  if (statements.length === 0) return Effect.fail(new StatementRefused({ message: "sql contains no statement" }))
  if (statements.length > 1) {
    return Effect.fail(new StatementRefused({ message: "exactly one statement is allowed per request" }))
  }
  const tree = (statements[0]!.stmt ?? {}) as Record<string, Record<string, unknown>>
  const [node, body] = Object.entries(tree)[0] ?? ["unknown", {}]
  const kind = ALLOWED[node]
  if (kind === undefined) return Effect.fail(new StatementRefused({ message: `${kindName(node)} statements are not allowed` }))
  if (kind === "SELECT" && body["intoClause"] !== undefined) {
    return Effect.fail(new StatementRefused({ message: "SELECT INTO statements are not allowed" }))
  }
  const called = calledFunctions(tree)
  const denied = called.map((parts) => (parts.at(-1) ?? "").toLowerCase()).find(isDenied)
  if (denied !== undefined) return Effect.fail(new StatementRefused({ message: `function ${denied} is not allowed` }))
  // `UPDATE pg_settings SET setting = ...` is set_config by another name.
  const catalog = writtenCatalog(tree)
  if (catalog !== undefined) return Effect.fail(new StatementRefused({ message: `writing to ${catalog} is not allowed` }))
  return Effect.succeed({
    kind,
    returnsRows: kind === "SELECT" || hasReturning(body),
    parameters: highestParameter(tree),
    callsSys: called.some((parts) => parts.length === 2 && parts[0] === "sys")
  })
}

/** Parse results are reused: clients send the same few statements over and over. */
const CACHE_SIZE = 1_000

type Verdict = Exit.Exit<GuardedStatement, StatementRefused | SqlParseError>

export class SqlGuard extends Context.Service<SqlGuard, {
  readonly check: (text: string) => Effect.Effect<GuardedStatement, StatementRefused | SqlParseError>
}>()("plinth/SqlGuard") {
  static readonly layer = Layer.sync(SqlGuard, () => makeSqlGuard())
}

export const makeSqlGuard = () => {
  const cache = new Map<string, Verdict>()
  const remember = (text: string, verdict: Verdict) => {
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!)
    cache.set(text, verdict)
  }
  return SqlGuard.of({
    // On every request: untraced (Effect.fn's span costs ~4 µs a call; README, Performance).
    check: Effect.fnUntraced(function*(text: string) {
      // The parser stops at a NUL and the server refuses the message: neither is the caller's answer.
      if (text.includes("\u0000")) return yield* new StatementRefused({ message: "sql may not contain NUL characters" })
      const known = cache.get(text)
      if (known !== undefined) {
        // Refresh its place: the map's order is the eviction order.
        cache.delete(text)
        cache.set(text, known)
        return yield* known
      }
      const verdict = yield* parseSql(text).pipe(Effect.flatMap(classify), Effect.exit)
      remember(text, verdict)
      return yield* verdict
    })
  })
}

/** Whether a bare function name is on the denylist (also used for /function/:name). */
export const isDeniedFunction = (name: string): boolean => isDenied(name.toLowerCase())
