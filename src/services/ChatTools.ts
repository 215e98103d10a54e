/**
 * The fifteen tools the AI may call (spec §4.8): their argument shapes (JSON Schemas the model
 * sees) and how each runs. Every tool that touches the database runs as the caller's own role
 * (owner or admin) in one transaction, through the same sys functions a client would call, so
 * the model can do nothing the user could not. SQL the model writes (a WHERE expression, a
 * SELECT) passes the SQL guard first.
 */
import { Effect, Schema } from "effect"
import type { SqlError } from "effect/sql"
import { changingCatalog } from "./CatalogWatch.ts"
import { databaseErrorFields } from "./DatabaseError.ts"
import type { Tool } from "./Model.ts"
import type { RequestContext } from "./RequestContext.ts"
import { PLAIN_NAME, quoteIdentifier } from "./SqlIdentifier.ts"
import type { SqlGuard } from "./SqlGuard.ts"
import type { PageChecker } from "./PageChecker.ts"
import { validatePageSource } from "./PageValidation.ts"
import { callPipelined, executePipelined, selectPipelined } from "./AsCaller.ts"

/** How a tool call completes: by running, at once with a fixed result, or running unseen (select_data). */
export type ToolMode = "execute" | "complete" | "query"

export const PREVIEW_RESULT = "Preview rendered"
export const PLAN_RESULT = "Plan presented"
export const SELECT_DATA_ROW_LIMIT = 20

export class ToolFailed extends Schema.TaggedError<ToolFailed>()("ToolFailed", { message: Schema.String }) {}

const name = { type: "string", pattern: "^[a-z][a-z0-9_]*$", maxLength: 63 } as const
const columnSpec = {
  type: "object",
  description: "A column: {name, type, required?, unique?, default?, label?, display_type?, options? (choice), references? (reference)}",
  properties: {
    name,
    type: {
      type: "string",
      enum: ["text", "integer", "bigint", "numeric", "currency", "boolean", "date", "timestamp", "uuid", "json", "email", "url", "choice", "reference"]
    },
    required: { type: "boolean" },
    unique: { type: "boolean" },
    default: {},
    label: { type: "string" },
    display_type: { type: "string" },
    options: {
      type: "array",
      items: { type: "object", properties: { value: { type: "string" }, label: { type: "string" }, color: { type: ["string", "null"] } }, required: ["value"] }
    },
    references: name
  },
  required: ["name", "type"]
} as const
const where = { type: "string", description: "A SQL boolean expression over the table's columns, e.g. status = 'open' AND total > 100" } as const
const slug = { type: "string", pattern: "^[a-z0-9][a-z0-9_-]*$", maxLength: 63 } as const

const object = (properties: Record<string, unknown>, required: ReadonlyArray<string>) =>
  ({ type: "object" as const, properties, required: [...required] })

interface ToolDefinition {
  readonly tool: Tool
  readonly mode: ToolMode
}

const define = (toolName: string, description: string, schema: ReturnType<typeof object>, mode: ToolMode = "execute"): ToolDefinition => ({
  tool: { name: toolName, description, input_schema: schema },
  mode
})

export const TOOLS: ReadonlyArray<ToolDefinition> = [
  define("propose_create_table", "Create a business table. Every table also gets id, created_at, updated_at and created_by.",
    object({ table_name: name, columns: { type: "array", items: columnSpec } }, ["table_name", "columns"])),
  define("propose_alter_table", "Change a table: operations as in sys.alter_table (add_column {column}, drop_column {name}, rename_column {name, to}, change_type {name, type}, set_required {name, required}, set_default {name, default}, set_display {name, label?, display_type?, options?}, set_display_columns {columns}, add_reference {name, references}, drop_reference {name}).",
    object({ table_name: name, operations: { type: "array", items: { type: "object", properties: { op: { type: "string" } }, required: ["op"] } } }, [
      "table_name",
      "operations"
    ])),
  define("propose_drop_table", "Drop a table and its data. Fails while other tables reference it.", object({ table_name: name }, ["table_name"])),
  define("propose_seed_data", "Insert sample rows.", object({ table_name: name, rows: { type: "array", items: { type: "object" }, maxItems: 500 } }, ["table_name", "rows"])),
  define("propose_update_rows", "Set column values on the rows matching a SQL WHERE expression.",
    object({ table_name: name, values: { type: "object" }, where }, ["table_name", "values", "where"])),
  define("propose_delete_rows", "Delete the rows matching a SQL WHERE expression.", object({ table_name: name, where }, ["table_name", "where"])),
  define("propose_create_view", "Create a read-only view from one SELECT (no semicolon).",
    object({ view_name: name, sql: { type: "string" } }, ["view_name", "sql"])),
  define("propose_drop_view", "Drop a custom view.", object({ view_name: name }, ["view_name"])),
  define("configure_fk_display", "Choose the columns shown for rows of a table when other tables reference it (autocomplete, *_display).",
    object({ table_name: name, columns: { type: "array", items: { type: "string" }, minItems: 1 } }, ["table_name", "columns"])),
  define("propose_create_page", "Create a custom page.", object({ slug, title: { type: "string" }, source: { type: "string" } }, ["slug", "title", "source"])),
  define("propose_update_page", "Change a page's title and/or source.", object({ slug, title: { type: "string" }, source: { type: "string" } }, ["slug"])),
  define("propose_delete_page", "Delete a page.", object({ slug }, ["slug"])),
  define("preview_page", "Show the user a preview of a page source.", object({ slug, title: { type: "string" }, source: { type: "string" } }, ["source"]), "complete"),
  define("select_data", `Read data to answer a question: one SELECT, at most ${SELECT_DATA_ROW_LIMIT} rows come back.`,
    object({ sql: { type: "string" } }, ["sql"]), "query"),
  define("propose_plan", "Present a build plan as a checklist before doing the work.",
    object({ title: { type: "string" }, steps: { type: "array", items: { type: "string" } } }, ["steps"]), "complete")
]

export const toolMode = (toolName: string): ToolMode | undefined => TOOLS.find((definition) => definition.tool.name === toolName)?.mode

const text = (args: Readonly<Record<string, unknown>>, key: string): string | undefined =>
  typeof args[key] === "string" ? (args[key] as string) : undefined

const required = (args: Readonly<Record<string, unknown>>, key: string) => {
  const value = text(args, key)
  return value === undefined || value === "" ? Effect.fail(new ToolFailed({ message: `${key} is required` })) : Effect.succeed(value)
}

const identifier = (value: string, what: string) =>
  PLAIN_NAME.test(value) ? Effect.succeed(value) : Effect.fail(new ToolFailed({ message: `${what} ${JSON.stringify(value)} is not a valid name` }))

const failedSql = (error: SqlError.SqlError) => {
  const fields = databaseErrorFields(error)
  return new ToolFailed({ message: fields.detail === undefined ? fields.message : `${fields.message} (${fields.detail})` })
}

/** A sys function called as the caller: its answer, or its failure as the tool's. */
const callSys = (context: RequestContext, call: string, params: ReadonlyArray<unknown>) =>
  changingCatalog(callPipelined(context, call, params)).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failedSql(error))))

/** A statement the model helped write: guarded like any client's, then run as the caller. */
const guarded = Effect.fnUntraced(function*(guard: SqlGuard["Service"], context: RequestContext, statement: string, params: ReadonlyArray<unknown>) {
  yield* guard.check(statement).pipe(Effect.mapError((refused) => new ToolFailed({ message: refused.message })))
  const result = yield* executePipelined(context, statement, params).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failedSql(error))))
  return { rowCount: result.rowCount }
})

/** A page source the model wrote, checked as POST /sql checks one: its problems become the tool's error, to correct. */
const checkedPage = (guard: SqlGuard["Service"], pages: PageChecker["Service"], source: string) =>
  validatePageSource(guard.check, pages.parse, source).pipe(
    Effect.as(source),
    Effect.mapError((refused) => new ToolFailed({ message: `${refused.message}\nSee the page format in the system prompt.` }))
  )

/** Runs one tool call as `context` (the caller's role, user and app); the result is what the model sees. */
export const runTool = Effect.fn("ChatTools.run")(function*(
  guard: SqlGuard["Service"],
  pages: PageChecker["Service"],
  context: RequestContext,
  toolName: string,
  args: Readonly<Record<string, unknown>>
) {
  switch (toolName) {
    case "propose_create_table":
      return yield* callSys(context, "sys.create_table($1, $2::jsonb)", [yield* required(args, "table_name"), JSON.stringify(args["columns"] ?? [])])
    case "propose_alter_table":
      return yield* callSys(context, "sys.alter_table($1, $2::jsonb)", [yield* required(args, "table_name"), JSON.stringify(args["operations"] ?? [])])
    case "propose_drop_table":
      return yield* callSys(context, "sys.drop_table($1)", [yield* required(args, "table_name")])
    case "propose_create_view":
      return yield* callSys(context, "sys.create_view($1, $2)", [yield* required(args, "view_name"), yield* required(args, "sql")])
    case "propose_drop_view":
      return yield* callSys(context, "sys.drop_view($1)", [yield* required(args, "view_name")])
    case "configure_fk_display":
      return yield* callSys(context, "sys.alter_table($1, $2::jsonb)", [
        yield* required(args, "table_name"),
        JSON.stringify([{ op: "set_display_columns", columns: args["columns"] ?? [] }])
      ])
    case "propose_create_page": {
      const slug = yield* required(args, "slug")
      const source = yield* checkedPage(guard, pages, text(args, "source") ?? "")
      return yield* callSys(context, "sys.create_page($1, $2, $3)", [slug, text(args, "title") ?? "", source])
    }
    case "propose_update_page": {
      const slug = yield* required(args, "slug")
      const source = text(args, "source")
      if (source !== undefined) yield* checkedPage(guard, pages, source)
      return yield* callSys(context, "sys.update_page($1, $2, $3)", [slug, text(args, "title") ?? null, source ?? null])
    }
    case "propose_delete_page":
      return yield* callSys(context, "sys.delete_page($1)", [yield* required(args, "slug")])
    case "propose_seed_data": {
      const table = yield* identifier(yield* required(args, "table_name"), "table")
      const rows = Array.isArray(args["rows"]) ? (args["rows"] as ReadonlyArray<unknown>) : []
      if (rows.length === 0) return yield* new ToolFailed({ message: "rows must be a non-empty array of objects" })
      const columns = [...new Set(rows.flatMap((row) => (typeof row === "object" && row !== null ? Object.keys(row) : [])))]
      for (const column of columns) yield* identifier(column, "column")
      const list = columns.map(quoteIdentifier).join(", ")
      return yield* guarded(
        guard,
        context,
        `INSERT INTO ${quoteIdentifier(table)} (${list}) SELECT ${list} FROM jsonb_populate_recordset(NULL::${quoteIdentifier(table)}, $1::jsonb)`,
        [JSON.stringify(rows)]
      )
    }
    case "propose_update_rows": {
      const table = yield* identifier(yield* required(args, "table_name"), "table")
      const values = args["values"]
      if (typeof values !== "object" || values === null || Array.isArray(values) || Object.keys(values).length === 0) {
        return yield* new ToolFailed({ message: "values must be an object of column: value" })
      }
      const columns = Object.keys(values)
      for (const column of columns) yield* identifier(column, "column")
      // The new values come from a subquery, so the WHERE sees only the table's own columns.
      const list = columns.map(quoteIdentifier).join(", ")
      return yield* guarded(
        guard,
        context,
        `UPDATE ${quoteIdentifier(table)} SET (${list}) = (SELECT ${list} FROM jsonb_populate_record(NULL::${quoteIdentifier(table)}, $1::jsonb)) WHERE ${yield* required(args, "where")}`,
        [JSON.stringify(values)]
      )
    }
    case "propose_delete_rows": {
      const table = yield* identifier(yield* required(args, "table_name"), "table")
      return yield* guarded(guard, context, `DELETE FROM ${quoteIdentifier(table)} WHERE ${yield* required(args, "where")}`, [])
    }
    case "select_data": {
      const statement = yield* required(args, "sql")
      const checked = yield* guard.check(statement).pipe(Effect.mapError((refused) => new ToolFailed({ message: refused.message })))
      if (checked.kind !== "SELECT") return yield* new ToolFailed({ message: "select_data runs one SELECT only" })
      // Read-only: a data-modifying CTE inside the SELECT fails too. One row past the limit tells
      // whether there were more.
      const all = yield* selectPipelined(context, statement, [], SELECT_DATA_ROW_LIMIT + 1).pipe(
        Effect.catchTag("SqlError", (error) => Effect.fail(failedSql(error)))
      )
      return { rows: all.slice(0, SELECT_DATA_ROW_LIMIT), rowCount: Math.min(all.length, SELECT_DATA_ROW_LIMIT), truncated: all.length > SELECT_DATA_ROW_LIMIT }
    }
    case "preview_page":
      yield* checkedPage(guard, pages, yield* required(args, "source"))
      return PREVIEW_RESULT
    case "propose_plan":
      return PLAN_RESULT
    default:
      return yield* new ToolFailed({ message: `unknown tool ${toolName}` })
  }
})
