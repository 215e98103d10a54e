/**
 * A page's source rendered (docs/pages.md): its markdown as elements, its queries run as the viewer
 * through POST /sql in the page's app (parameters from the page URL's query, bound, never spliced),
 * and its tables, charts and values drawn from their rows. A block that fails (a query error, a
 * column the rows do not have, a block with problems) shows its error in its place; the rest
 * renders. The queries run when the page opens, when its source or parameters change, and on
 * Refresh. Nothing is inserted as HTML.
 *
 * Props are stable (the chat's `preview_page` renders with it too).
 */
import { useEffect, useMemo, useState } from "preact/hooks"
import {
  type ChartBlock,
  type PageBlock,
  pageLink,
  parsePage,
  queryParameters,
  type QueryBlock,
  type TableBlock,
  type ValueBlock
} from "../../../src/services/PageFormat.ts"
import { describe, type Introspection, introspect, pageQuery } from "../api.ts"
import { labelOf } from "../navigation.ts"
import { pagePath, tablePath } from "../paths.ts"
import type { Column } from "../table/model.ts"
import { Value } from "../table/Value.tsx"
import { Chart } from "./Chart.tsx"
import { chartData } from "./chartModel.ts"
import { formatValue, resultColumn } from "./format.ts"
import { type LinkTarget, MarkdownNode, type MarkdownContext } from "./Markdown.tsx"

export interface PageViewProps {
  /** The page's source, in the page format. */
  readonly source: string
  /** The app the page belongs to: its queries run with this X-App-Schema, its links go to its screens. */
  readonly appSchema: string
  /** The page URL's query: the values of the queries' `params` (absent ones are NULL). */
  readonly params?: URLSearchParams | undefined
}

type Row = Readonly<Record<string, unknown>>
type Result = { readonly rows: ReadonlyArray<Row> } | { readonly error: string }

const EXTERNAL = /^(https?:\/\/|mailto:)/i

const linkTargetIn = (appSchema: string) => (url: string): LinkTarget => {
  const link = pageLink(url)
  if (link !== null) {
    return { kind: "console", to: link.kind === "page" ? `${pagePath(appSchema, link.slug)}${link.search === "" ? "" : `?${link.search}`}` : tablePath(appSchema, link.slug) }
  }
  return EXTERNAL.test(url) || url.startsWith("#") ? { kind: "external", href: url } : { kind: "none" }
}

const BlockError = (props: { readonly children: string }) => <p role="alert" class="message error block-error">{props.children}</p>

export const PageView = (props: PageViewProps) => {
  const parsed = useMemo(() => parsePage(props.source), [props.source])
  const queries = parsed.blocks.filter((block): block is QueryBlock => block.kind === "query")
  const search = props.params ?? new URLSearchParams()
  const [refreshes, setRefreshes] = useState(0)
  const [results, setResults] = useState<ReadonlyMap<string, Result>>(new Map())
  const [running, setRunning] = useState(true)
  // Undefined until introspection answers (null if it fails): values are shown by display type from the start.
  const [schema, setSchema] = useState<Introspection | null | undefined>(undefined)

  // What the queries are run with: they run again only when it changes.
  const statements = queries.map((query) => ({ name: query.name, sql: query.sql, params: queryParameters(query, search) }))
  const runKey = JSON.stringify([props.appSchema, statements, refreshes])
  useEffect(() => {
    let live = true
    setRunning(true)
    Promise.all(statements.map((statement) =>
      pageQuery(statement.sql, statement.params, props.appSchema).then(
        (rows): [string, Result] => [statement.name, { rows: rows as ReadonlyArray<Row> }],
        (error): [string, Result] => [statement.name, { error: describe(error) }]
      )
    )).then((entries) => {
      if (!live) return
      setResults(new Map(entries))
      setRunning(false)
    })
    return () => {
      live = false
    }
  }, [runKey])

  // Column labels and display types come from the app's metadata (introspection, cached by the server).
  useEffect(() => {
    let live = true
    introspect(props.appSchema).then((answer) => live && setSchema(answer), () => live && setSchema(null))
    return () => {
      live = false
    }
  }, [props.appSchema, refreshes])

  const context: MarkdownContext = {
    linkTarget: linkTargetIn(props.appSchema),
    definitions: parsed.definitions,
    headingShift: 1
  }
  const columnOf = (name: string) => resultColumn(name, schema ?? null)
  // A query that no component shows has its failure said in its own place.
  const shown = new Set(parsed.blocks.flatMap((block) => (block.kind === "table" || block.kind === "chart" || block.kind === "value" ? [block.query] : [])))
  const pageProblems = parsed.problems.filter((problem) => problem.block === "link" || problem.block === "fence")

  const render = (block: PageBlock, index: number) => {
    switch (block.kind) {
      case "markdown":
        return <MarkdownNode key={index} node={{ type: "root", children: [...block.nodes] }} context={context} />
      case "query": {
        const result = results.get(block.name)
        return result !== undefined && "error" in result && !shown.has(block.name)
          ? <BlockError key={index}>{`The query ${block.name} failed: ${result.error}`}</BlockError>
          : null
      }
      case "invalid":
        return <BlockError key={index}>{`The ${block.block} block at line ${block.line} cannot be shown: ${block.messages.join("; ")}.`}</BlockError>
      case "table":
      case "chart":
      case "value": {
        const result = results.get(block.query)
        if (result === undefined || schema === undefined) return <p key={index} class="hint">Loading {block.query}…</p>
        if ("error" in result) return <BlockError key={index}>{`The query ${block.query} failed: ${result.error}`}</BlockError>
        if (block.kind === "table") return <PageTable key={`${index}:${block.query}`} block={block} rows={result.rows} columnOf={columnOf} />
        if (block.kind === "chart") return <PageChart key={index} block={block} rows={result.rows} columnOf={columnOf} />
        return <PageValue key={index} block={block} rows={result.rows} columnOf={columnOf} />
      }
    }
  }

  return (
    <div class="page">
      <div class="page-toolbar">
        <button type="button" class="secondary" onClick={() => setRefreshes((count) => count + 1)} disabled={running && refreshes > 0}>Refresh</button>
        <span role="status" class="hint">{running ? "Running the page's queries…" : ""}</span>
      </div>
      {pageProblems.length > 0
        ? (
          <div role="alert" class="message error">
            <p>This page has problems:</p>
            <ul>{pageProblems.map((problem, index) => <li key={index}>{problem.message}</li>)}</ul>
          </div>
        )
        : null}
      {parsed.blocks.map(render)}
    </div>
  )
}

/** The columns of `rows` that a block names and the rows lack: said as the block's error. */
const missingColumns = (rows: ReadonlyArray<Row>, names: ReadonlyArray<string>): string | null => {
  const first = rows[0]
  if (first === undefined) return null
  const missing = names.filter((name) => !(name in first))
  return missing.length === 0 ? null : `The query's rows have no column ${missing.join(", ")} (they have ${Object.keys(first).join(", ") || "none"}).`
}

const PageValue = (props: { readonly block: ValueBlock; readonly rows: ReadonlyArray<Row>; readonly columnOf: (name: string) => Column }) => {
  const { block, rows } = props
  const first = rows[0]
  const column = block.column ?? Object.keys(first ?? {})[0] ?? ""
  const missing = block.column === undefined ? null : missingColumns(rows, [block.column])
  if (missing !== null) return <BlockError>{missing}</BlockError>
  const label = block.label ?? props.columnOf(column).label
  return (
    <figure class="value">
      <figcaption>{label}</figcaption>
      <p class="number">{first === undefined ? "—" : formatValue(first[column], block.format, block.currency)}</p>
    </figure>
  )
}

const PageChart = (props: { readonly block: ChartBlock; readonly rows: ReadonlyArray<Row>; readonly columnOf: (name: string) => Column }) => {
  const { block } = props
  const data = chartData(props.rows, { type: block.type, x: block.x, y: block.y, series: block.series ?? null }, props.columnOf)
  if ("error" in data) return <BlockError>{data.error}</BlockError>
  return <Chart data={data} title={block.title ?? `${data.yLabel} by ${data.xLabel}`} />
}

const PageTable = (props: { readonly block: TableBlock; readonly rows: ReadonlyArray<Row>; readonly columnOf: (name: string) => Column }) => {
  const { block, rows } = props
  const [page, setPage] = useState(0)
  const names = block.columns ?? Object.keys(rows[0] ?? {})
  const missing = block.columns === undefined ? null : missingColumns(rows, block.columns)
  if (missing !== null) return <BlockError>{missing}</BlockError>
  const columns = names.map(props.columnOf)
  const title = block.title ?? labelOf(block.query)
  const pages = Math.max(1, Math.ceil(rows.length / block.pageSize))
  const current = Math.min(page, pages - 1)
  const shown = rows.slice(current * block.pageSize, (current + 1) * block.pageSize)
  return (
    <div class="page-table">
      <div class="table-scroll">
        <table>
          <caption>{title}{pages > 1 ? `, page ${current + 1} of ${pages}` : ""}</caption>
          <thead>
            <tr>{columns.map((column) => <th key={column.name} scope="col">{column.label}</th>)}</tr>
          </thead>
          <tbody>
            {shown.map((row, index) => (
              <tr key={index}>{columns.map((column) => <td key={column.name} class={`type-${column.displayType}`}><Value column={column} row={row} /></td>)}</tr>
            ))}
          </tbody>
        </table>
      </div>
      {rows.length === 0 ? <p>No rows.</p> : null}
      {pages > 1
        ? (
          <nav aria-label={`Pages of ${title}`} class="pager">
            <button type="button" class="secondary" disabled={current === 0} onClick={() => setPage(current - 1)}>Previous page</button>
            <span>Page {current + 1} of {pages}</span>
            <button type="button" class="secondary" disabled={current + 1 >= pages} onClick={() => setPage(current + 1)}>Next page</button>
          </nav>
        )
        : null}
    </div>
  )
}
