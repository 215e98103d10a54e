/**
 * The page format (docs/pages.md): CommonMark with fenced blocks that name queries and show their
 * rows. One parser for both sides: the server validates a page's source with it before saving
 * (ChatTools, PageValidation) and the console renders what it returns, so the two cannot disagree.
 * Browser-safe: plain functions over mdast-util-from-markdown, no node modules, no services.
 *
 * API (stable):
 * - `parsePage(source)` → `{ blocks, problems, definitions }`. `blocks` in document order:
 *   `markdown` (the top-level mdast nodes between fenced blocks; raw HTML stays `html` nodes, to be
 *   shown as text), `query` (name, sql, params), `table`, `chart`, `value` (typed options) and
 *   `invalid` (a fenced block with problems, to show in its place). `problems` is empty for a valid
 *   page; each names its block and line in a sentence the model can act on. `definitions` are the
 *   link reference definitions (`[x]: url`) by identifier, for `linkReference` nodes.
 * - `formatProblems(problems)` → one message listing them (tool results, HTTP 400s).
 * - `pageLink(url)` → `{ kind: "page" | "table", slug, search }` for `page:slug?a=b` and
 *   `table:name`, else null; `isAllowedUrl(url)` says whether a link or image may point there.
 * - `queryParameters(query, search)` → the values of `$1…$n` from the page URL's query string.
 *
 * Block grammar: ```` ```sql name [params=a,b] ```` then one SELECT; ```` ```table query=q
 * [columns=a,b] [page_size=25] [title=…] ````; ```` ```chart query=q type=bar|line|area|pie x=c
 * y=c1,c2 [series=c] [title=…] ````; ```` ```value query=q [column=c] [label=…]
 * [format=number|currency|percent] [currency=EUR] ````. Values may be quoted ("…", with \" and \\).
 * `format=percent` shows a fraction (0.25 → 25 %); bigint and numeric values arrive as strings.
 */
import type { Code, Definition, Nodes, Root, RootContent } from "mdast"
import { fromMarkdown } from "mdast-util-from-markdown"

/** Query, column and parameter names: what PostgreSQL takes unquoted. */
export const NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/
/** Page slugs, as sys.create_page accepts them. */
export const SLUG_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/
/** Column names in components may be any result column: anything but a comma, up to 63 characters. */
const COLUMN_PATTERN = /^[^,\s][^,]{0,62}$/

export const CHART_TYPES = ["bar", "line", "area", "pie"] as const
export type ChartType = (typeof CHART_TYPES)[number]
export const VALUE_FORMATS = ["number", "currency", "percent"] as const
export type ValueFormat = (typeof VALUE_FORMATS)[number]
/** Fenced blocks of the format on one page: each query is checked on save and run on view. */
export const MAX_PAGE_BLOCKS = 100
export const DEFAULT_PAGE_SIZE = 25
export const MAX_PAGE_SIZE = 500
/** The fenced block kinds the format gives a meaning to; other languages are ordinary code blocks. */
export const BLOCK_KINDS = ["sql", "table", "chart", "value"] as const
export type BlockKind = (typeof BLOCK_KINDS)[number]

export interface MarkdownBlock {
  readonly kind: "markdown"
  /** Top-level mdast nodes, with positions. */
  readonly nodes: ReadonlyArray<RootContent>
  readonly line: number
}

export interface QueryBlock {
  readonly kind: "query"
  readonly name: string
  readonly sql: string
  /** The page URL parameters bound to `$1`, `$2`, … in this order. */
  readonly params: ReadonlyArray<string>
  /** The line of the opening fence; the SQL starts on the next one. */
  readonly line: number
}

export interface TableBlock {
  readonly kind: "table"
  readonly query: string
  /** The columns to show, in this order; undefined: all of them. */
  readonly columns: ReadonlyArray<string> | undefined
  readonly pageSize: number
  readonly title: string | undefined
  readonly line: number
}

export interface ChartBlock {
  readonly kind: "chart"
  readonly query: string
  readonly type: ChartType
  readonly x: string
  readonly y: ReadonlyArray<string>
  readonly series: string | undefined
  readonly title: string | undefined
  readonly line: number
}

export interface ValueBlock {
  readonly kind: "value"
  readonly query: string
  /** The column of the first row to show; undefined: the first column. */
  readonly column: string | undefined
  readonly label: string | undefined
  readonly format: ValueFormat
  /** ISO 4217 code for `format=currency`. */
  readonly currency: string
  readonly line: number
}

/** A fenced block of the format that has problems: shown in its place with what is wrong. */
export interface InvalidBlock {
  readonly kind: "invalid"
  readonly block: BlockKind
  readonly name: string | undefined
  readonly messages: ReadonlyArray<string>
  readonly line: number
}

export type PageBlock = MarkdownBlock | QueryBlock | TableBlock | ChartBlock | ValueBlock | InvalidBlock

export interface PageProblem {
  /** `sql`, `table`, `chart`, `value`, `link` or `fence` (an unclosed or misplaced fence). */
  readonly block: BlockKind | "link" | "fence"
  /** The query's name, or the component's query, when it has one. */
  readonly name: string | undefined
  /** 1-based position among the page's fenced blocks of the format (0 for links). */
  readonly index: number
  readonly line: number
  /** One sentence, starting with the block and its line: "chart block (line 12, query orders): …". */
  readonly message: string
}

export interface ParsedPage {
  readonly blocks: ReadonlyArray<PageBlock>
  readonly problems: ReadonlyArray<PageProblem>
  readonly definitions: Readonly<Record<string, Pick<Definition, "url" | "title">>>
}

export interface PageLink {
  readonly kind: "page" | "table"
  readonly slug: string
  /** The query string after `?` (page links only), "" when there is none. */
  readonly search: string
}

const isBlockKind = (lang: string): lang is BlockKind => (BLOCK_KINDS as ReadonlyArray<string>).includes(lang)

/** `page:orders?region=EU` → page orders; `table:customers` → table customers; else null. */
export const pageLink = (url: string): PageLink | null => {
  const match = /^(page|table):([^?#]*)(?:\?([^#]*))?$/.exec(url)
  if (match === null) return null
  const kind = match[1] as "page" | "table"
  const slug = match[2]!
  if (kind === "page" ? !SLUG_PATTERN.test(slug) : !NAME_PATTERN.test(slug) || match[3] !== undefined) return null
  return { kind, slug, search: match[3] ?? "" }
}

const EXTERNAL = /^(https?:\/\/|mailto:)/i

/** Links and images may point to http(s), mailto, page:, table: or a `#fragment`, nothing else. */
export const isAllowedUrl = (url: string): boolean =>
  EXTERNAL.test(url) || url.startsWith("#") || pageLink(url) !== null

/** The values of `$1…$n` for a query: its `params` looked up in the page URL's query (null if absent). */
export const queryParameters = (
  query: Pick<QueryBlock, "params">,
  search: { readonly get: (name: string) => string | null }
): ReadonlyArray<string | null> => query.params.map((name) => search.get(name))

export const formatProblems = (problems: ReadonlyArray<PageProblem>): string =>
  problems.length === 1
    ? `the page source is not valid: ${problems[0]!.message}`
    : `the page source is not valid (${problems.length} problems):\n${problems.map((problem) => `- ${problem.message}`).join("\n")}`

type Options = ReadonlyArray<readonly [key: string, value: string]>

/** `a=1 b="two words"` → pairs; a bare word is a pair with an empty key (the sql block's name). */
const tokenize = (meta: string): { readonly options: Options; readonly error: string | undefined } => {
  const options: Array<readonly [string, string]> = []
  let index = 0
  while (index < meta.length) {
    while (index < meta.length && /\s/.test(meta[index]!)) index++
    if (index >= meta.length) break
    const keyMatch = /^([^\s=]+)(=?)/.exec(meta.slice(index))!
    index += keyMatch[0].length
    if (keyMatch[2] === "") {
      options.push(["", keyMatch[1]!])
      continue
    }
    let value = ""
    if (meta[index] === '"') {
      index++
      let closed = false
      while (index < meta.length) {
        const char = meta[index]!
        if (char === "\\" && index + 1 < meta.length) {
          value += meta[index + 1]
          index += 2
        } else if (char === '"') {
          index++
          closed = true
          break
        } else {
          value += char
          index++
        }
      }
      if (!closed) return { options, error: `the quoted value of ${keyMatch[1]} has no closing "` }
    } else {
      const valueMatch = /^[^\s]*/.exec(meta.slice(index))!
      value = valueMatch[0]
      index += value.length
    }
    options.push([keyMatch[1]!, value])
  }
  return { options, error: undefined }
}

const list = (value: string): ReadonlyArray<string> => value.split(",").map((part) => part.trim())

const KEYS: Record<BlockKind, ReadonlyArray<string>> = {
  sql: ["params"],
  table: ["query", "columns", "page_size", "title"],
  chart: ["query", "type", "x", "y", "series", "title"],
  value: ["query", "column", "label", "format", "currency"]
}

const REQUIRED: Record<BlockKind, ReadonlyArray<string>> = {
  sql: [],
  table: ["query"],
  chart: ["query", "type", "x", "y"],
  value: ["query"]
}

const quote = (value: string) => JSON.stringify(value)

const isFenceLine = (line: string, fence: string): boolean => {
  const match = /^[\s>]*(`{3,}|~{3,})\s*$/.exec(line)
  return match !== null && match[1]![0] === fence[0] && match[1]!.length >= fence.length
}

/** CommonMark ends an unclosed fence at the end of its container: it then swallows the rest silently. */
const isUnclosed = (source: string, node: Code): boolean => {
  const start = node.position?.start.offset
  const end = node.position?.end.offset
  if (start === undefined || end === undefined) return false
  const lines = source.slice(start, end).split(/\r\n|\r|\n/)
  const fence = /^\s*(`{3,}|~{3,})/.exec(lines[0] ?? "")?.[1]
  if (fence === undefined) return false // an indented code block
  return lines.length < 2 || !isFenceLine(lines.at(-1)!, fence)
}

/**
 * The options as written on the fence line: CommonMark would take the backslashes of `\"` inside
 * a quoted value for its own escapes, so `node.meta` is not used.
 */
const rawMeta = (source: string, node: Code): string => {
  const start = node.position?.start.offset
  if (start === undefined) return node.meta ?? ""
  const first = source.slice(start).split(/\r\n|\r|\n/, 1)[0] ?? ""
  return first.replace(/^\s*(`{3,}|~{3,})\s*\S*/, "").trim()
}

interface Context {
  readonly source: string
  readonly problems: Array<PageProblem>
  index: number
}

/** Reads one fenced block of the format into its block; problems go to `context` and the block is `invalid`. */
const fencedBlock = (context: Context, node: Code, kind: BlockKind): PageBlock => {
  const line = node.position?.start.line ?? 0
  const index = ++context.index
  const messages: Array<string> = []
  const { options, error } = tokenize(rawMeta(context.source, node))
  const given = new Map<string, string>()
  let name: string | undefined
  if (error !== undefined) messages.push(error)
  for (const [key, value] of options) {
    if (key === "" && kind === "sql" && name === undefined) {
      name = value
    } else if (key === "") {
      messages.push(`${quote(value)} is not an option: write key=value (${KEYS[kind].join(", ")})`)
    } else if (!KEYS[kind].includes(key)) {
      messages.push(`option ${quote(key)} is not known; a ${kind} block takes ${KEYS[kind].join(", ")}`)
    } else if (given.has(key)) {
      messages.push(`option ${key} is given twice`)
    } else {
      given.set(key, value)
    }
  }
  for (const key of REQUIRED[kind]) {
    if (!given.has(key)) messages.push(`option ${key} is missing`)
  }
  const query = kind === "sql" ? name : given.get("query")
  if (kind === "sql") {
    if (name === undefined) messages.push("the sql block needs a name: ```sql orders_by_status")
    else if (!NAME_PATTERN.test(name)) messages.push(`query name ${quote(name)} must be a lowercase letter or _ then lowercase letters, digits or _`)
    if (node.value.trim() === "") messages.push("the sql block has no query: write one SELECT")
  } else if (query !== undefined && !NAME_PATTERN.test(query)) {
    messages.push(`query=${quote(query)} is not a query name`)
  }
  const columns = (key: string, many: boolean): ReadonlyArray<string> | undefined => {
    const value = given.get(key)
    if (value === undefined) return undefined
    const names = list(value)
    if (!many && names.length > 1) messages.push(`${key} takes one column, not ${quote(value)}`)
    const bad = names.find((column) => !COLUMN_PATTERN.test(column))
    if (bad !== undefined) messages.push(`${key}=${quote(value)} has an empty or too long column name`)
    return names
  }
  if (index > MAX_PAGE_BLOCKS) messages.push(`a page has at most ${MAX_PAGE_BLOCKS} sql, table, chart and value blocks; split it into pages`)
  if (isUnclosed(context.source, node)) messages.push("its ``` fence is not closed, so it runs to the end of the page")
  const problem = (message: string) =>
    context.problems.push({
      block: kind,
      name: query,
      index,
      line,
      message: `${kind} block ${index} (line ${line}${query === undefined ? "" : kind === "sql" ? `, ${query}` : `, query=${query}`}): ${message}.`
    })
  let block: PageBlock | undefined
  switch (kind) {
    case "sql": {
      const params = given.has("params") ? list(given.get("params")!) : []
      const badParam = params.find((param) => !NAME_PATTERN.test(param))
      if (badParam !== undefined) messages.push(`params: ${quote(badParam)} is not a parameter name (lowercase letters, digits, _)`)
      if (new Set(params).size !== params.length) messages.push("params names a parameter twice")
      block = { kind: "query", name: name ?? "", sql: node.value, params, line }
      break
    }
    case "table": {
      const size = given.get("page_size")
      const pageSize = size === undefined ? DEFAULT_PAGE_SIZE : Number(size)
      if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
        messages.push(`page_size must be a whole number from 1 to ${MAX_PAGE_SIZE}, not ${quote(size ?? "")}`)
      }
      block = { kind: "table", query: query ?? "", columns: columns("columns", true), pageSize, title: given.get("title"), line }
      break
    }
    case "chart": {
      const type = given.get("type")
      if (type !== undefined && !(CHART_TYPES as ReadonlyArray<string>).includes(type)) {
        messages.push(`type ${quote(type)} is not a chart type; use ${CHART_TYPES.join(", ")}`)
      }
      const x = columns("x", false)
      const y = columns("y", true) ?? []
      const series = columns("series", false)
      if (type === "pie" && (y.length > 1 || series !== undefined)) messages.push("a pie chart takes one y column and no series")
      else if (series !== undefined && y.length > 1) messages.push("with series, give one y column")
      block = {
        kind: "chart", query: query ?? "", type: type as ChartType, x: x?.[0] ?? "", y, series: series?.[0], title: given.get("title"), line
      }
      break
    }
    case "value": {
      const format = given.get("format") ?? "number"
      if (!(VALUE_FORMATS as ReadonlyArray<string>).includes(format)) {
        messages.push(`format ${quote(format)} is not known; use ${VALUE_FORMATS.join(", ")}`)
      }
      const currency = given.get("currency") ?? "USD"
      if (!/^[A-Z]{3}$/.test(currency)) messages.push(`currency ${quote(currency)} must be a three-letter ISO 4217 code such as EUR`)
      block = {
        kind: "value", query: query ?? "", column: columns("column", false)?.[0], label: given.get("label"),
        format: format as ValueFormat, currency, line
      }
      break
    }
  }
  for (const message of messages) problem(message)
  return messages.length === 0 ? block : { kind: "invalid", block: kind, name: query, messages, line }
}

const children = (node: Nodes): ReadonlyArray<Nodes> => ("children" in node ? (node.children as ReadonlyArray<Nodes>) : [])

/** Checks links and images anywhere, and reports the format's fences nested in lists or quotes. */
const checkNested = (context: Context, root: Root) => {
  const stack: Array<{ readonly node: Nodes; readonly nested: boolean }> = root.children.map((node) => ({ node, nested: false }))
  while (stack.length > 0) {
    const { node, nested } = stack.pop()!
    const line = node.position?.start.line ?? 0
    if (node.type === "link" || node.type === "image" || node.type === "definition") {
      if (!isAllowedUrl(node.url)) {
        const what = node.type === "image" ? "image" : "link"
        context.problems.push({
          block: "link", name: undefined, index: 0, line,
          message: `${what} (line ${line}): ${quote(node.url)} is not a page link; use page:slug, table:name, https://…, mailto: or #anchor.`
        })
      }
    } else if (node.type === "code" && nested && node.lang !== null && node.lang !== undefined && isBlockKind(node.lang.toLowerCase())) {
      context.problems.push({
        block: "fence", name: undefined, index: 0, line,
        message: `${node.lang} block (line ${line}) is inside a list or quote; start its fence at the beginning of a line, outside lists and quotes.`
      })
    } else if (node.type === "code" && isUnclosed(context.source, node)) {
      context.problems.push({
        block: "fence", name: undefined, index: 0, line,
        message: `code block (line ${line}): its fence is not closed, so it runs to the end of the page.`
      })
    }
    for (const child of children(node)) stack.push({ node: child, nested: true })
  }
}

export const parsePage = (source: string): ParsedPage => {
  const root = fromMarkdown(source)
  const context: Context = { source, problems: [], index: 0 }
  const blocks: Array<PageBlock> = []
  const definitions: Record<string, Pick<Definition, "url" | "title">> = {}
  let markdown: Array<RootContent> = []
  const flush = () => {
    if (markdown.length > 0) blocks.push({ kind: "markdown", nodes: markdown, line: markdown[0]!.position?.start.line ?? 0 })
    markdown = []
  }
  for (const node of root.children) {
    const kind = node.type === "code" ? node.lang?.toLowerCase() : undefined
    if (node.type === "code" && kind !== undefined && isBlockKind(kind)) {
      flush()
      blocks.push(fencedBlock(context, node, kind))
    } else {
      if (node.type === "definition") definitions[node.identifier] ??= { url: node.url, title: node.title ?? null }
      markdown.push(node)
    }
  }
  flush()
  checkNested(context, { ...root, children: root.children.filter((node) => node.type !== "code" || !isBlockKind(node.lang?.toLowerCase() ?? "")) })
  // Names: unique queries, and components that show a query on this page; a block that fails here is invalid too.
  const queries = new Map<string, number>()
  let index = 0
  const refuse = (at: number, block: BlockKind, name: string, message: string) => {
    const line = blocks[at]!.line
    const full = `${block} block ${index} (line ${line}, ${block === "sql" ? name : `query=${name}`}): ${message}.`
    context.problems.push({ block, name, index, line, message: full })
    blocks[at] = { kind: "invalid", block, name, messages: [message], line }
  }
  for (const [at, block] of blocks.entries()) {
    if (block.kind === "markdown") continue
    index++
    const name = block.kind === "query" ? block.name : block.kind === "invalid" && block.block === "sql" ? block.name : undefined
    if (name === undefined || name === "") continue
    const first = queries.get(name)
    if (first === undefined) queries.set(name, block.line)
    else if (block.kind === "query") refuse(at, "sql", name, `the query name ${name} is already used at line ${first}; give each query its own name`)
  }
  index = 0
  for (const [at, block] of blocks.entries()) {
    if (block.kind === "markdown") continue
    index++
    if ((block.kind === "table" || block.kind === "chart" || block.kind === "value") && !queries.has(block.query)) {
      const known = [...queries.keys()]
      refuse(at, block.kind, block.query, `there is no sql block named ${block.query} on this page${
        known.length === 0 ? "; add one: ```sql " + block.query : `; the page's queries are ${known.join(", ")}`}`)
    }
  }
  context.problems.sort((a, b) => a.line - b.line)
  return { blocks, problems: context.problems, definitions }
}
