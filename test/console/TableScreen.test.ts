/**
 * The console's table screen in a real browser (issue #25, screen 3), driven by role and label
 * only: two related managed tables made through /sql (reference, choice, currency, boolean, date
 * columns); values shown by display type, sorting, search, filters, keyset paging, adding, editing
 * and deleting rows with the reference picker, a member's own rows, and no axe-core violation.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { consoleSuite } from "../support/consoleTabs.ts"
import { post, type SignIn, signedIn, sqlRows } from "../support/auth.ts"
import { eventually } from "../support/eventually.ts"

const suite = consoleSuite()
let owner: SignIn

const run = (who: SignIn, statement: string, params?: ReadonlyArray<unknown>) => sqlRows(suite.stack.main.url, who, "shop", statement, params)

const addOrder = (who: SignIn, customer: string, note: string, fields: { status?: string; total?: string; paid?: boolean; due?: string } = {}) =>
  run(
    who,
    "INSERT INTO orders (customer, note, status, total, paid, due) SELECT id, $2, $3, $4, $5, $6 FROM customers WHERE name = $1",
    [customer, note, fields.status ?? "open", fields.total ?? null, fields.paid ?? false, fields.due ?? null]
  )

beforeAll(async () => {
  owner = await signedIn(suite.stack, "table-owner@plinth.test", "owner")
  await post(suite.stack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["shop", "Shop", "Customers and orders"] }, { token: owner.token })
  await run(owner, "SELECT sys.create_table($1, $2)", ["customers", [
    { name: "name", type: "text", required: true },
    { name: "email", type: "email", unique: true },
    { name: "vip", type: "boolean", default: false }
  ]])
  await run(owner, "SELECT sys.create_table($1, $2)", ["orders", [
    { name: "customer", type: "reference", references: "customers" },
    { name: "status", type: "choice", required: true, default: "open", options: [
      { value: "open", label: "Open", color: "#0b5cad" },
      { value: "shipped", label: "Shipped", color: "green" }
    ] },
    { name: "total", type: "currency" },
    { name: "paid", type: "boolean", default: false },
    { name: "due", type: "date", label: "Due on" },
    { name: "note", type: "text" }
  ]])
  await run(owner, "SELECT sys.alter_table($1, $2)", ["orders", [{ op: "set_display_columns", columns: ["note"] }]])
  await run(owner, "SELECT sys.create_table($1, $2)", ["items", [{ name: "n", type: "integer" }]])
  await run(owner, "INSERT INTO customers (name, email, vip) VALUES ($1, $2, true), ($3, $4, false), ($5, $6, false)", [
    "Acme Ltd", "buy@acme.test", "Globex", "orders@globex.test", "Initech", "it@initech.test"
  ])
}, 120_000)

const ordersOf = (page: Page) => page.getByRole("table", { name: /^Orders/ })

/** The texts of one column's cells, top to bottom. */
const columnTexts = async (page: Page, table: string, column: number) =>
  page.getByRole("table", { name: new RegExp(`^${table}`) }).getByRole("row").evaluateAll(
    (rows, index) => rows.slice(1).map((row) => row.querySelectorAll("td")[index]?.textContent ?? ""),
    column
  )

const waitForColumn = async (page: Page, table: string, column: number, expected: ReadonlyArray<string>) => {
  const matched = await eventually(async () => JSON.stringify(await columnTexts(page, table, column)) === JSON.stringify(expected))
  expect(await columnTexts(page, table, column)).toEqual(expected)
  expect(matched).toBe(true)
}

describe("the table screen", () => {
  it("shows each value by its display type, sorts by a header, searches text, filters a reference and a choice, counts on request", async () => {
    await addOrder(owner, "Acme Ltd", "First order", { status: "shipped", total: "1234.5", paid: true, due: "2026-03-04" })
    await addOrder(owner, "Globex", "Globex order", { total: "10" })
    await addOrder(owner, "Initech", "Initech order", { total: "300" })
    const page = await suite.openAs(owner, "/apps/shop/tables/orders")
    const table = ordersOf(page)
    await table.waitFor()
    expect(await table.getByRole("columnheader").allTextContents()).toEqual(["Customer", "Status", "Total", "Paid", "Due on", "Note", "Created ▼", "Actions"])
    expect(await page.getByText("3 rows", { exact: true }).count()).toBe(1)

    // Newest first by default; the first order is the last row.
    const first = table.getByRole("row").filter({ hasText: "First order" })
    expect(await first.getByRole("cell").allTextContents()).toEqual(
      expect.arrayContaining(["Acme Ltd", "Shipped", "1,234.50", "Yes", "3/4/2026", "First order"])
    )
    expect(await table.getByRole("columnheader", { name: /^Created/ }).getAttribute("aria-sort")).toBe("descending")

    await table.getByRole("button", { name: "Total", exact: true }).click()
    await waitForColumn(page, "Orders", 2, ["10.00", "300.00", "1,234.50"])
    expect(await table.getByRole("columnheader", { name: /^Total/ }).getAttribute("aria-sort")).toBe("ascending")
    expect(await table.getByRole("columnheader", { name: /^Created/ }).getAttribute("aria-sort")).toBeNull()
    await table.getByRole("button", { name: /^Total/ }).click()
    await waitForColumn(page, "Orders", 2, ["1,234.50", "300.00", "10.00"])
    expect(await table.getByRole("columnheader", { name: /^Total/ }).getAttribute("aria-sort")).toBe("descending")
    // A reference sorts by what it shows.
    await table.getByRole("button", { name: /^Customer/ }).click()
    await waitForColumn(page, "Orders", 0, ["Acme Ltd", "Globex", "Initech"])

    // The search covers text columns, a reference's shown value among them.
    const search = page.getByRole("search")
    await search.getByLabel("Search", { exact: true }).fill("glob")
    await waitForColumn(page, "Orders", 5, ["Globex order"])
    await search.getByLabel("Search", { exact: true }).fill("")
    await waitForColumn(page, "Orders", 0, ["Acme Ltd", "Globex", "Initech"])
    // The reference picker filters too, searching the customers on the server.
    await search.getByRole("searchbox", { name: "Search customer" }).fill("init")
    const customer = search.getByRole("combobox", { name: "Customer", exact: true })
    expect(await eventually(async () => JSON.stringify(await customer.getByRole("option").allTextContents()) === JSON.stringify(["Any", "Initech"]))).toBe(true)
    await customer.selectOption({ label: "Initech" })
    await waitForColumn(page, "Orders", 5, ["Initech order"])
    await customer.selectOption({ label: "Any" })
    await waitForColumn(page, "Orders", 0, ["Acme Ltd", "Globex", "Initech"])

    await search.getByLabel("Status").selectOption({ label: "Shipped" })
    await waitForColumn(page, "Orders", 5, ["First order"])
    // Filtered, the count is exact on request.
    await page.getByRole("button", { name: "Count matching rows" }).click()
    await page.getByText("1 matching row", { exact: true }).waitFor()
    await search.getByLabel("Paid").selectOption({ label: "No" })
    await waitForColumn(page, "Orders", 5, [])
    await page.getByText("No rows match.").waitFor()
  })

  it("adds a row with the reference picker, edits and deletes it, and names the field of a duplicate", async () => {
    const page = await suite.openAs(owner, "/apps/shop/tables/orders")
    await ordersOf(page).waitFor()
    await page.getByRole("button", { name: "New row" }).click()
    const form = page.getByRole("form", { name: "New row in Orders" })
    // The default fills the choice; the picker searches the customers' display column on the server.
    expect(await form.getByRole("combobox", { name: /^Status/ }).inputValue()).toBe("open")
    const picker = form.getByRole("combobox", { name: "Customer", exact: true })
    await picker.getByRole("option", { name: "Globex" }).waitFor({ state: "attached" })
    await form.getByRole("searchbox", { name: "Search customer" }).fill("init")
    const options = () => picker.getByRole("option").allTextContents()
    expect(await eventually(async () => JSON.stringify(await options()) === JSON.stringify(["(none)", "Initech"]))).toBe(true)
    await picker.selectOption({ label: "Initech" })
    await form.getByRole("spinbutton", { name: "Total" }).fill("99.9")
    await form.getByLabel("Due on").fill("2026-05-06")
    await form.getByRole("textbox", { name: "Note" }).fill("Picked order")
    await form.getByRole("button", { name: "Add row" }).click()
    await page.getByRole("status").filter({ hasText: "A row was added to Orders." }).waitFor()
    const added = ordersOf(page).getByRole("row").filter({ hasText: "Picked order" })
    await added.waitFor()
    expect(await added.getByRole("cell").allTextContents()).toEqual(expect.arrayContaining(["Initech", "Open", "99.90", "No", "5/6/2026"]))

    await ordersOf(page).getByRole("button", { name: "Edit Picked order" }).click()
    const edit = page.getByRole("form", { name: "Edit Picked order" })
    expect(await edit.getByRole("combobox", { name: "Customer", exact: true }).inputValue()).not.toBe("")
    await edit.getByRole("spinbutton", { name: "Total" }).fill("150")
    await edit.getByRole("combobox", { name: /^Status/ }).selectOption({ label: "Shipped" })
    await edit.getByRole("button", { name: "Save changes" }).click()
    await page.getByRole("status").filter({ hasText: "Picked order was saved." }).waitFor()
    await added.getByRole("cell", { name: "150.00" }).waitFor()
    expect(await added.getByRole("cell").allTextContents()).toEqual(expect.arrayContaining(["Initech", "Shipped", "150.00"]))

    await ordersOf(page).getByRole("button", { name: "Delete Picked order" }).click()
    await ordersOf(page).getByRole("button", { name: "Yes, delete Picked order" }).click()
    await page.getByRole("status").filter({ hasText: "Picked order was deleted." }).waitFor()
    await added.waitFor({ state: "detached" })

    // Values are text, never HTML.
    await run(owner, "INSERT INTO customers (name) VALUES ($1)", ["<em>Marked</em> up"])
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers" }).click()
    await page.getByRole("table", { name: /^Customers/ }).getByRole("cell", { name: "<em>Marked</em> up", exact: true }).waitFor()
    expect(await page.getByRole("emphasis").count()).toBe(0)

    // A customer with an email another customer has: the form says which field.
    await page.getByRole("button", { name: "New row" }).click()
    const customer = page.getByRole("form", { name: "New row in Customers" })
    await customer.getByRole("textbox", { name: /^Name/ }).fill("Acme again")
    await customer.getByRole("textbox", { name: "Email" }).fill("buy@acme.test")
    await customer.getByRole("button", { name: "Add row" }).click()
    const refusal = await customer.getByRole("alert").textContent()
    expect(refusal).toMatch(/^Email: Duplicate key value violates unique constraint/)
    expect(await customer.getByRole("textbox", { name: "Email" }).getAttribute("aria-invalid")).toBe("true")
  })

  it("a member with own permissions sees and edits only their rows, and gets no create button where they may not insert", async () => {
    await run(owner, "SELECT sys.set_table_permissions($1, $2, $3, $4, $5)", ["customers", "member", "all", "none", "none"])
    const member = await signedIn(suite.stack, "table-member@plinth.test", "member")
    await addOrder(member, "Globex", "Member order", { total: "5" })
    const page = await suite.openAs(member, "/apps/shop/tables/orders")
    await ordersOf(page).waitFor()
    await waitForColumn(page, "Orders", 5, ["Member order"])
    expect(await page.getByText("1 row", { exact: true }).count()).toBe(1)
    await ordersOf(page).getByRole("button", { name: "Edit Member order" }).click()
    const edit = page.getByRole("form", { name: "Edit Member order" })
    await edit.getByRole("textbox", { name: "Note" }).fill("Member order, changed")
    await edit.getByRole("button", { name: "Save changes" }).click()
    await waitForColumn(page, "Orders", 5, ["Member order, changed"])
    expect(await page.getByRole("button", { name: "New row" }).count()).toBe(1)

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers" }).click()
    await page.getByRole("table", { name: /^Customers/ }).waitFor()
    // Added in one statement (one created_at), the customers come in their keys' order: compared as a set.
    const customers = page.getByRole("table", { name: /^Customers/ })
    await customers.getByRole("cell", { name: "Initech", exact: true }).waitFor()
    expect((await columnTexts(page, "Customers", 0)).sort()).toEqual(["<em>Marked</em> up", "Acme Ltd", "Globex", "Initech"])
    expect(await page.getByRole("button", { name: "New row" }).count()).toBe(0)
    expect(await page.getByRole("button", { name: /^Edit / }).count()).toBe(0)
  })

  it("pages by keyset through a few hundred rows: none repeated or missed, in the default order and sorted", async () => {
    await run(owner, "INSERT INTO items (n) SELECT g FROM generate_series(1, 230) g")
    const page = await suite.openAs(owner, "/apps/shop/tables/items")
    const readAll = async () => {
      const seen: Array<string> = []
      for (let pageNumber = 1; ; pageNumber++) {
        const caption = pageNumber === 1 ? "Items" : `Items, page ${pageNumber}`
        await page.getByRole("table", { name: caption, exact: true }).waitFor()
        await page.getByRole("navigation", { name: "Pages" }).getByText(`Page ${pageNumber}`, { exact: true }).waitFor()
        seen.push(...await columnTexts(page, "Items", 0))
        const next = page.getByRole("button", { name: "Next page" })
        if (await next.isDisabled()) return seen
        await next.click()
      }
    }
    await page.getByRole("table", { name: "Items" }).waitFor()
    expect(await page.getByText("230 rows", { exact: true }).count()).toBe(1)
    // Every row has the same created_at (one statement): the key breaks the ties.
    const byDefault = await readAll()
    expect(byDefault).toHaveLength(230)
    expect(new Set(byDefault).size).toBe(230)

    await page.goto(`${suite.stack.main.url}/console/apps/shop/tables/items`)
    const items = page.getByRole("table", { name: "Items" })
    await items.getByRole("button", { name: "N", exact: true }).click()
    expect(await eventually(async () => (await items.getByRole("columnheader", { name: "N", exact: true }).getAttribute("aria-sort")) === "ascending")).toBe(true)
    const sorted = await readAll()
    expect(sorted).toEqual(Array.from({ length: 230 }, (_, i) => String(i + 1)))
  }, 60_000)

  it("has no axe-core (WCAG 2 A and AA) violations on the table screen and its form", async () => {
    const page = await suite.openAs(owner, "/apps/shop/tables/orders")
    await ordersOf(page).getByRole("row").nth(1).waitFor()
    const check = async (screen: string) => {
      const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
      expect(results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`), screen).toEqual([])
    }
    await check("table")
    await page.getByRole("button", { name: "New row" }).click()
    await page.getByRole("form", { name: "New row in Orders" }).getByRole("option", { name: "Acme Ltd" }).waitFor({ state: "attached" })
    await check("form")
  })
})
