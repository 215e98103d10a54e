/**
 * A page's source checked before it is saved (docs/pages.md): the page format's own rules
 * (PageFormat.ts), and each query through the SQL guard's own check as one read-only SELECT
 * whose `$n` are all named by its `params`. A query that fails only when it runs (a column that
 * no longer exists) is not looked for here: the page shows that error in the block's place.
 */
import { Effect, Schema } from "effect"
import { formatProblems, type PageProblem, type QueryBlock } from "./PageFormat.ts"
import type { PageChecker } from "./PageChecker.ts"
import type { GuardedStatement, PageSourceArgument, SqlGuard } from "./SqlGuard.ts"
import { toParameter } from "./SqlRunner.ts"

/** The page source breaks the format; `message` names each wrong block and its line. */
export class PageRefused extends Schema.TaggedError<PageRefused>()("PageRefused", { message: Schema.String }) {}

type Check = SqlGuard["Service"]["check"]
type Parse = PageChecker["Service"]["parse"]

/** The line in the page of a 1-based character offset into a query's SQL; without one, the fence's line. */
const lineOf = (query: QueryBlock, position: number | null): number =>
  position === null ? query.line : query.line + 1 + (query.sql.slice(0, Math.max(0, position - 1)).match(/\n/g)?.length ?? 0)

const problemOf = (query: QueryBlock, index: number, line: number, message: string): PageProblem => ({
  block: "sql",
  name: query.name,
  index,
  line,
  message: `sql block ${index} (line ${line}, ${query.name}): ${message}.`
})

/**
 * Why a statement the guard passed is not one that only reads, or undefined: the rule for a page's
 * queries, on save and when POST /sql runs one with `readOnly`.
 */
export const readOnlyProblem = (statement: GuardedStatement): string | undefined => {
  if (statement.kind !== "SELECT") return `a page query must be one SELECT, not ${statement.kind === "DELETE" ? "a" : "an"} ${statement.kind}`
  if (statement.writesInCte) return "a page query only reads: no INSERT, UPDATE or DELETE in its WITH"
  if (statement.callsSys) return "a page query only reads: it may not call sys functions"
  return undefined
}

/** What is wrong with one query as a page query, or undefined. */
const queryProblem = Effect.fnUntraced(function*(check: Check, query: QueryBlock, index: number) {
  const verdict = yield* Effect.result(check(query.sql))
  if (verdict._tag === "Failure") {
    const error = verdict.failure
    const line = lineOf(query, error._tag === "SqlParseError" ? error.position : null)
    return problemOf(query, index, line, error.message)
  }
  const statement = verdict.success
  const at = (message: string) => problemOf(query, index, query.line, message)
  const reads = readOnlyProblem(statement)
  if (reads !== undefined) return at(reads)
  if (statement.parameters > query.params.length) {
    return at(`it uses $${statement.parameters} but its params option names ${query.params.length} page parameter${query.params.length === 1 ? "" : "s"}; ` +
      "name the URL parameter bound to each $n in order, e.g. ```sql " + query.name + " params=region,year")
  }
  return undefined
})

/** Refuses a page source that breaks the format, naming every wrong block (parsed off the event loop: PageChecker.ts). */
export const validatePageSource = Effect.fnUntraced(function*(check: Check, parse: Parse, source: string) {
  const page = yield* parse(source).pipe(
    Effect.catchTag("PageTooComplex", (error) => Effect.fail(new PageRefused({ message: error.message })))
  )
  const problems = [...page.problems]
  for (const { query, index } of page.queries) {
    const problem = yield* queryProblem(check, query, index)
    if (problem !== undefined) problems.push(problem)
  }
  if (problems.length > 0) {
    problems.sort((a, b) => a.line - b.line)
    return yield* new PageRefused({ message: formatProblems(problems) })
  }
})

/** Page sources one statement may pass: each is parsed in a worker with a deadline of its own. */
export const MAX_PAGE_SOURCES = 10

/**
 * The page sources a guarded statement passes, checked: a literal as written, a parameter as it
 * will be bound (null keeps an updated page's source), each distinct text once.
 */
export const validatePageSources = Effect.fnUntraced(function*(
  check: Check,
  parse: Parse,
  sources: ReadonlyArray<PageSourceArgument>,
  params: ReadonlyArray<unknown>
) {
  // The text the database would be given (SqlRunner binds a parameter the same way).
  const texts = new Set(sources.flatMap((source) => {
    const text = "literal" in source ? source.literal : toParameter(params[source.parameter - 1])
    return text === null ? [] : [text]
  }))
  if (texts.size > MAX_PAGE_SOURCES) {
    return yield* new PageRefused({ message: `one statement may save at most ${MAX_PAGE_SOURCES} page sources; save the others in further statements` })
  }
  for (const text of texts) yield* validatePageSource(check, parse, text)
})
