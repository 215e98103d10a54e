/**
 * The console's Permissions screen in a real browser (issue #25, screen 4), driven by role and
 * label only: an owner sets who may read a table's rows, a member then sees only their own, a
 * refused change is said beside its cell, members see no Permissions entry, and no axe-core violation.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { consoleSuite } from "../support/consoleTabs.ts"
import { post, type SignIn, signedIn, sqlRows } from "../support/auth.ts"

const suite = consoleSuite()
let owner: SignIn
let member: SignIn

const run = (who: SignIn, statement: string, params?: ReadonlyArray<unknown>) => sqlRows(suite.stack.main.url, who, "shop", statement, params)

beforeAll(async () => {
  owner = await signedIn(suite.stack, "permissions-owner@plinth.test", "owner")
  member = await signedIn(suite.stack, "permissions-member@plinth.test", "member")
  await post(suite.stack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["shop", "Shop", ""] }, { token: owner.token })
  await run(owner, "SELECT sys.create_table($1, $2)", ["orders", [{ name: "note", type: "text" }]])
  await run(owner, "SELECT sys.create_table($1, $2)", ["order_lines", [{ name: "quantity", type: "integer" }]])
  // Members start by reading every order: the screen's change is what narrows it.
  await run(owner, "SELECT sys.set_table_permissions($1, $2, $3, $4, $5)", ["orders", "member", "all", "own", "own"])
  await run(owner, "INSERT INTO orders (note) VALUES ($1)", ["the owner's order"])
  await run(member, "INSERT INTO orders (note) VALUES ($1)", ["the member's order"])
}, 120_000)

const notes = async (who: SignIn) => (await run(who, "SELECT note FROM orders_v ORDER BY note")).map((row) => row.note)

describe("the Permissions screen", () => {
  it("an owner sets member read to Own on a table, and the member then sees only their own rows", async () => {
    expect(await notes(member)).toEqual(["the member's order", "the owner's order"])
    const page = await suite.openAs(owner, "/apps/shop")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Permissions" }).click()
    await page.getByRole("heading", { level: 1, name: "Permissions" }).waitFor()
    const grid = page.getByRole("table", { name: "Permissions of the tables of Shop" })
    await grid.waitFor()
    // A row per managed table, a header cell per role and action.
    expect(await grid.getByRole("rowheader").allTextContents()).toEqual(["Order lines", "Orders"])
    expect(await grid.getByRole("columnheader").allTextContents()).toEqual([
      "Table", "Staff", "Member", "Anon (not signed in)", "Read", "Write", "Delete", "Read", "Write", "Delete", "Read", "Write", "Delete"
    ])
    const cell = grid.getByLabel("Orders: member read")
    expect(await cell.inputValue()).toBe("all")
    expect(await grid.getByLabel("Order lines: anon delete").inputValue()).toBe("none")
    await expectNoAxeViolations(page)

    await cell.selectOption({ label: "Own" })
    await grid.getByRole("status").filter({ hasText: "Saved" }).waitFor()
    const saved = await run(owner, "SELECT read, write, delete FROM sys.get_table_permissions() WHERE table_name = 'orders' AND role = 'member'")
    expect(saved).toEqual([{ read: "own", write: "own", delete: "own" }])
    expect(await notes(member)).toEqual(["the member's order"])

    // The member's table screen shows that one row too.
    const seen = await suite.openAs(member, "/apps/shop/tables/orders")
    const orders = seen.getByRole("table", { name: /^Orders/ })
    await orders.getByRole("cell", { name: "the member's order", exact: true }).waitFor()
    expect(await orders.getByRole("cell", { name: "the owner's order", exact: true }).count()).toBe(0)
    await expectNoAxeViolations(page)
  })

  it("a refused change is said in words beside its cell and the cell keeps what is saved", async () => {
    const page = await suite.openAs(owner, "/apps/shop")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Permissions" }).click()
    const cell = page.getByLabel("Order lines: staff write")
    expect(await cell.inputValue()).toBe("all")
    // Dropped by someone else while the screen is open.
    await run(owner, "SELECT sys.drop_table($1)", ["order_lines"])
    await cell.selectOption({ label: "None" })
    // Said in the database's words, in the cell's own row.
    const refusal = page.getByRole("row").filter({ hasText: "Order lines" }).getByRole("alert")
    await refusal.waitFor()
    expect(await refusal.textContent()).toBe("Not saved: No managed table 'order_lines' in schema shop.")
    expect(await cell.getAttribute("aria-invalid")).toBe("true")
    expect(await cell.inputValue()).toBe("all")
    await expectNoAxeViolations(page)
  })

  it("a member sees no Permissions entry and may not open the screen", async () => {
    const page = await suite.openAs(member, "/apps/shop")
    const navigation = page.getByRole("navigation", { name: "Main" })
    await navigation.getByRole("link", { name: "Overview" }).waitFor()
    expect(await navigation.getByRole("link", { name: "Permissions" }).count()).toBe(0)
    await page.goto(`${suite.stack.main.url}/console/permissions`)
    await page.getByRole("heading", { level: 1, name: "Not allowed" }).waitFor()
    expect(await page.getByRole("table").count()).toBe(0)
  })
})

const expectNoAxeViolations = async (page: Page) => {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
  const found = results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`)
  expect(found, "Permissions").toEqual([])
}
