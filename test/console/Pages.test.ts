/**
 * Pages in the console (issue #26) in a real browser, by role and label only: a page with a value,
 * a bar chart and a table computed over rows seeded through /sql (as the viewer: a member with
 * `own` rows sees their rows only), a broken query shown in its place, a page re-rendered when
 * another session changes it, the editor's live preview and problems, page and table links, the
 * app's home page for a role, and no axe-core violation on a page and on the editor.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { post, type SignIn, signedIn, sqlRows } from "../support/auth.ts"
import { consoleSuite } from "../support/consoleTabs.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

const suite = consoleSuite()
let owner: SignIn
let member: SignIn

const run = (who: SignIn, statement: string, params?: ReadonlyArray<unknown>) => sqlRows(suite.stack.main.url, who, "shop", statement, params)

const fence = "```"
const DASHBOARD = [
  "# Orders",
  "",
  "All *orders*, see [the orders table](table:orders) or [the notes page](page:notes).",
  "",
  "<b>not bold</b>",
  "",
  "> A quote with `some code` and **strong** words.",
  "",
  "- first item",
  "- [a site](https://example.com/)",
  "",
  "---",
  "",
  `${fence}sql totals`,
  "SELECT count(*) AS orders, coalesce(sum(total), 0) AS revenue FROM orders",
  fence,
  "",
  `${fence}value query=totals column=revenue label="Revenue" format=currency currency=USD`,
  fence,
  "",
  `${fence}sql by_status`,
  "SELECT status, count(*) AS count FROM orders GROUP BY status ORDER BY status",
  fence,
  "",
  `${fence}chart query=by_status type=bar x=status y=count title="Orders by status"`,
  fence,
  "",
  `${fence}sql all_orders`,
  "SELECT note, status, total FROM orders ORDER BY note",
  fence,
  "",
  `${fence}table query=all_orders title="All orders"`,
  fence,
  ""
].join("\n")

const BROKEN = [
  "# Broken",
  "",
  `${fence}sql good`,
  "SELECT count(*) AS orders FROM orders",
  fence,
  "",
  `${fence}sql bad`,
  "SELECT no_such_column FROM orders",
  fence,
  "",
  `${fence}value query=bad label="Bad number"`,
  fence,
  "",
  `${fence}chart query=good type=bar x=missing y=orders title="Chart of a missing column"`,
  fence,
  "",
  `${fence}value query=good column=orders label="Order count"`,
  fence,
  ""
].join("\n")

const BY_STATUS = [
  "# By status",
  "",
  "See the [shipped ones](page:by-status?status=shipped).",
  "",
  `${fence}sql picked params=status`,
  "SELECT count(*) AS n FROM orders WHERE status = $1",
  fence,
  "",
  `${fence}value query=picked column=n label="Orders with this status"`,
  fence,
  ""
].join("\n")

const SHAPES = [
  `${fence}sql by_month`,
  "SELECT * FROM (VALUES ('Jan', 'open', 3, 1.5), ('Jan', 'shipped', 1, 2), ('Feb', 'open', 5, 0.25)) AS t (month, status, n, share)",
  fence,
  "",
  `${fence}chart query=by_month type=line x=month y=n series=status title="Lines"`,
  fence,
  "",
  `${fence}chart query=by_month type=area x=status y=n,share title="Areas"`,
  fence,
  "",
  `${fence}chart query=by_month type=pie x=status y=n title="Pie"`,
  fence,
  "",
  `${fence}value query=by_month column=share label="Share" format=percent`,
  fence,
  ""
].join("\n")

beforeAll(async () => {
  owner = await signedIn(suite.stack, "pages-owner@plinth.test", "owner")
  member = await signedIn(suite.stack, "pages-member@plinth.test", "member")
  await post(suite.stack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["shop", "Shop", "Orders"] }, { token: owner.token })
  // Members open the shop at its dashboard (home pages are set by an app definition's import).
  await query(suite.stack.db.adminUrl, (sql) => sql`UPDATE sys.apps SET home_page = '{"member": "dashboard"}'::jsonb WHERE schema_name = 'shop'`)
  await run(owner, "SELECT sys.create_table($1, $2)", ["orders", [
    { name: "status", type: "choice", required: true, default: "open", options: [
      { value: "open", label: "Open", color: "#0b5cad" },
      { value: "shipped", label: "Shipped", color: "green" },
      { value: "cancelled", label: "Cancelled", color: "#a4111b" }
    ] },
    { name: "total", type: "currency" },
    { name: "note", type: "text" }
  ]])
  await run(owner, "INSERT INTO orders (status, total, note) VALUES ('open', 10, 'A'), ('open', 20.5, 'B'), ('shipped', 1234, 'C')")
  await run(member, "INSERT INTO orders (status, total, note) VALUES ('cancelled', 7, 'M')")
  await run(owner, "SELECT sys.create_page($1, $2, $3)", ["dashboard", "Dashboard", DASHBOARD])
  await run(owner, "SELECT sys.create_page($1, $2, $3)", ["notes", "Notes", "# Notes\n\nBack to the [dashboard](page:dashboard)."])
  await run(owner, "SELECT sys.create_page($1, $2, $3)", ["broken", "Broken", BROKEN])
  await run(owner, "SELECT sys.create_page($1, $2, $3)", ["by-status", "By status", BY_STATUS])
  await run(owner, "SELECT sys.create_page($1, $2, $3)", ["shapes", "Shapes", SHAPES])
}, 120_000)

const chartOf = (page: Page) => page.getByRole("figure", { name: "Orders by status" })

describe("pages in the console", () => {
  it("renders a page's value, bar chart (one bar per status) and table over the rows, and lists the app's pages", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/dashboard")
    await page.getByRole("heading", { level: 1, name: "Dashboard" }).waitFor()
    const revenue = page.getByRole("figure", { name: "Revenue" })
    await revenue.getByText("$1,271.50").waitFor()

    const chart = chartOf(page)
    await chart.getByRole("img", { name: /^Bar chart of Count by Status/ }).waitFor()
    expect((await chart.getByRole("img").all()).length).toBe(4)
    for (const bar of ["Cancelled: 1", "Open: 2", "Shipped: 1"]) expect(await chart.getByRole("img", { name: bar, exact: true }).count()).toBe(1)
    // The numbers as a table, on request.
    await chart.getByRole("button", { name: "Show data of Orders by status" }).click()
    const data = chart.getByRole("table", { name: "Data of Orders by status" })
    expect(await data.getByRole("row").allTextContents()).toEqual(["StatusCount", "Cancelled1", "Open2", "Shipped1"])

    const table = page.getByRole("table", { name: "All orders" })
    expect(await table.getByRole("columnheader").allTextContents()).toEqual(["Note", "Status", "Total"])
    expect(await table.getByRole("row").allTextContents()).toEqual(["NoteStatusTotal", "AOpen10.00", "BOpen20.50", "CShipped1,234.00", "MCancelled7.00"])

    // Markdown as elements; raw HTML as its text.
    await page.getByRole("heading", { level: 2, name: "Orders" }).waitFor()
    await page.getByText("<b>not bold</b>").waitFor()
    const main = page.getByRole("main")
    expect(await main.locator("b").count()).toBe(0)
    expect(await main.getByRole("blockquote").textContent()).toBe("A quote with some code and strong words.")
    expect(await main.getByRole("blockquote").getByRole("code").textContent()).toBe("some code")
    expect(await main.getByRole("blockquote").getByRole("strong").textContent()).toBe("strong")
    expect(await main.getByRole("emphasis").textContent()).toBe("orders")
    expect(await main.getByRole("list").first().getByRole("listitem").allTextContents()).toEqual(["first item", "a site"])
    expect(await main.getByRole("link", { name: "a site" }).getAttribute("href")).toBe("https://example.com/")
    expect(await main.getByRole("link", { name: "a site" }).getAttribute("rel")).toBe("noopener noreferrer")
    expect(await main.getByRole("separator").count()).toBe(1)

    const pages = page.getByRole("navigation", { name: "Main" }).getByRole("region", { name: "Pages" })
    expect(await pages.getByRole("link").allTextContents()).toEqual(["Broken", "By status", "Dashboard", "Notes", "Shapes", "New page"])
  })

  it("computes a member's page over their own rows only, and opens the app at the member's home page", async () => {
    const page = await suite.openAs(member, "/apps/shop")
    await page.getByRole("heading", { level: 1, name: "Dashboard" }).waitFor()
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/shop/pages/dashboard`)
    await page.getByRole("figure", { name: "Revenue" }).getByText("$7.00").waitFor()
    const chart = chartOf(page)
    await chart.getByRole("img", { name: "Cancelled: 1", exact: true }).waitFor()
    expect((await chart.getByRole("img").all()).length).toBe(2)
    expect(await page.getByRole("table", { name: "All orders" }).getByRole("row").allTextContents()).toEqual(["NoteStatusTotal", "MCancelled7.00"])
    // No editing for a member; the Overview stays reachable.
    expect(await page.getByRole("link", { name: "Edit page" }).count()).toBe(0)
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Overview" }).click()
    await page.getByRole("heading", { level: 1, name: "Shop" }).waitFor()
  })

  it("binds the page URL's query to the queries' parameters, and runs the queries again on Refresh", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/by-status?status=open")
    const picked = page.getByRole("figure", { name: "Orders with this status" })
    await picked.getByText("2", { exact: true }).waitFor()
    await page.getByRole("link", { name: "shipped ones" }).click()
    await picked.getByText("1", { exact: true }).waitFor()
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/shop/pages/by-status?status=shipped`)
    await run(owner, "INSERT INTO orders (status, total, note) VALUES ('shipped', 1, 'Z')")
    await page.getByRole("button", { name: "Refresh" }).click()
    await picked.getByText("2", { exact: true }).waitFor()
    await run(owner, "DELETE FROM orders WHERE note = 'Z'")
  })

  it("draws line, area and pie charts, a series column as a legend, and a percent value", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/shapes")
    const lines = page.getByRole("figure", { name: "Lines" })
    await lines.getByRole("img", { name: /^Line chart of N by Month/ }).waitFor()
    for (const point of ["Open, Jan: 3", "Open, Feb: 5", "Shipped, Jan: 1"]) expect(await lines.getByRole("img", { name: point, exact: true }).count()).toBe(1)
    expect(await lines.getByRole("list", { name: "Legend of Lines" }).getByRole("listitem").allTextContents()).toEqual(["Open", "Shipped"])
    const areas = page.getByRole("figure", { name: "Areas" })
    await areas.getByRole("img", { name: "Share, Shipped: 2", exact: true }).waitFor()
    const pie = page.getByRole("figure", { name: "Pie" })
    await pie.getByRole("img", { name: "Open: 8 (89 %)", exact: true }).waitFor()
    await page.getByRole("figure", { name: "Share" }).getByText("150%").waitFor()
  })

  it("shows a broken query's error and a missing column's error in their places, and renders the rest", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/broken")
    await page.getByRole("figure", { name: "Order count" }).getByText("4").waitFor()
    const alerts = page.getByRole("main").getByRole("alert")
    expect(await eventually(async () => (await alerts.count()) === 2)).toBe(true)
    expect(await alerts.nth(0).textContent()).toMatch(/^The query bad failed: .*no_such_column/)
    expect(await alerts.nth(1).textContent()).toMatch(/no column missing/)
  })

  it("re-renders the open page when another session changes it, and lists a new page", async () => {
    await run(owner, "SELECT sys.create_page($1, $2, $3)", ["live", "Live", "# Live\n\nFirst version."])
    const page = await suite.openAs(owner, "/apps/shop/pages/live")
    await page.getByText("First version.").waitFor()
    await run(owner, "SELECT sys.update_page($1, $2, $3)", ["live", "Live, changed", "# Live\n\nSecond version."])
    await page.getByText("Second version.").waitFor()
    await page.getByRole("heading", { level: 1, name: "Live, changed" }).waitFor()
    await run(owner, "SELECT sys.create_page($1, $2, $3)", ["later", "Later", "Later."])
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Later" }).waitFor()
  })

  it("follows page and table links inside the console", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/dashboard")
    await page.getByRole("link", { name: "the notes page" }).click()
    await page.getByRole("heading", { level: 1, name: "Notes" }).waitFor()
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/shop/pages/notes`)
    await page.getByRole("main").getByRole("link", { name: "dashboard" }).click()
    await page.getByRole("link", { name: "the orders table" }).click()
    await page.getByRole("heading", { level: 1, name: "Orders" }).waitFor()
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/shop/tables/orders`)
  })

  it("edits a page beside its live preview, lists the source's problems with their lines, saves, and makes a new page", async () => {
    await run(owner, "SELECT sys.create_page($1, $2, $3)", ["draft", "Draft", "# Draft\n\nNothing yet."])
    const page = await suite.openAs(owner, "/apps/shop/pages/draft")
    await page.getByRole("link", { name: "Edit page" }).click()
    const source = page.getByLabel("Source")
    await source.waitFor()
    expect(await source.inputValue()).toBe("# Draft\n\nNothing yet.")
    const preview = page.getByRole("region", { name: "Preview" })
    await preview.getByText("Nothing yet.").waitFor()

    await source.fill(`# Draft\n\n${fence}sql n\nSELECT count(*) AS n FROM orders\n${fence}\n\n${fence}value query=n label="Orders so far"\n${fence}\n`)
    await preview.getByRole("figure", { name: "Orders so far" }).getByText("4").waitFor()
    const problems = page.getByRole("region", { name: "Problems" })
    await problems.getByText("No problems.").waitFor()

    await source.fill(`# Draft\n\n${fence}chart query=n type=pies x=a y=b\n${fence}\n`)
    await problems.getByRole("listitem").first().waitFor()
    expect(await problems.getByRole("listitem").allTextContents()).toEqual([
      expect.stringMatching(/^Line 3: chart block 1 \(line 3, query=n\): type "pies" is not a chart type/)
    ])
    await preview.getByRole("alert").first().waitFor()
    // Saved with a problem anyway: the server's validation refuses it, in its words.
    await page.getByRole("button", { name: "Save page" }).click()
    await page.getByRole("alert").filter({ hasText: "The page was not saved" }).waitFor()
    expect(await page.getByRole("alert").filter({ hasText: "The page was not saved" }).textContent()).toMatch(/chart block 1 \(line 3, query=n\): type "pies" is not a chart type/)

    // An address the format does not allow is no link, even unsaved.
    await source.fill("# Draft\n\n[click me](javascript:alert(1))")
    await preview.getByText("click me").waitFor()
    expect(await preview.getByRole("link", { name: "click me" }).count()).toBe(0)

    await source.fill("# Draft\n\nSaved text.")
    await page.getByLabel("Title").fill("Draft, saved")
    await page.getByRole("button", { name: "Save page" }).click()
    await page.getByRole("status").filter({ hasText: "The page was saved." }).waitFor()
    await page.getByRole("link", { name: "View page" }).click()
    await page.getByRole("heading", { level: 1, name: "Draft, saved" }).waitFor()
    await page.getByText("Saved text.").waitFor()

    // A new page, and a slug that is taken said in the server's words.
    const navigation = page.getByRole("navigation", { name: "Main" })
    await navigation.getByRole("link", { name: "New page" }).click()
    await page.getByLabel("Title").fill("Weekly")
    await page.getByLabel("Slug").fill("dashboard")
    await page.getByRole("button", { name: "Create page" }).click()
    expect(await page.getByRole("alert").textContent()).toMatch(/already exists/)
    await page.getByLabel("Slug").fill("weekly")
    await page.getByRole("button", { name: "Create page" }).click()
    await page.getByRole("heading", { level: 1, name: "Edit Weekly" }).waitFor()
    await navigation.getByRole("link", { name: "Weekly" }).waitFor()
  })

  it("has no axe-core (WCAG 2 A and AA) violations on a page and on the editor", async () => {
    const page = await suite.openAs(owner, "/apps/shop/pages/dashboard")
    await chartOf(page).getByRole("img", { name: "Open: 2", exact: true }).waitFor()
    await page.getByRole("table", { name: "All orders" }).getByRole("row").nth(1).waitFor()
    const check = async (screen: string) => {
      const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
      expect(results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`), screen).toEqual([])
    }
    await chartOf(page).getByRole("button", { name: /^Show data/ }).click()
    await check("page")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Shapes" }).click()
    await page.getByRole("figure", { name: "Pie" }).getByRole("img").first().waitFor()
    await check("charts")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Dashboard" }).click()
    await page.getByRole("link", { name: "Edit page" }).click()
    await page.getByRole("region", { name: "Preview" }).getByRole("img", { name: "Open: 2", exact: true }).waitFor()
    await check("editor")
  })
})
