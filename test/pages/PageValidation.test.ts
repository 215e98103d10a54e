/**
 * Page sources saved through POST /sql (sys.create_page, sys.update_page) are checked against the
 * page format first: a valid page is saved, a page with a problem is a 400 naming its block and
 * line and nothing is saved, whether the source is a bound parameter or a string literal; each
 * query must pass the SQL guard as one read-only SELECT; a source written as an expression is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { BUSINESS_FIXTURES, ddl, type PlainErrorBody, type SqlResult } from "../sql/fixtures.ts"

let stack: AuthStack
let owner: SignIn

beforeAll(async () => {
  stack = await startAuthStack()
  await ddl(stack, BUSINESS_FIXTURES)
  owner = await signedIn(stack, "owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

let counter = 0
const freshSlug = () => `page-${++counter}`

const sql = <T = SqlResult>(text: string, params: ReadonlyArray<unknown> = []) =>
  post<T>(stack.main.url, "/sql", { sql: text, params }, { token: owner.token })

const sourceOf = async (slug: string): Promise<string | undefined> => {
  const found = await sql<SqlResult<{ source: string }>>("SELECT source FROM sys.pages_v WHERE slug = $1", [slug])
  expect(found.status).toBe(200)
  return found.body.rows[0]?.source
}

const fence = (info: string, body = "") => "```" + info + "\n" + body + (body === "" ? "" : "\n") + "```\n"

const DASHBOARD = [
  "# Items",
  "",
  "Back to [orders](page:orders) or see [all items](table:items).",
  "",
  fence("sql totals", "SELECT count(*) AS items, sum(price) AS worth FROM items"),
  fence("value query=totals column=worth label=\"Stock worth\" format=currency"),
  fence("sql by_name params=name", "SELECT name, qty FROM items WHERE $1::text IS NULL OR name = $1 ORDER BY name"),
  fence("chart query=by_name type=bar x=name y=qty"),
  fence("table query=by_name page_size=10")
].join("\n")

/** Creates a page with `source` as $3; the answer. */
const create = (slug: string, source: unknown) => sql<SqlResult | PlainErrorBody>("SELECT sys.create_page($1, 'T', $2)", [slug, source])

/** The 400 of saving `source` (as a parameter, then as a literal): its message; nothing was saved. */
const refusal = async (source: string): Promise<string> => {
  const slug = freshSlug()
  const byParameter = await create(slug, source)
  expect(byParameter.status, source).toBe(400)
  const message = (byParameter.body as PlainErrorBody).error
  const byLiteral = await sql<PlainErrorBody>(`SELECT sys.create_page('${slug}', 'T', $body$${source}$body$)`)
  expect(byLiteral.status).toBe(400)
  expect(byLiteral.body.error).toBe(message)
  expect(await sourceOf(slug)).toBeUndefined()
  return message
}

describe("valid pages are saved", () => {
  it("a dashboard with a value, a chart and a table, as a parameter and as a literal", async () => {
    const slug = freshSlug()
    expect((await create(slug, DASHBOARD)).status).toBe(200)
    expect(await sourceOf(slug)).toBe(DASHBOARD)
    const literal = freshSlug()
    expect((await sql(`SELECT sys.create_page('${literal}', 'T', $body$${DASHBOARD}$body$::text)`)).status).toBe(200)
    expect(await sourceOf(literal)).toBe(DASHBOARD)
    // By name, and NULL (keep the source) on update.
    const updated = "# Updated\n\n" + DASHBOARD
    expect((await sql("SELECT * FROM sys.update_page(p_source => $1, p_slug => $2, p_title => NULL)", [updated, slug])).status).toBe(200)
    expect(await sourceOf(slug)).toBe(updated)
    expect((await sql("SELECT sys.update_page($1, 'New title', NULL)", [slug])).status).toBe(200)
    expect(await sourceOf(slug)).toBe(updated)
  })

  it("plain text, HTML (kept as text by the renderer) and an empty page", async () => {
    for (const source of ["", "just text", "<p>hi</p>", "# Title\n\n```js\nconsole.log(1)\n```\n"]) {
      expect((await create(freshSlug(), source)).status, source).toBe(200)
    }
  })

  it("a query that fails only when it runs (an unknown column) is saved: the page shows its error in place", async () => {
    const slug = freshSlug()
    const source = fence("sql gone", "SELECT no_such_column FROM items") + fence("table query=gone")
    expect((await create(slug, source)).status).toBe(200)
    expect(await sourceOf(slug)).toBe(source)
  })
})

describe("a page with a problem is a 400 naming the block, and nothing is saved", () => {
  it("the format's own rules", async () => {
    expect(await refusal(fence("sql totals", "SELECT 1") + fence("chart query=totals type=donut x=a y=b"))).toBe(
      'the page source is not valid: chart block 2 (line 4, query=totals): type "donut" is not a chart type; use bar, line, area, pie.'
    )
    expect(await refusal(fence("sql totals", "SELECT 1") + fence("table query=total"))).toBe(
      "the page source is not valid: table block 2 (line 4, query=total): there is no sql block named total on this page; the page's queries are totals."
    )
    expect(await refusal(fence("value query=totals colour=red") + fence("sql totals", "SELECT 1"))).toMatch(
      /^the page source is not valid: value block 1 \(line 1, query=totals\): option "colour" is not known/
    )
    expect(await refusal(fence("chart query=totals type=bar x=a") + fence("sql totals", "SELECT 1"))).toMatch(/chart block 1 \(line 1, query=totals\): option y is missing/)
    expect(await refusal(fence("sql", "SELECT 1"))).toMatch(/sql block 1 \(line 1\): the sql block needs a name/)
    expect(await refusal("[click](javascript:alert(1))")).toMatch(/link \(line 1\): "javascript:alert\(1\)" is not a page link/)
    expect(await refusal("text\n\n" + fence("sql totals", "SELECT 1").replace(/```\n$/, ""))).toMatch(/sql block 1 \(line 3, totals\): its ``` fence is not closed/)
  })

  it("each query passes the SQL guard as one read-only SELECT", async () => {
    expect(await refusal("# Bad\n\n" + fence("sql wipe", "UPDATE items SET qty = 0"))).toBe(
      "the page source is not valid: sql block 1 (line 3, wipe): a page query must be one SELECT, not an UPDATE."
    )
    expect(await refusal(fence("sql two", "SELECT 1; SELECT 2"))).toBe(
      "the page source is not valid: sql block 1 (line 1, two): exactly one statement is allowed per request."
    )
    expect(await refusal(fence("sql gone", "WITH d AS (DELETE FROM items RETURNING id) SELECT count(*) FROM d"))).toMatch(
      /sql block 1 \(line 1, gone\): a page query only reads: no INSERT, UPDATE or DELETE in its WITH/
    )
    expect(await refusal(fence("sql sneaky", "SELECT sys.drop_table('items')"))).toMatch(/sql block 1 \(line 1, sneaky\): a page query only reads: it may not call sys functions/)
    expect(await refusal(fence("sql settings", "SELECT set_config('role', 'postgres', false)"))).toMatch(/sql block 1 \(line 1, settings\): function set_config is not allowed/)
    expect(await refusal(fence("sql bad", "SELECT 1\nFROM items\nWHER x"))).toMatch(/^the page source is not valid: sql block 1 \(line 4, bad\): syntax error at or near "x"/)
    expect(await refusal(fence("sql unbound", "SELECT * FROM items WHERE name = $1"))).toMatch(
      /sql block 1 \(line 1, unbound\): it uses \$1 but its params option names 0 page parameters/
    )
  })

  it("several problems are listed, each with its block", async () => {
    const message = await refusal(fence("sql a", "DELETE FROM items") + fence("table query=b"))
    expect(message).toBe(
      "the page source is not valid (2 problems):\n" +
        "- sql block 1 (line 1, a): a page query must be one SELECT, not a DELETE.\n" +
        "- table block 2 (line 4, query=b): there is no sql block named b on this page; the page's queries are a."
    )
  })

  it("an update is checked the same way, and leaves the page as it was", async () => {
    const slug = freshSlug()
    expect((await create(slug, DASHBOARD)).status).toBe(200)
    const refused = await sql<PlainErrorBody>("SELECT sys.update_page($1, NULL, $2)", [slug, fence("sql x", "DELETE FROM items")])
    expect(refused.status).toBe(400)
    expect(refused.body.error).toMatch(/sql block 1 \(line 1, x\): a page query must be one SELECT, not a DELETE/)
    expect(await sourceOf(slug)).toBe(DASHBOARD)
  })

  it("a source that is neither a literal nor a parameter is refused, asking for one", async () => {
    const slug = freshSlug()
    for (const text of [
      `SELECT sys.create_page('${slug}', 'T', 'a' || 'b')`,
      `SELECT sys.create_page('${slug}', 'T', s) FROM (VALUES ('x')) AS v(s)`,
      `SELECT sys.update_page(p_slug => '${slug}', p_source => upper('x'), p_title => NULL)`
    ]) {
      const refused = await sql<PlainErrorBody>(text)
      expect(refused.status, text).toBe(400)
      expect(refused.body).toEqual({
        error: "pass the page source of sys.create_page / sys.update_page as a string literal or a $n parameter, so it can be checked"
      })
    }
    expect(await sourceOf(slug)).toBeUndefined()
  })
})

describe("attacks on the way POST /sql finds the page source", () => {
  const wipe = fence("sql wipe", "DELETE FROM items")

  it("attack: the database's own name before sys (db.sys.create_page) hid the call from the guard and saved a page that deletes", async () => {
    const database = await sql<SqlResult<{ name: string }>>("SELECT current_database() AS name")
    const name = database.body.rows[0]!.name
    const slug = freshSlug()
    const answer = await sql<PlainErrorBody>(`SELECT "${name}".sys.create_page($1, 'T', $2)`, [slug, wipe])
    expect(answer.status).toBe(400)
    expect(answer.body.error).toMatch(/write the function as schema\.name/)
    expect(await sourceOf(slug)).toBeUndefined()
    // A page query so written calls a sys function all the same.
    expect(await refusal(fence("sql sneaky", `SELECT "${name}".sys.drop_table('items')`))).toMatch(
      /sql block 1 \(line 1, sneaky\): function .*\.sys\.drop_table: write the function as schema\.name/
    )
  })

  it("attack: a cast through text[] turned a checked source into another page (array output unescapes its elements)", async () => {
    // Array input reads `\`` as a backtick: the page checked has no fence, the page saved has one.
    const hidden = "{\"x\n\\`\\`\\`sql wipe\nDELETE FROM items\n\\`\\`\\`\n\"}"
    for (const text of [
      `SELECT sys.create_page($1, 'T', $body$${hidden}$body$::text[]::text)`,
      "SELECT sys.create_page($1, 'T', $2::text[]::text)",
      "SELECT sys.create_page($1, 'T', $2::varchar(5))",
      "SELECT sys.create_page($1, 'T', $2::name)"
    ]) {
      const slug = freshSlug()
      const answer = await sql<PlainErrorBody>(text, text.includes("$2") ? [slug, hidden] : [slug])
      expect(answer.status, text).toBe(400)
      expect(answer.body.error, text).toMatch(/^pass the page source of sys.create_page \/ sys.update_page as a string literal or a \$n parameter/)
      expect(await sourceOf(slug)).toBeUndefined()
    }
  })
})

describe("attack: a source the markdown parser takes minutes over held the whole process", () => {
  it.each([
    ["nested list markers", "- ".repeat(100_000) + "x"],
    ["runs of emphasis marks", "*a**".repeat(50_000)],
    ["setext underlines", "a\n=\n".repeat(50_000)]
  ])("attack: %s are a 400, checked off the event loop with a deadline", async (_, source) => {
    const slug = freshSlug()
    const [refused, meanwhile] = await Promise.all([create(slug, source), sql<SqlResult<{ one: number }>>("SELECT 1 AS one")])
    expect(refused.status).toBe(400)
    expect((refused.body as PlainErrorBody).error).toMatch(/^the page source is too complex to check/)
    expect(meanwhile.body).toMatchObject({ rows: [{ one: 1 }] })
    expect(await sourceOf(slug)).toBeUndefined()
  })
})

describe("page sources are checked in a few workers at once, whoever sends them", () => {
  it("attack: many slow sources at once are refused with a 429 past the workers, not queued behind each other", async () => {
    const member = await signedIn(stack, "member@plinth.test", "member")
    const slow = "- ".repeat(100_000) + "x"
    const asMember = () => post<PlainErrorBody>(stack.main.url, "/sql", { sql: "SELECT sys.create_page($1, 'T', $2)", params: [freshSlug(), slow] }, { token: member.token })
    const answers = await Promise.all([...[1, 2, 3].map(() => create(freshSlug(), slow)), ...[1, 2, 3].map(asMember)])
    const statuses = answers.map((answer) => answer.status).sort()
    expect(statuses).toEqual([400, 400, 400, 400, 429, 429])
    for (const answer of answers) {
      expect((answer.body as PlainErrorBody).error).toMatch(answer.status === 400 ? /^the page source is too complex to check/ : /^too many page sources are being checked at once/)
    }
  })
})

describe("a page's queries run read-only, whatever the page says (the console sends them with readOnly)", () => {
  it("attack: a page saved unchecked (a view calling sys.create_page) ran its DELETE as whoever viewed it", async () => {
    // The owner saves a page past validation: the view's SQL is a string the guard does not read.
    const maker = "SELECT sys.create_page('unchecked', 'U', E'```sql wipe\\nDELETE FROM items\\n```\\n```table query=wipe\\n```\\n') AS made"
    expect((await sql("SELECT sys.create_view('page_maker', $1)", [maker])).status).toBe(200)
    expect((await sql("SELECT made FROM page_maker")).status).toBe(200)
    const saved = await sourceOf("unchecked")
    expect(saved).toContain("DELETE FROM items")
    const count = async () => (await sql<SqlResult<{ n: string }>>("SELECT count(*) AS n FROM items")).body.rows[0]!.n
    const before = await count()
    // What the console sends for the page's query: refused before the database.
    const asViewer = (text: string) => post<{ error: string | { code: string } }>(stack.main.url, "/sql", { sql: text, readOnly: true }, { token: owner.token })
    const refused = await asViewer("DELETE FROM items")
    expect(refused.status).toBe(400)
    expect(refused.body.error).toBe("readOnly: a page query must be one SELECT, not a DELETE")
    expect((await asViewer("SELECT sys.delete_page('unchecked')")).body.error).toBe("readOnly: a page query only reads: it may not call sys functions")
    expect((await asViewer("WITH d AS (DELETE FROM items RETURNING 1) SELECT count(*) FROM d")).status).toBe(400)
    // Past the guard (a write inside a view), the read-only transaction refuses it.
    const inView = await asViewer("SELECT made FROM page_maker")
    expect(inView.body).toMatchObject({ error: { code: "25006", message: "cannot execute INSERT in a read-only transaction" } })
    expect(inView.status).toBe(400)
    expect(await count()).toBe(before)
    const read = await post<SqlResult<{ one: number }>>(stack.main.url, "/sql", { sql: "SELECT 1 AS one", readOnly: true }, { token: owner.token })
    expect(read.body.rows).toEqual([{ one: 1 }])
  })
})

describe("the page sources of one statement are bounded", () => {
  it("attack: one statement passing thousands of slow page sources held its request for hours (each parsed to its deadline in turn)", async () => {
    const slow = (n: number) => "- ".repeat(40_000) + String(n)
    const calls = Array.from({ length: 2_000 }, (_, n) => `sys.create_page('s${n}', 'T', $${(n % 11) + 1})`)
    const answer = await sql<PlainErrorBody>(`SELECT ${calls.join(", ")}`, Array.from({ length: 11 }, (_, n) => slow(n)))
    expect(answer.status).toBe(400)
    expect(answer.body.error).toBe("one statement may save at most 10 page sources; save the others in further statements")
    // The same source given again is checked once: ten distinct ones are within the bound.
    const ten = Array.from({ length: 20 }, (_, n) => `sys.create_page('${freshSlug()}', 'T', $${(n % 10) + 1})`)
    const fine = await sql(`SELECT ${ten.join(", ")}`, Array.from({ length: 10 }, (_, n) => `# Page ${n}`))
    expect(fine.status).toBe(200)
  })
})

describe("a page source's parameter is typed by its place as the source only", () => {
  it("attack: $1::name elsewhere in the statement typed the source as name, and a 63-byte cut of the checked page was saved", async () => {
    const slug = freshSlug()
    const source = "# " + "x".repeat(70) + "\n\n" + DASHBOARD
    const answer = await sql<PlainErrorBody>("SELECT $1::name IS NOT NULL AS named, sys.create_page($2, 'T', $1)", [source, slug])
    expect(answer.status).toBe(400)
    expect(answer.body.error).toBe("a $n that passes a page source to sys.create_page / sys.update_page may not be used elsewhere in the statement")
    expect(await sourceOf(slug)).toBeUndefined()
  })
})
