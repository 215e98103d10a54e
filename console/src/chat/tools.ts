/**
 * The chat's tool calls in words: a summary of what a call asks (its arguments) and of what came of
 * it (its result), and which calls change the app (the console then refreshes what it shows).
 * Tool names are read with or without their `propose_` prefix.
 */

type Args = Readonly<Record<string, unknown>>

const text = (value: unknown): string => (typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value))
const list = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])
const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`
const clip = (value: string, length = 80) => (value.length > length ? `${value.slice(0, length - 1)}…` : value)

/** `propose_create_table` → `create_table`. */
export const baseName = (name: string) => name.replace(/^propose_/, "")

/** What a tool is called in the chat: `create_table` → `Create table`. */
export const toolLabel = (name: string) => {
  const words = baseName(name).replace(/_/g, " ")
  return words.charAt(0).toUpperCase() + words.slice(1)
}

const columnsOf = (args: Args) =>
  list(args["columns"]).map((column) => {
    const spec = (typeof column === "object" && column !== null ? column : {}) as Args
    return `${text(spec["name"])}${spec["type"] === undefined ? "" : ` ${text(spec["type"])}`}`
  })

const operationOf = (operation: unknown) => {
  const spec = (typeof operation === "object" && operation !== null ? operation : {}) as Args
  const column = (typeof spec["column"] === "object" && spec["column"] !== null ? spec["column"] : {}) as Args
  const subject = text(spec["name"] ?? column["name"])
  return `${text(spec["op"]).replace(/_/g, " ")}${subject === "" ? "" : ` ${subject}`}`
}

/** A readable summary of a call's arguments. */
export const describeCall = (name: string, args: Args): string => {
  const table = text(args["table_name"])
  switch (baseName(name)) {
    case "create_table":
      return clip(`Table ${table}: ${columnsOf(args).join(", ") || "no columns"}`, 160)
    case "alter_table":
      return clip(`Table ${table}: ${list(args["operations"]).map(operationOf).join(", ")}`, 160)
    case "drop_table":
      return `Table ${table}, with its data`
    case "seed_data":
      return `${plural(list(args["rows"]).length, "row")} into ${table}`
    case "update_rows":
      return clip(`${table}: set ${Object.keys((args["values"] ?? {}) as object).join(", ")} where ${text(args["where"])}`)
    case "delete_rows":
      return clip(`${table} where ${text(args["where"])}`)
    case "create_view":
      return clip(`View ${text(args["view_name"])}: ${text(args["sql"])}`)
    case "drop_view":
      return `View ${text(args["view_name"])}`
    case "configure_fk_display":
      return `${table} shown as ${list(args["columns"]).map(text).join(", ")}`
    case "create_page":
    case "update_page":
      return `Page ${text(args["slug"])}${args["title"] === undefined ? "" : ` (${text(args["title"])})`}`
    case "delete_page":
      return `Page ${text(args["slug"])}`
    case "preview_page":
      return `Preview of ${args["title"] === undefined ? "a page" : text(args["title"])}`
    case "plan":
      return text(args["title"]) || plural(list(args["steps"]).length, "step")
    case "select_data":
      return clip(text(args["sql"]))
    default:
      return clip(Object.entries(args).map(([key, value]) => `${key}: ${text(value)}`).join(", "))
  }
}

const rowCountOf = (result: unknown) =>
  typeof result === "object" && result !== null && typeof (result as Args)["rowCount"] === "number" ? ((result as Args)["rowCount"] as number) : undefined

/** What came of a call: its result (`{result}`) or its failure (`{error}`), in words. */
export const describeResult = (name: string, args: Args, toolResult: Args): string => {
  if (toolResult["error"] !== undefined) return `Failed: ${text(toolResult["error"])}`
  const result = toolResult["result"]
  const table = text(args["table_name"])
  const rows = rowCountOf(result)
  switch (baseName(name)) {
    case "create_table":
      return `created table ${table}`
    case "alter_table":
      return `changed table ${table}`
    case "drop_table":
      return `dropped table ${table}`
    case "seed_data":
      return `inserted ${plural(rows ?? list(args["rows"]).length, "row")}`
    case "update_rows":
      return `updated ${plural(rows ?? 0, "row")}`
    case "delete_rows":
      return `deleted ${plural(rows ?? 0, "row")}`
    case "create_view":
      return `created view ${text(args["view_name"])}`
    case "drop_view":
      return `dropped view ${text(args["view_name"])}`
    case "configure_fk_display":
      return `${table} is shown by ${list(args["columns"]).map(text).join(", ")}`
    case "create_page":
      return `page ${text(args["slug"])} created`
    case "update_page":
      return `page ${text(args["slug"])} updated`
    case "delete_page":
      return `page ${text(args["slug"])} deleted`
    case "preview_page":
      return "shown below"
    case "plan":
      return "plan shown"
    default:
      return "done"
  }
}

const CHANGING = new Set([
  "create_table",
  "alter_table",
  "drop_table",
  "seed_data",
  "update_rows",
  "delete_rows",
  "create_view",
  "drop_view",
  "configure_fk_display",
  "create_page",
  "update_page",
  "delete_page"
])

/** Whether a completed call changed the schema, the data or a page (what the console shows). */
export const changesApp = (name: string) => CHANGING.has(baseName(name))
