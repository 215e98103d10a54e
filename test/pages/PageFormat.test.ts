/**
 * The page format's parser on its own (no database): every block and option, the problems and the
 * block and line they name, links and their schemes, page parameters, raw HTML kept as a node,
 * fences in lists and unclosed fences.
 */
import { describe, expect, it } from "vitest"
import {
  formatProblems,
  isAllowedUrl,
  type PageBlock,
  pageLink,
  parsePage,
  queryParameters
} from "../../src/services/PageFormat.ts"

const fence = (info: string, body = "") => "```" + info + "\n" + body + (body === "" ? "" : "\n") + "```\n"
const withQuery = (...blocks: ReadonlyArray<string>) =>
  [fence("sql orders", "select status, count(*) as count, sum(total) as total from orders group by status"), ...blocks].join("\n")

/** The one problem of `source`, as its message. */
const problemOf = (source: string): string => {
  const { problems } = parsePage(source)
  expect(problems.map((problem) => problem.message), source).toHaveLength(1)
  return problems[0]!.message
}
const nodesOf = (block: PageBlock | undefined) => (block?.kind === "markdown" ? block.nodes : [])
const kinds = (blocks: ReadonlyArray<PageBlock>) => blocks.map((block) => block.kind)

describe("PageFormat blocks", () => {
  it("reads a dashboard: markdown, a query, a value, a chart and a table in order, with their lines", () => {
    const source = [
      "# Sales",
      "",
      "Orders by status.",
      "",
      fence("sql orders", "select status, count(*) as count, sum(total) as total\nfrom orders group by status"),
      fence("value query=orders column=total label=\"Total sales\" format=currency currency=EUR"),
      fence('chart query=orders type=bar x=status y=count,total title="By status"'),
      "Some text between.",
      "",
      fence("table query=orders columns=status,count page_size=10 title=Orders")
    ].join("\n")
    const { blocks, problems } = parsePage(source)
    expect(problems).toEqual([])
    expect(kinds(blocks)).toEqual(["markdown", "query", "value", "chart", "markdown", "table"])
    expect(blocks[0]).toMatchObject({ kind: "markdown", line: 1 })
    expect(nodesOf(blocks[0]).map((node) => node.type)).toEqual(["heading", "paragraph"])
    expect(blocks[1]).toEqual({
      kind: "query", name: "orders", sql: "select status, count(*) as count, sum(total) as total\nfrom orders group by status", params: [], line: 5
    })
    expect(blocks[2]).toEqual({
      kind: "value", query: "orders", column: "total", label: "Total sales", format: "currency", currency: "EUR", line: 10
    })
    expect(blocks[3]).toEqual({
      kind: "chart", query: "orders", type: "bar", x: "status", y: ["count", "total"], series: undefined, title: "By status", line: 13
    })
    expect(blocks[4]).toMatchObject({ kind: "markdown", line: 16 })
    expect(blocks[5]).toEqual({ kind: "table", query: "orders", columns: ["status", "count"], pageSize: 10, title: "Orders", line: 18 })
  })

  it("gives components their defaults", () => {
    const { blocks, problems } = parsePage(withQuery(fence("table query=orders"), fence("value query=orders"), fence("chart query=orders type=pie x=status y=count")))
    expect(problems).toEqual([])
    expect(blocks[1]).toMatchObject({ kind: "table", columns: undefined, pageSize: 25, title: undefined })
    expect(blocks[2]).toMatchObject({ kind: "value", column: undefined, label: undefined, format: "number", currency: "USD" })
    expect(blocks[3]).toMatchObject({ kind: "chart", type: "pie", series: undefined })
  })

  it("reads chart types, a series, and quoted values with escapes", () => {
    for (const type of ["bar", "line", "area"]) {
      const { blocks, problems } = parsePage(withQuery(fence(`chart query=orders type=${type} x=day y=count series=status`)))
      expect(problems).toEqual([])
      expect(blocks[1]).toMatchObject({ kind: "chart", type, series: "status", y: ["count"] })
    }
    const { blocks } = parsePage(withQuery(fence(String.raw`value query=orders label="Say \"hi\" \\ there"`)))
    expect(blocks[1]).toMatchObject({ kind: "value", label: String.raw`Say "hi" \ there` })
  })

  it("accepts ~~~ fences and other languages as ordinary code", () => {
    const { blocks, problems } = parsePage("~~~sql q\nselect 1\n~~~\n\n```js\nalert(1)\n```\n")
    expect(problems).toEqual([])
    expect(kinds(blocks)).toEqual(["query", "markdown"])
    expect(nodesOf(blocks[1])[0]).toMatchObject({ type: "code", lang: "js", value: "alert(1)" })
  })

  it("keeps raw HTML as html nodes, for the renderer to show as text", () => {
    const { blocks, problems } = parsePage("<script>alert(1)</script>\n\nHello <b>you</b>\n")
    expect(problems).toEqual([])
    const nodes = nodesOf(blocks[0])
    expect(nodes[0]).toMatchObject({ type: "html", value: "<script>alert(1)</script>" })
    expect(JSON.stringify(nodes[1])).toContain('"type":"html","value":"<b>"')
  })

  it("reads page parameters and binds them from the URL's query, null when absent", () => {
    const { blocks, problems } = parsePage(fence("sql by_region params=region,year", "select * from orders where region = $1 and year = $2::int"))
    expect(problems).toEqual([])
    expect(blocks[0]).toMatchObject({ kind: "query", params: ["region", "year"] })
    const query = blocks[0]?.kind === "query" ? blocks[0] : { params: [] }
    expect(queryParameters(query, new URLSearchParams("year=2024&region=EU&other=x"))).toEqual(["EU", "2024"])
    expect(queryParameters(query, new URLSearchParams("region=EU"))).toEqual(["EU", null])
  })

  it("collects link reference definitions for the renderer", () => {
    const { definitions, problems } = parsePage("See [the orders][o].\n\n[o]: page:orders \"Orders\"\n")
    expect(problems).toEqual([])
    expect(definitions).toEqual({ o: { url: "page:orders", title: "Orders" } })
  })
})

describe("PageFormat problems", () => {
  it("a sql block needs a valid unique name, a query and known options", () => {
    expect(problemOf(fence("sql", "select 1"))).toBe("sql block 1 (line 1): the sql block needs a name: ```sql orders_by_status.")
    expect(problemOf(fence("sql Orders", "select 1"))).toMatch(/^sql block 1 \(line 1, Orders\): query name "Orders" must be/)
    expect(problemOf(fence("sql q"))).toBe("sql block 1 (line 1, q): the sql block has no query: write one SELECT.")
    expect(problemOf(fence("sql q limit=3", "select 1"))).toBe('sql block 1 (line 1, q): option "limit" is not known; a sql block takes params.')
    expect(problemOf(fence("sql q params=a,A", "select $1"))).toMatch(/params: "A" is not a parameter name/)
    expect(problemOf(fence("sql q params=a,a", "select $1"))).toMatch(/params names a parameter twice/)
    expect(problemOf(fence("sql q", "select 1") + "\n" + fence("sql q", "select 2")))
      .toBe("sql block 2 (line 5, q): the query name q is already used at line 1; give each query its own name.")
  })

  it("a component needs its required options, known keys and values", () => {
    expect(problemOf(withQuery(fence("chart query=orders type=bar x=status")))).toBe("chart block 2 (line 5, query=orders): option y is missing.")
    expect(problemOf(withQuery(fence("chart query=orders x=status y=count")))).toMatch(/option type is missing/)
    expect(problemOf(withQuery(fence("chart query=orders type=donut x=status y=count"))))
      .toBe('chart block 2 (line 5, query=orders): type "donut" is not a chart type; use bar, line, area, pie.')
    expect(problemOf(withQuery(fence("chart query=orders type=bar x=a,b y=count")))).toMatch(/x takes one column/)
    expect(problemOf(withQuery(fence("chart query=orders type=pie x=status y=count,total")))).toMatch(/a pie chart takes one y column/)
    expect(problemOf(withQuery(fence("chart query=orders type=bar x=day y=count,total series=status")))).toMatch(/with series, give one y column/)
    expect(problemOf(withQuery(fence("table columns=a")))).toBe("table block 2 (line 5): option query is missing.")
    expect(problemOf(withQuery(fence("table query=orders colums=a"))))
      .toBe('table block 2 (line 5, query=orders): option "colums" is not known; a table block takes query, columns, page_size, title.')
    expect(problemOf(withQuery(fence("table query=orders page_size=0")))).toMatch(/page_size must be a whole number from 1 to 500/)
    expect(problemOf(withQuery(fence("table query=orders columns=a,,b")))).toMatch(/empty or too long column name/)
    expect(problemOf(withQuery(fence("value query=orders format=money")))).toMatch(/format "money" is not known; use number, currency, percent/)
    expect(problemOf(withQuery(fence("value query=orders format=currency currency=euro")))).toMatch(/three-letter ISO 4217 code/)
    expect(problemOf(withQuery(fence("value query=orders query=orders")))).toMatch(/option query is given twice/)
    expect(problemOf(withQuery(fence("value query=orders orders")))).toMatch(/"orders" is not an option: write key=value/)
    expect(problemOf(withQuery(fence("value query=orders label=\"Total")))).toMatch(/the quoted value of label has no closing "/)
  })

  it("a component must name a query on the page, and becomes an invalid block in its place", () => {
    const { blocks, problems } = parsePage(withQuery("Text.\n", fence("chart query=order type=bar x=status y=count")))
    expect(problems.map((problem) => problem.message)).toEqual([
      "chart block 2 (line 7, query=order): there is no sql block named order on this page; the page's queries are orders."
    ])
    expect(problems[0]).toMatchObject({ block: "chart", name: "order", index: 2, line: 7 })
    expect(blocks[2]).toEqual({
      kind: "invalid", block: "chart", name: "order", line: 7,
      messages: ["there is no sql block named order on this page; the page's queries are orders"]
    })
    expect(problemOf(fence("table query=orders"))).toMatch(/no sql block named orders on this page; add one: ```sql orders/)
    // A query defined below the component that shows it is on the page all the same.
    expect(parsePage(fence("table query=q") + "\n" + fence("sql q", "select 1")).problems).toEqual([])
  })

  it("refuses link and image schemes other than http(s), mailto, page, table and #anchors", () => {
    const ok = "[a](page:orders) [b](table:customers) [c](https://x.test/a) [d](http://x.test) [e](mailto:a@b.test) [f](#top) [g](page:orders?region=EU)"
    expect(parsePage(ok).problems).toEqual([])
    for (const url of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,x", "vbscript:x", "orders", "/orders", "//evil.test", "page:Orders", "table:a-b"]) {
      const message = problemOf(`Intro\n\n[x](<${url}>)`)
      expect(message, url).toBe(`link (line 3): ${JSON.stringify(url)} is not a page link; use page:slug, table:name, https://…, mailto: or #anchor.`)
    }
    expect(problemOf("[x](java&#115;cript:alert(1))")).toMatch(/"javascript:alert\(1\)" is not a page link/)
    expect(problemOf("<javascript:alert(1)>")).toMatch(/^link \(line 1\)/)
    expect(problemOf("![x](javascript:alert(1))")).toMatch(/^image \(line 1\)/)
    expect(problemOf("[x][r]\n\n[r]: javascript:alert(1)")).toMatch(/^link \(line 3\)/)
    expect(problemOf("- a list\n  - with [x](javascript:x)")).toMatch(/^link \(line 2\)/)
  })

  it("reports a format block inside a list or quote, and leaves other nested code alone", () => {
    const source = withQuery("- item\n\n  ```table query=orders\n  ```\n", "> ```chart query=orders type=bar x=a y=b\n> ```\n", "- code\n\n  ```js\n  x\n  ```\n")
    const { problems, blocks } = parsePage(source)
    expect(problems.map((problem) => problem.message)).toEqual([
      "table block (line 7) is inside a list or quote; start its fence at the beginning of a line, outside lists and quotes.",
      "chart block (line 10) is inside a list or quote; start its fence at the beginning of a line, outside lists and quotes."
    ])
    expect(kinds(blocks)).toEqual(["query", "markdown"])
  })

  it("reports an unclosed fence, which would swallow the rest of the page", () => {
    const source = withQuery(fence("table query=orders").replace(/```\n$/, ""), "More text that is now code.")
    expect(problemOf(source)).toBe("table block 2 (line 5, query=orders): its ``` fence is not closed, so it runs to the end of the page.")
    expect(problemOf("text\n\n```js\nx")).toBe("code block (line 3): its fence is not closed, so it runs to the end of the page.")
    expect(problemOf("````sql q\nselect 1\n```\n")).toMatch(/fence is not closed/)
    expect(parsePage("````sql q\nselect 1\n`````\n").problems).toEqual([])
  })

  it("lists several problems in line order in one message", () => {
    const { problems } = parsePage(withQuery(fence("table query=nope"), "[x](javascript:x)"))
    expect(problems.map((problem) => problem.line)).toEqual([5, 8])
    expect(formatProblems(problems)).toBe(
      "the page source is not valid (2 problems):\n" +
        "- table block 2 (line 5, query=nope): there is no sql block named nope on this page; the page's queries are orders.\n" +
        '- link (line 8): "javascript:x" is not a page link; use page:slug, table:name, https://…, mailto: or #anchor.'
    )
    expect(formatProblems(problems.slice(0, 1))).toMatch(/^the page source is not valid: table block 2/)
  })
})

describe("pageLink", () => {
  it("reads page and table links, and nothing else", () => {
    expect(pageLink("page:orders")).toEqual({ kind: "page", slug: "orders", search: "" })
    expect(pageLink("page:sales-2024?region=EU&year=2024")).toEqual({ kind: "page", slug: "sales-2024", search: "region=EU&year=2024" })
    expect(pageLink("table:customers")).toEqual({ kind: "table", slug: "customers", search: "" })
    for (const url of ["page:", "page:Orders", "table:customers?x=1", "table:a-b", "https://x.test", "pages:orders", " page:orders"]) {
      expect(pageLink(url), url).toBeNull()
    }
    expect(isAllowedUrl("HTTPS://x.test")).toBe(true)
    expect(isAllowedUrl("https:x")).toBe(false)
  })
})
