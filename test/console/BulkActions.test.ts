/**
 * The table screen's bulk actions in a real browser (issue #25, "Bulk actions"), by role and label
 * only: ticked rows or all rows matching the search, one field set or the rows deleted, each in one
 * statement (so one transaction: a refusal changes nothing), row-level security deciding which rows
 * are touched, and no axe-core violation on the bulk dialogs.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { post, type SignIn, signedIn, sqlRows } from "../support/auth.ts"
import { consoleSuite } from "../support/consoleTabs.ts"

const suite = consoleSuite()
let owner: SignIn

const run = (who: SignIn, statement: string, params?: ReadonlyArray<unknown>) => sqlRows(suite.stack.main.url, who, "desk", statement, params)

/** The tickets' titles and statuses, by title. */
const tickets = async () =>
  Object.fromEntries((await run(owner, "SELECT title, status FROM tickets ORDER BY title")).map((row) => [row["title"], row["status"]]))

beforeAll(async () => {
  owner = await signedIn(suite.stack, "bulk-owner@plinth.test", "owner")
  await post(suite.stack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["desk", "Desk", "Tickets"] }, { token: owner.token })
  await run(owner, "SELECT sys.create_table($1, $2)", ["tickets", [
    { name: "title", type: "text", required: true },
    { name: "status", type: "choice", required: true, default: "open", options: [
      { value: "open", label: "Open", color: "#0b5cad" },
      { value: "done", label: "Done", color: "green" }
    ] },
    { name: "code", type: "text", unique: true }
  ]])
}, 120_000)

const ticketsTable = (page: Page) => page.getByRole("table", { name: /^Tickets/ })
const bulk = (page: Page) => page.getByRole("group", { name: "Bulk actions" })

/** Fresh tickets: these titles, each open, with a code of its own. */
const freshTickets = async (titles: ReadonlyArray<string>) => {
  await run(owner, "DELETE FROM tickets")
  for (const title of titles) await run(owner, "INSERT INTO tickets (title, code) VALUES ($1, $2)", [title, `code ${title}`])
}

describe("bulk actions on the table screen", () => {
  it("two ticked rows get a choice field set; the other rows stay as they were", async () => {
    await freshTickets(["alpha", "bravo", "charlie", "delta"])
    const page = await suite.openAs(owner, "/apps/desk/tables/tickets")
    const table = ticketsTable(page)
    await table.getByRole("cell", { name: "delta", exact: true }).waitFor()
    await table.getByRole("checkbox", { name: "Select alpha" }).check()
    await table.getByRole("checkbox", { name: "Select charlie" }).check()
    await bulk(page).getByRole("status").filter({ hasText: "2 rows selected." }).waitFor()

    await bulk(page).getByRole("button", { name: "Edit a field of 2 rows" }).click()
    const dialog = page.getByRole("dialog", { name: "Edit 2 rows" })
    await dialog.getByLabel("Field").selectOption({ label: "Status" })
    await dialog.getByRole("combobox", { name: /^Status/ }).selectOption({ label: "Done" })
    await dialog.getByRole("button", { name: "Set Status in 2 rows" }).click()
    await page.getByRole("status").filter({ hasText: "2 rows updated." }).waitFor()
    expect(await tickets()).toEqual({ alpha: "done", bravo: "open", charlie: "done", delta: "open" })
    // The screen reads the rows again, and the selection is gone.
    await table.getByRole("row").filter({ hasText: "alpha" }).getByRole("cell", { name: "Done" }).waitFor()
    expect(await table.getByRole("checkbox", { checked: true }).count()).toBe(0)
  })

  it("all rows matching a search are deleted after a confirmation that says how many; exactly those are gone", async () => {
    await freshTickets(["printer jam", "printer toner", "laptop", "phone", "printer cable"])
    const page = await suite.openAs(owner, "/apps/desk/tables/tickets")
    await ticketsTable(page).getByRole("cell", { name: "phone", exact: true }).waitFor()
    await page.getByRole("search").getByLabel("Search", { exact: true }).fill("printer")
    await ticketsTable(page).getByRole("cell", { name: "laptop", exact: true }).waitFor({ state: "detached" })
    await bulk(page).getByRole("button", { name: "Select all rows matching the search and filters" }).click()
    await bulk(page).getByRole("status").filter({ hasText: "All 3 matching rows selected." }).waitFor()

    await bulk(page).getByRole("button", { name: "Delete all 3 matching rows" }).click()
    const confirm = page.getByRole("alertdialog", { name: "Delete all 3 matching rows?" })
    expect(await confirm.textContent()).toContain("3 rows will be deleted, in one go: this cannot be undone.")
    await confirm.getByRole("button", { name: "Yes, delete 3 rows" }).click()
    await page.getByRole("status").filter({ hasText: "3 rows deleted." }).waitFor()
    expect(Object.keys(await tickets())).toEqual(["laptop", "phone"])
  })

  it("a bulk edit the database refuses (a unique column) changes no row, and says why", async () => {
    await freshTickets(["one", "two", "three"])
    const page = await suite.openAs(owner, "/apps/desk/tables/tickets")
    const table = ticketsTable(page)
    await table.getByRole("cell", { name: "three", exact: true }).waitFor()
    await bulk(page).getByRole("checkbox", { name: "Select all rows on this page" }).check()
    await bulk(page).getByRole("status").filter({ hasText: "3 rows selected." }).waitFor()
    await bulk(page).getByRole("button", { name: "Edit a field of 3 rows" }).click()
    const dialog = page.getByRole("dialog", { name: "Edit 3 rows" })
    await dialog.getByLabel("Field").selectOption({ label: "Code" })
    await dialog.getByRole("textbox", { name: "Code" }).fill("same code")
    await dialog.getByRole("button", { name: "Set Code in 3 rows" }).click()
    const refusal = await dialog.getByRole("alert").textContent()
    expect(refusal).toMatch(/^Nothing was changed\. Code: Duplicate key value violates unique constraint/)
    expect(await dialog.getByRole("textbox", { name: "Code" }).getAttribute("aria-invalid")).toBe("true")
    // One statement, one transaction: not even the first row took the code.
    expect((await run(owner, "SELECT code FROM tickets ORDER BY code")).map((row) => row["code"])).toEqual(["code one", "code three", "code two"])
  })

  it("a member who reads every row but writes only their own: 'all rows' touches their rows only", async () => {
    await freshTickets(["owner's first", "owner's second"])
    await run(owner, "SELECT sys.set_table_permissions($1, $2, $3, $4, $5)", ["tickets", "member", "all", "own", "own"])
    const member = await signedIn(suite.stack, "bulk-member@plinth.test", "member")
    await run(member, "INSERT INTO tickets (title, code) VALUES ('member first', 'm1'), ('member second', 'm2')")
    const page = await suite.openAs(member, "/apps/desk/tables/tickets")
    await ticketsTable(page).getByRole("cell", { name: "owner's first", exact: true }).waitFor()
    await ticketsTable(page).getByRole("cell", { name: "member second", exact: true }).waitFor()
    await bulk(page).getByRole("button", { name: "Select all rows" }).click()
    await bulk(page).getByRole("status").filter({ hasText: "All 4 rows selected." }).waitFor()
    await bulk(page).getByRole("button", { name: "Edit a field of all 4 rows" }).click()
    const dialog = page.getByRole("dialog", { name: "Edit all 4 rows" })
    await dialog.getByLabel("Field").selectOption({ label: "Status" })
    await dialog.getByRole("combobox", { name: /^Status/ }).selectOption({ label: "Done" })
    await dialog.getByRole("button", { name: "Set Status in 4 rows" }).click()
    // Row-level security decides: the count is the answer's, the member's two rows.
    await page.getByRole("status").filter({ hasText: "2 rows updated." }).waitFor()
    expect(await tickets()).toEqual({ "member first": "done", "member second": "done", "owner's first": "open", "owner's second": "open" })
  })

  it("offers no bulk action to a role that may not change or delete rows", async () => {
    await run(owner, "SELECT sys.set_table_permissions($1, $2, $3, $4, $5)", ["tickets", "member", "all", "none", "none"])
    const member = await signedIn(suite.stack, "bulk-reader@plinth.test", "member")
    const page = await suite.openAs(member, "/apps/desk/tables/tickets")
    await ticketsTable(page).getByRole("row").nth(1).waitFor()
    expect(await page.getByRole("group", { name: "Bulk actions" }).count()).toBe(0)
    expect(await page.getByRole("checkbox").count()).toBe(0)
  })

  it("has no axe-core (WCAG 2 A and AA) violations with rows ticked, in the edit dialog and in the delete confirmation", async () => {
    await freshTickets(["axe one", "axe two"])
    const page = await suite.openAs(owner, "/apps/desk/tables/tickets")
    const check = async (screen: string) => {
      const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
      expect(results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`), screen).toEqual([])
    }
    await ticketsTable(page).getByRole("checkbox", { name: "Select axe one" }).check()
    await check("rows ticked")
    await bulk(page).getByRole("button", { name: "Edit a field of 1 row" }).click()
    await page.getByRole("dialog", { name: "Edit 1 row" }).waitFor()
    await check("edit dialog")
    await bulk(page).getByRole("button", { name: "Delete 1 row" }).click()
    await page.getByRole("alertdialog", { name: "Delete 1 row?" }).waitFor()
    await check("delete confirmation")
  })
})
