/**
 * The console in a multi-tenant deployment (issue #25): the sign-in screen asks for the
 * organization (the tenant), kept for the tab and sent as X-Tenant on every call and as `?tenant=`
 * on the event stream; links printed by `plinth invite --tenant` or mailed from a tenant carry it,
 * and the callback takes it (and the token) out of the address. A user of one tenant sees that
 * tenant's apps only.
 */
import AxeBuilder from "@axe-core/playwright"
import { randomBytes } from "node:crypto"
import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { mailEnv, post } from "../support/auth.ts"
import { launchBrowser } from "../support/browser.ts"
import { ensureConsoleBuilt } from "../support/build.ts"
import { runPlinth } from "../support/cli.ts"
import { consoleTabs } from "../support/consoleTabs.ts"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { type FakeMailApi, startFakeMailApi } from "../support/FakeMailApi.ts"
import { type RunningService, startService } from "../support/services.ts"

let control: TestDatabase
let mail: FakeMailApi
let main: RunningService
let browser: Browser
/** Each tenant's owner's JWT. */
const owners = new Map<string, string>()
const suffix = randomBytes(4).toString("hex")
// Named like the suite's databases, so the run's teardown drops them with the rest.
const acme = `plinth_test_acme_${suffix}`
const globex = `plinth_test_globex_${suffix}`

const cliEnv = () => ({ DATABASE_URL: control.mainUrl, DATABASE_ADMIN_URL: control.adminUrl, MULTI_TENANT: "true" })

/** `plinth invite --tenant`: the printed sign-in link. */
const invite = async (tenant: string, email: string, role: string) => {
  const plinth = runPlinth(["invite", "--tenant", tenant, email, role], cliEnv())
  expect(await plinth.exited, plinth.stderr()).toBe(0)
  return plinth.stdout().match(/https?:\/\/\S+/)![0]
}

/** A link's path and query on this test's server (APP_URL's default names the configured port, not the test's). */
const onServer = (link: string) => {
  const url = new URL(link)
  return `${main.url}${url.pathname}${url.search}`
}

const tokenOf = (link: string) => new URL(link).searchParams.get("token")!

beforeAll(async () => {
  await ensureConsoleBuilt()
  control = await createTestDatabase()
  for (const name of [acme, globex]) {
    const plinth = runPlinth(["tenant", "create", name], cliEnv())
    expect(await plinth.exited, plinth.stderr()).toBe(0)
  }
  mail = await startFakeMailApi()
  const { APP_URL: _appUrl, ...mailSettings } = mailEnv(mail)
  main = await startService("main", control.mainUrl, { MULTI_TENANT: "true", ...mailSettings })
  browser = await launchBrowser()
  // Each tenant has an app of its own, made by its owner.
  for (const [tenant, schema, name] of [[acme, "books", "Acme books"], [globex, "ledger", "Globex ledger"]] as const) {
    const link = await invite(tenant, `owner@${tenant}.test`, "owner")
    const signedIn = await post<{ token: string }>(main.url, "/auth/magic-link/verify", { token: tokenOf(link) }, { headers: { "x-tenant": tenant } })
    expect(signedIn.status).toBe(200)
    owners.set(tenant, signedIn.body.token)
    const created = await post(main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: [schema, name, ""] }, {
      token: signedIn.body.token,
      headers: { "x-tenant": tenant }
    })
    expect(created.status, JSON.stringify(created.body)).toBe(200)
  }
}, 180_000)
afterAll(async () => {
  await browser?.close()
  await main?.close()
  await mail?.close()
  await control?.drop()
})

const { newPage, recycle } = consoleTabs(() => browser, () => `${main.url}/console`)
afterEach(recycle)

/** The apps of the switcher. */
const switcherApps = (page: Page) => page.getByLabel("App", { exact: true }).getByRole("option").allTextContents()

/** Whether the app switcher comes to list exactly `apps` (the tenant's apps arrive after the sign-in shows). */
const switcherShows = (page: Page, apps: ReadonlyArray<string>) =>
  eventually(async () => JSON.stringify(await switcherApps(page)) === JSON.stringify(apps))

/** Opens `link` and waits for the console to be signed in, its event stream opened (with the tenant in its address). */
const openLink = async (page: Page, link: string) => {
  const stream = page.waitForResponse((response) => new URL(response.url()).pathname === "/events")
  await page.goto(onServer(link))
  await page.getByRole("button", { name: "Sign out" }).waitFor()
  return stream
}

describe("GET /events and the tenant", () => {
  /** The stream's status (its body left unread, the connection closed). */
  const open = async (query: string, headers: Record<string, string> = {}) => {
    const controller = new AbortController()
    const response = await fetch(`${main.url}/events?${query}`, { headers, signal: controller.signal })
    controller.abort()
    return response.status
  }

  it("takes the tenant as ?tenant= (EventSource sets no headers), guarded as X-Tenant is; other routes still need the header", async () => {
    const token = owners.get(acme)!
    expect(await open(`token=${token}&tenant=${acme}`)).toBe(200)
    expect(await open(`token=${token}&tenant=${globex}`)).toBe(403)
    expect(await open(`token=${token}&tenant=Not-A-Tenant`)).toBe(400)
    expect(await open(`token=${token}&tenant=no_such_tenant`)).toBe(404)
    expect(await open(`token=${token}`)).toBe(400)
    // The header, when there is one, is the tenant.
    expect(await open(`token=${token}&tenant=${globex}`, { "x-tenant": acme })).toBe(200)
    const sql = await fetch(`${main.url}/sql?tenant=${acme}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ sql: "SELECT 1" })
    })
    expect(sql.status).toBe(400)
  })
})

describe("signing in to a tenant", () => {
  it("a link printed by `plinth invite --tenant` names the tenant; opened, it signs the user in to that tenant only", async () => {
    const link = await invite(acme, `user@${acme}.test`, "admin")
    expect(new URL(link).searchParams.get("tenant")).toBe(acme)
    const page = await newPage()
    const stream = await openLink(page, link)
    // Neither the token nor the tenant stays in the address; the tenant is kept for the tab.
    expect(page.url()).toBe(`${main.url}/console/`)
    expect(await page.evaluate(() => sessionStorage.getItem("plinth.tenant"))).toBe(acme)
    expect(await switcherShows(page, ["Public", "Acme books"]), String(await switcherApps(page))).toBe(true)
    // The event stream names the tenant in its address (EventSource sets no headers), and is accepted.
    expect(new URL(stream.url()).searchParams.get("tenant")).toBe(acme)
    expect(stream.status()).toBe(200)
    // A screen reads through the tenant too.
    await page.getByLabel("App", { exact: true }).selectOption({ label: "Acme books" })
    await page.getByRole("heading", { level: 1, name: "Acme books" }).waitFor()
  })

  it("the sign-in screen asks for the organization; the mailed link carries it and signs the user in to it", async () => {
    // (A tenant's name has underscores, which an email input refuses in a domain.)
    const email = `asks-${suffix}@globex.test`
    await invite(globex, email, "member")
    const page = await newPage()
    await page.goto(`${main.url}/console/`)
    const form = page.getByRole("form", { name: "Get a sign-in link" })
    await form.getByLabel("Organization").fill(globex)
    await form.getByLabel("Email").fill(email)
    await form.getByRole("button", { name: "Email me a sign-in link" }).click()
    await page.getByRole("status").filter({ hasText: "Check your email" }).waitFor()

    const deadline = Date.now() + 5_000
    let mailed: string | undefined
    while (mailed === undefined && Date.now() < deadline) {
      mailed = mail.messages.filter((message) => message.to === email).at(-1)?.text.match(/https?:\/\/\S+/)?.[0]
      if (mailed === undefined) await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(mailed).toBeDefined()
    expect(new URL(mailed!).searchParams.get("tenant")).toBe(globex)

    const signedIn = await newPage()
    await openLink(signedIn, mailed!)
    expect(await switcherShows(signedIn, ["Public", "Globex ledger"]), String(await switcherApps(signedIn))).toBe(true)
    expect(await signedIn.getByRole("banner").textContent()).toContain("(Member)")
  })

  it("an organization that does not exist is said in words", async () => {
    const page = await newPage()
    await page.goto(`${main.url}/console/`)
    const form = page.getByRole("form", { name: "Get a sign-in link" })
    await form.getByLabel("Organization").fill("no_such_org")
    await form.getByLabel("Email").fill("someone@example.test")
    await form.getByRole("button", { name: "Email me a sign-in link" }).click()
    expect(await form.getByRole("alert").textContent()).toBe("There is no organization named no_such_org. Please check its name.")
  })

  it("has no axe-core (WCAG 2 A and AA) violations on the sign-in screen with its Organization fields", async () => {
    const page = await newPage()
    await page.goto(`${main.url}/console/`)
    await page.getByRole("form", { name: "Get a sign-in link" }).getByLabel("Organization").waitFor()
    const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
    expect(results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`)).toEqual([])
  })
})
