/**
 * Plinth Console in a real browser (issue #25, part 1): a headless Chromium from npm drives the
 * console the main service serves, finding everything by role and label only. Signing in by an
 * invitation link and by a link asked for on the sign-in screen, the shell, the Users and Audit
 * screens and their rules, a 401 ending the session, and no axe-core (WCAG 2 A/AA) violation.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Page } from "playwright-core"
import { describe, expect, it } from "vitest"
import { magicLinkUrl } from "../../src/services/Mailer.ts"
import { consoleSuite } from "../support/consoleTabs.ts"
import { inviteAsDatabaseAdmin, mailedToken, post } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"

const suite = consoleSuite()

/** The link a magic-link mail (or `plinth invite`) gives, with APP_URL's default: this service's console. */
const linkFor = (token: string) => magicLinkUrl(new URL(`${suite.stack.main.url}/console`), token)

/** Invited as a database administrator does it (`plinth invite`), then signed in by opening the link. */
const signInAs = async (email: string, role: string): Promise<Page> => {
  const page = await suite.newPage()
  await page.goto(linkFor(await inviteAsDatabaseAdmin(suite.stack.db, email, role)))
  await page.getByRole("button", { name: "Sign out" }).waitFor()
  return page
}

const expectNoAxeViolations = async (page: Page, screen: string) => {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
  const found = results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`)
  expect(found, screen).toEqual([])
}

describe("signing in", () => {
  it("a new owner opens the invitation link, is signed in, creates an app and finds it in the switcher", async () => {
    const page = await suite.newPage()
    await page.goto(linkFor(await inviteAsDatabaseAdmin(suite.stack.db, "first-owner@plinth.test", "owner")))
    await page.getByRole("button", { name: "Sign out" }).waitFor()
    // The link's token left the address (and the history); the JWT is kept for the tab.
    expect(page.url()).toBe(`${suite.stack.main.url}/console/`)
    expect(await page.evaluate(() => sessionStorage.getItem("plinth.token"))).toMatch(/^eyJ/)
    expect(await page.getByRole("banner").textContent()).toContain("(Owner)")

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "New app" }).click()
    await page.getByLabel("Name", { exact: true }).fill("Customer relations")
    await page.getByLabel("Schema name").fill("crm")
    await page.getByLabel("Description").fill("Customers and their orders")
    await page.getByRole("button", { name: "Create app" }).click()
    await page.getByRole("heading", { level: 1, name: "Customer relations" }).waitFor()
    const switcher = page.getByLabel("App", { exact: true })
    expect(await switcher.inputValue()).toBe("crm")
    expect(await switcher.getByRole("option").allTextContents()).toEqual(["Public", "Customer relations"])
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/crm`)

    // Tables made elsewhere (here through /sql) show up at the next move, drawn by the write_target rules:
    // each read view under its table's label, no table twice.
    const jwt = (await page.evaluate(() => sessionStorage.getItem("plinth.token")))!
    const created = await post(suite.stack.main.url, "/sql", {
      sql: "SELECT sys.create_table($1, $2)",
      params: ["order_lines", [{ name: "quantity", type: "integer" }]]
    }, { token: jwt, headers: { "x-app-schema": "crm" } })
    expect(created.status).toBe(200)
    const navigation = page.getByRole("navigation", { name: "Main" })
    await navigation.getByRole("link", { name: "Overview" }).click()
    await navigation.getByRole("link", { name: "Order lines" }).waitFor()
    expect(await navigation.getByRole("link", { name: /order_lines/i }).count()).toBe(0)
    await navigation.getByRole("link", { name: "Order lines" }).click()
    await page.getByRole("heading", { level: 1, name: "Order lines" }).waitFor()
    expect(page.url()).toBe(`${suite.stack.main.url}/console/apps/crm/tables/order_lines`)
  })

  it("mails a link from the sign-in screen, signs in with it, and words a rate limit with its wait", async () => {
    const email = "asks-for-links@plinth.test"
    await inviteAsDatabaseAdmin(suite.stack.db, email, "member")
    const page = await suite.newPage()
    await page.goto(`${suite.stack.main.url}/console/`)
    const form = page.getByRole("form", { name: "Get a sign-in link" })
    await form.getByLabel("Email").fill(email)
    await form.getByRole("button", { name: "Email me a sign-in link" }).click()
    await page.getByRole("status").filter({ hasText: "Check your email" }).waitFor()

    const token = await mailedToken(suite.stack.mail, email)
    // Two more links use up the mailbox's three per 15 minutes; the screen's next one is refused.
    for (let i = 0; i < 2; i++) expect((await post(suite.stack.main.url, "/auth/magic-link", { email })).status).toBe(200)
    await form.getByRole("button", { name: "Email me a sign-in link" }).click()
    const refusal = await page.getByRole("alert").textContent()
    expect(refusal).toMatch(/^Too many attempts\. Please try again in \d+ (minutes|seconds)\.$/)

    await page.goto(linkFor(token))
    await page.getByRole("button", { name: "Sign out" }).waitFor()
    expect(await page.getByRole("banner").textContent()).toContain("(Member)")
    await page.getByRole("button", { name: "Sign out" }).click()
    await page.getByRole("heading", { level: 1, name: "Sign in to Plinth" }).waitFor()
    expect(await page.evaluate(() => sessionStorage.getItem("plinth.token"))).toBeNull()
  })

  it("a spent link says so in words and leaves the user signed out", async () => {
    const token = await inviteAsDatabaseAdmin(suite.stack.db, "spent-link@plinth.test", "member")
    expect((await post(suite.stack.main.url, "/auth/magic-link/verify", { token })).status).toBe(200)
    const page = await suite.newPage()
    await page.goto(linkFor(token))
    expect(await page.getByRole("alert").textContent()).toBe("This sign-in link is invalid, already used or expired. Please ask for a new one below.")
    expect(page.url()).toBe(`${suite.stack.main.url}/console/`)
    expect(await page.evaluate(() => sessionStorage.getItem("plinth.token"))).toBeNull()
  })

  it("a 401 drops the token and says the session ended", async () => {
    const page = await signInAs("expired-session@plinth.test", "member")
    await page.evaluate(() => sessionStorage.setItem("plinth.token", "not-a-jwt"))
    await page.reload()
    expect(await page.getByRole("alert").textContent()).toBe("Your session has ended. Please sign in again.")
    expect(await page.evaluate(() => sessionStorage.getItem("plinth.token"))).toBeNull()
  })

  it("a user without a password sets one in their profile, then signs in with it (not in production)", async () => {
    const email = "sets-a-password@plinth.test"
    const page = await signInAs(email, "staff")
    await page.getByRole("banner").getByRole("link", { name: "Profile" }).click()
    await page.getByLabel("New password").fill("correct horse battery")
    await page.getByRole("button", { name: "Set password" }).click()
    await page.getByRole("status").filter({ hasText: "Your password is set." }).waitFor()
    await page.getByRole("button", { name: "Sign out" }).click()

    const form = page.getByRole("form", { name: "Or sign in with a password" })
    await form.getByLabel("Email").fill(email)
    await form.getByLabel("Password").fill("wrong password")
    await form.getByRole("button", { name: "Sign in" }).click()
    expect(await form.getByRole("alert").textContent()).toBe("Wrong email or password.")
    await form.getByLabel("Password").fill("correct horse battery")
    await form.getByRole("button", { name: "Sign in" }).click()
    await page.getByRole("button", { name: "Sign out" }).waitFor()
  })
})

describe("the shell and the admin screens", () => {
  it("a member sees no admin entries", async () => {
    const page = await signInAs("plain-member@plinth.test", "member")
    const navigation = page.getByRole("navigation", { name: "Main" })
    expect(await navigation.getByRole("link", { name: "Overview" }).count()).toBe(1)
    for (const name of ["Users", "Audit", "New app"]) expect(await navigation.getByRole("link", { name }).count(), name).toBe(0)
    await page.goto(`${suite.stack.main.url}/console/users`)
    await page.getByRole("heading", { level: 1, name: "Not allowed" }).waitFor()
  })

  it("an admin is offered no owner or admin role in the Users screen", async () => {
    await inviteAsDatabaseAdmin(suite.stack.db, "managed-member@plinth.test", "member")
    await inviteAsDatabaseAdmin(suite.stack.db, "an-owner@plinth.test", "owner")
    const page = await signInAs("an-admin@plinth.test", "admin")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click()
    await page.getByRole("table", { name: "All users" }).waitFor()

    const memberRole = page.getByRole("combobox", { name: "Role of managed-member@plinth.test" })
    expect(await memberRole.getByRole("option").allTextContents()).toEqual(["Staff", "Member"])
    expect(await page.getByLabel("Role", { exact: true }).getByRole("option").allTextContents()).toEqual(["Staff", "Member"])
    // An owner, and the admin themselves, are not theirs to manage.
    expect(await page.getByRole("combobox", { name: "Role of an-owner@plinth.test" }).count()).toBe(0)
    expect(await page.getByRole("button", { name: "Deactivate an-owner@plinth.test" }).count()).toBe(0)
    expect(await page.getByRole("combobox", { name: "Role of an-admin@plinth.test" }).count()).toBe(0)

    await memberRole.selectOption("staff")
    await page.getByRole("status").filter({ hasText: "managed-member@plinth.test is now staff." }).waitFor()
  })

  it("deactivating a user in the Users screen stops their next sign-in", async () => {
    const link = linkFor(await inviteAsDatabaseAdmin(suite.stack.db, "leaving@plinth.test", "staff"))
    const owner = await signInAs("deactivating-owner@plinth.test", "owner")
    await owner.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click()
    await owner.getByRole("button", { name: "Deactivate leaving@plinth.test", exact: true }).click()
    await owner.getByRole("status").filter({ hasText: "leaving@plinth.test is deactivated" }).waitFor()
    await owner.getByRole("button", { name: "Activate leaving@plinth.test", exact: true }).waitFor()

    const leaving = await suite.newPage()
    await leaving.goto(link)
    expect(await leaving.getByRole("alert").textContent()).toBe("This sign-in link is invalid, already used or expired. Please ask for a new one below.")
    expect(await leaving.evaluate(() => sessionStorage.getItem("plinth.token"))).toBeNull()
  })

  it("the Audit screen lists events newest first", async () => {
    const page = await signInAs("reads-the-audit@plinth.test", "owner")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click()
    const table = page.getByRole("table", { name: /latest/ })
    await table.waitFor()
    // The newest event is this owner's own sign-in.
    const firstRow = table.getByRole("row").nth(1)
    expect(await firstRow.getByRole("cell").nth(1).textContent()).toBe("user.sign_in")
  })
})

describe("live", () => {
  it("a resync (the server's LISTEN connection is back) reads introspection again: a table created meanwhile shows up with no move", async () => {
    const page = await signInAs("live-owner@plinth.test", "owner")
    const navigation = page.getByRole("navigation", { name: "Main" })
    await navigation.getByRole("status").filter({ hasText: "Loading tables" }).waitFor({ state: "detached" })
    const jwt = (await page.evaluate(() => sessionStorage.getItem("plinth.token")))!
    const created = await post(suite.stack.main.url, "/sql", { sql: "SELECT sys.create_table($1, $2)", params: ["invoices", [{ name: "number", type: "text" }]] }, { token: jwt })
    expect(created.status).toBe(200)
    const invoices = navigation.getByRole("link", { name: "Invoices" })
    expect(await invoices.count()).toBe(0)

    // The tab's stream may still be opening at the first kill: kill again until it hears its resync.
    const shown = await eventually(async () => {
      await query(suite.stack.db.adminUrl, (sql) =>
        sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'plinth listen'`)
      return invoices.waitFor({ timeout: 3_000 }).then(() => true, () => false)
    }, 20_000)
    expect(shown).toBe(true)
  }, 30_000)
})

describe("accessibility (axe-core, WCAG 2 A and AA)", () => {
  it("has no violations on the sign-in, shell, Users and Audit screens", async () => {
    const page = await suite.newPage()
    await page.goto(`${suite.stack.main.url}/console/`)
    await page.getByRole("heading", { level: 1, name: "Sign in to Plinth" }).waitFor()
    await expectNoAxeViolations(page, "sign-in")

    const owner = await signInAs("axe-owner@plinth.test", "owner")
    await owner.getByRole("heading", { level: 1, name: "Public" }).waitFor()
    await expectNoAxeViolations(owner, "shell")

    await owner.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click()
    await owner.getByRole("table", { name: "All users" }).waitFor()
    await expectNoAxeViolations(owner, "users")

    await owner.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click()
    await owner.getByRole("table", { name: /latest/ }).waitFor()
    await expectNoAxeViolations(owner, "audit")
  })
})
