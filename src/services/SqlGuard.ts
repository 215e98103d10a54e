/**
 * The parser check in front of POST /sql and /function/:name. PostgreSQL's own parser decides
 * what the text is: exactly one SELECT (without INTO), INSERT, UPDATE or DELETE passes (its CTEs
 * too), and no call of a function on the denylist (DeniedFunctions.ts) may appear anywhere in it.
 * The database's privileges (0004_sql_defence.sql, and the migrator's revokes of that same list)
 * refuse the same things again, for whatever this check might miss.
 */
import { Context, Effect, type Exit, Layer, Schema } from "effect"
import type { ParseResult } from "libpg-query"
import { isDeniedFunction as isDenied } from "./DeniedFunctions.ts"
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
  /**
   * A SELECT with a data-modifying CTE (`WITH d AS (DELETE ...) SELECT ...`): PostgreSQL allows it
   * only at the top level, so it cannot be peeked at as a subquery.
   */
  readonly writesInCte: boolean
  /**
   * The page sources it passes to sys.create_page / sys.update_page, to be checked against the
   * page format before it runs (PageValidation.ts); absent when it calls neither.
   */
  readonly pageSources?: ReadonlyArray<PageSourceArgument>
}

/** A page source as written in the statement: a string literal, or the `$n` that binds it. */
export type PageSourceArgument = { readonly literal: string } | { readonly parameter: number }

/** The page functions whose third argument, `p_source`, is a page in the page format. */
const PAGE_FUNCTIONS = new Set(["create_page", "update_page"])
const SOURCE_ARGUMENT = { name: "p_source", position: 2 } as const

export class StatementRefused extends Schema.TaggedError<StatementRefused>()("StatementRefused", {
  message: Schema.String
}) {}

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

/** What the guard needs from a parse tree, gathered in one walk. */
interface TreeFacts {
  /** Every function called anywhere, as the parts of its name (`sys.create_table` → two). */
  readonly called: Array<ReadonlyArray<string>>
  /** The highest `$n` (0 when it has no parameters). */
  highestParameter: number
  /** How many times each `$n` appears. */
  readonly parameterUses: Map<number, number>
  /** The first system catalog a data-modifying statement (top level or in a CTE) targets. */
  writtenCatalog: string | undefined
  /** The first CTE whose statement is not a SELECT, INSERT, UPDATE or DELETE (MERGE), by node name. */
  refusedCte: string | undefined
  /** A CTE is an INSERT, UPDATE or DELETE. */
  writesInCte: boolean
  /** The page sources given to sys.create_page / sys.update_page; `null` for one given otherwise (an expression). */
  readonly pageSources: Array<PageSourceArgument | null>
}

type Node = Record<string, unknown>

/** `text` or `pg_catalog.text`, without a length or array bounds. */
const isPlainText = (typeName: Node | undefined): boolean => {
  const names = ((typeName?.["names"] ?? []) as ReadonlyArray<{ String?: { sval?: string } }>).map((part) => part.String?.sval)
  const plain = Object.keys(typeName ?? {}).every((key) => key === "names" || key === "typemod" || key === "location")
  return plain && (typeName?.["typemod"] ?? -1) === -1 &&
    (names.length === 1 ? names[0] === "text" : names.length === 2 && names[0] === "pg_catalog" && names[1] === "text")
}

/**
 * `'text'`, `$3`, either cast to text (`$3::text`); NULL (keep the source) is undefined; anything
 * else null. A cast to another type is an expression too: its output is not the text checked
 * (`::varchar(5)` cuts it, `::text[]::text` unescapes it).
 */
const sourceArgument = (argument: Node | undefined): PageSourceArgument | null | undefined => {
  if (argument === undefined) return undefined
  const cast = argument["TypeCast"] as { arg?: Node; typeName?: Node } | undefined
  if (cast !== undefined) return isPlainText(cast.typeName) ? sourceArgument(cast.arg ?? {}) : null
  const param = argument["ParamRef"] as { number?: number } | undefined
  if (param !== undefined) return { parameter: Number(param.number ?? 0) }
  const constant = argument["A_Const"] as { isnull?: boolean; sval?: { sval?: string } } | undefined
  if (constant?.isnull === true) return undefined
  if (constant?.sval !== undefined) return { literal: constant.sval.sval ?? "" }
  return null
}

/** The `p_source` argument of a page function call, by name or by position. */
const pageSourceOf = (call: { args?: ReadonlyArray<Node> }): PageSourceArgument | null | undefined => {
  const args = call.args ?? []
  const named = args.map((arg) => arg["NamedArgExpr"] as { name?: string; arg?: Node } | undefined)
  const byName = named.find((arg) => arg?.name === SOURCE_ARGUMENT.name)
  if (byName !== undefined) return sourceArgument(byName.arg)
  const positional = args[SOURCE_ARGUMENT.position]
  return positional === undefined || named[SOURCE_ARGUMENT.position] !== undefined ? undefined : sourceArgument(positional)
}

const DATA_MODIFYING = new Set(["InsertStmt", "UpdateStmt", "DeleteStmt", "MergeStmt"])

const catalogTarget = (statement: unknown): string | undefined => {
  if (typeof statement !== "object" || statement === null) return undefined
  const target = (statement as { relation?: { relname?: string; schemaname?: string } }).relation
  const schema = target?.schemaname?.toLowerCase()
  const name = target?.relname?.toLowerCase() ?? ""
  return schema === "pg_catalog" || schema === "information_schema" || name.startsWith("pg_") ? `${schema ?? "pg_catalog"}.${name}` : undefined
}

/**
 * Walks the tree with a stack of its own, depth first and in document order: a statement of a
 * few thousand nested terms must not overflow the JavaScript stack.
 */
const treeFacts = (tree: unknown): TreeFacts => {
  const facts: TreeFacts = { called: [], highestParameter: 0, writtenCatalog: undefined, refusedCte: undefined, writesInCte: false, pageSources: [], parameterUses: new Map() }
  const stack: Array<readonly [string, unknown]> = [["", tree]]
  while (stack.length > 0) {
    const [key, node] = stack.pop()!
    if (key === "FuncCall") {
      const parts = (node as { funcname?: ReadonlyArray<{ String?: { sval?: string } }> }).funcname ?? []
      const name = parts.map((part) => part.String?.sval ?? "")
      facts.called.push(name)
      if (name.length === 2 && name[0] === "sys" && PAGE_FUNCTIONS.has(name[1]!)) {
        const source = pageSourceOf(node as { args?: ReadonlyArray<Node> })
        if (source !== undefined) facts.pageSources.push(source)
      }
    } else if (key === "ParamRef") {
      const number = Number((node as { number?: number }).number ?? 0)
      facts.highestParameter = Math.max(facts.highestParameter, number)
      facts.parameterUses.set(number, (facts.parameterUses.get(number) ?? 0) + 1)
      continue
    } else if (DATA_MODIFYING.has(key)) {
      facts.writtenCatalog ??= catalogTarget(node)
    } else if (key === "CommonTableExpr") {
      const query = (node as { ctequery?: Record<string, unknown> }).ctequery ?? {}
      const kind = Object.keys(query)[0]
      if (kind !== undefined && ALLOWED[kind] === undefined) facts.refusedCte ??= kind
      else if (kind !== undefined && DATA_MODIFYING.has(kind)) facts.writesInCte = true
    }
    if (Array.isArray(node)) {
      for (let index = node.length - 1; index >= 0; index--) stack.push(["", node[index]])
    } else if (typeof node === "object" && node !== null) {
      const entries = Object.entries(node)
      for (let index = entries.length - 1; index >= 0; index--) stack.push(entries[index]!)
    }
  }
  return facts
}

/** PostgreSQL 18's tree names it `returningClause` (with a `exprs` list); older ones `returningList`. */
const hasReturning = (body: Record<string, unknown>): boolean => {
  const clause = body["returningClause"] as { exprs?: ReadonlyArray<unknown> } | undefined
  const list = body["returningList"]
  return (clause?.exprs?.length ?? 0) > 0 || (Array.isArray(list) && list.length > 0)
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
  const facts = treeFacts(tree)
  // `WITH m AS (MERGE ...) SELECT ...` is a MERGE all the same.
  if (facts.refusedCte !== undefined) {
    return Effect.fail(new StatementRefused({ message: `${kindName(facts.refusedCte)} statements are not allowed` }))
  }
  const called = facts.called
  // `db.sys.create_page(...)` is PostgreSQL's name for sys.create_page in the current database:
  // every check by schema (sys, the page sources) would miss it.
  const catalogQualified = called.find((parts) => parts.length > 2)
  if (catalogQualified !== undefined) {
    return Effect.fail(new StatementRefused({
      message: `function ${catalogQualified.join(".")}: write the function as schema.name, without the database's name`
    }))
  }
  const denied = called.map((parts) => (parts.at(-1) ?? "").toLowerCase()).find(isDenied)
  if (denied !== undefined) return Effect.fail(new StatementRefused({ message: `function ${denied} is not allowed` }))
  // `UPDATE pg_settings SET setting = ...` is set_config by another name.
  const catalog = facts.writtenCatalog
  if (catalog !== undefined) return Effect.fail(new StatementRefused({ message: `writing to ${catalog} is not allowed` }))
  // A page source is checked before the statement runs, so it must be one that can be read without running it.
  // A `$n` used elsewhere too may be typed there (`$1::name`): the source saved would be its cast, not the text checked.
  const sourceUses = new Map<number, number>()
  for (const source of facts.pageSources) {
    if (source !== null && "parameter" in source) sourceUses.set(source.parameter, (sourceUses.get(source.parameter) ?? 0) + 1)
  }
  if ([...sourceUses].some(([number, uses]) => facts.parameterUses.get(number) !== uses)) {
    return Effect.fail(new StatementRefused({
      message: "a $n that passes a page source to sys.create_page / sys.update_page may not be used elsewhere in the statement"
    }))
  }
  if (facts.pageSources.includes(null)) {
    return Effect.fail(new StatementRefused({
      message: "pass the page source of sys.create_page / sys.update_page as a string literal or a $n parameter, so it can be checked"
    }))
  }
  const guarded: GuardedStatement = {
    kind,
    returnsRows: kind === "SELECT" || hasReturning(body),
    parameters: facts.highestParameter,
    callsSys: called.some((parts) => parts.length === 2 && parts[0] === "sys"),
    writesInCte: facts.writesInCte
  }
  return Effect.succeed(
    facts.pageSources.length === 0 ? guarded : { ...guarded, pageSources: facts.pageSources as Array<PageSourceArgument> }
  )
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
    // On every request: untraced, since a span nothing reads is a cost per call (docs/performance-notes.md).
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
      const verdict = yield* parseSql(text).pipe(
        Effect.catchTag("SqlTooDeep", (error) => Effect.fail(new StatementRefused({ message: error.message }))),
        Effect.flatMap(classify),
        Effect.exit
      )
      remember(text, verdict)
      return yield* verdict
    })
  })
}

/** Whether a bare function name is on the denylist (also used for /function/:name). */
export const isDeniedFunction = (name: string): boolean => isDenied(name)
