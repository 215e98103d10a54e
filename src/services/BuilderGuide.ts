/**
 * What the chat's system prompt teaches the model about building (ChatTurn.systemPrompt): the
 * column spec, the display types and the page format (docs/pages.md), with an example page. It is
 * sent on every turn, so it stays short; the example is parsed by a test, so it cannot rot.
 */

const FENCE = "```"

/** A dashboard over `orders` (with a `status`, a `total` and a reference `customer`): a value, a bar chart and a table. */
export const PAGE_EXAMPLE = [
  "# Sales",
  "",
  "All orders: [orders](table:orders). Back to [the start](page:home).",
  "",
  `${FENCE}sql totals`,
  "SELECT count(*) AS orders, coalesce(sum(total), 0) AS revenue FROM orders",
  FENCE,
  "",
  `${FENCE}value query=totals column=revenue label="Revenue" format=currency`,
  FENCE,
  "",
  `${FENCE}sql by_status`,
  "SELECT status, count(*) AS orders FROM orders GROUP BY status ORDER BY status",
  FENCE,
  "",
  `${FENCE}chart query=by_status type=bar x=status y=orders title="Orders by status"`,
  FENCE,
  "",
  `${FENCE}sql recent params=status`,
  "SELECT customer_display AS customer, status, total, created_at FROM orders_v",
  "WHERE $1::text IS NULL OR status = $1 ORDER BY created_at DESC LIMIT 100",
  FENCE,
  "",
  `${FENCE}table query=recent page_size=10`,
  FENCE
].join("\n")

export const BUILDER_GUIDE = [
  "Column spec (propose_create_table, add_column): {name, type, required?, unique?, default?, label?, display_type?, options?, references?}.",
  "choice takes options: [{value, label, color}]; reference takes references: \"<table>\" and holds that row's id.",
  "Every table also gets id, created_at, updated_at and created_by, and a read view <table>_v with <column>_display for each reference.",
  "display_type is how the console shows a value; it follows the type (integer, bigint, numeric: number; timestamp: datetime;",
  "uuid: text; the others their own name: text, email, url, currency, boolean, date, json, choice, reference). Set it only to show",
  "a value otherwise, e.g. a numeric as currency.",
  "",
  "Pages (propose_create_page, propose_update_page, preview_page) are Markdown (CommonMark; raw HTML is shown as text) with fenced blocks:",
  "- ```sql <name> [params=a,b]: one SELECT, named [a-z_][a-z0-9_]*. It runs as the viewer in this app's schema (row-level security applies);",
  "  $1, $2… are the page URL's query parameters named in params, in order (NULL when absent).",
  "- ```value query=<name> [column=<col>] [label=\"…\"] [format=number|currency|percent] [currency=EUR]: the first row's value (percent: a fraction).",
  "- ```chart query=<name> type=bar|line|area|pie x=<col> y=<col>[,<col>…] [series=<col>] [title=\"…\"] (pie: one y, no series).",
  "- ```table query=<name> [columns=a,b] [page_size=25] [title=\"…\"]",
  "Components have no body: close the fence on the next line. Columns are the query's result columns (alias them with AS).",
  "Fences start a line, outside lists and quotes. Links: [Orders](page:orders), [Customers](table:customers), https:, mailto:.",
  "A page that breaks a rule is refused naming the block and line: fix that block and call the tool again. Example:",
  PAGE_EXAMPLE
].join("\n")
