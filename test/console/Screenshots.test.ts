/**
 * The README's pictures of the console, taken from test fixtures: `npm run screenshots` writes
 * docs/screenshots/*.png (skipped in other runs). Fixtures: an owner, an app with two related
 * tables made through /sql with a few rows, an admin and a member, the audit trail all that left, and
 * a page with values, a chart and a table; and the chat after a scripted reply of the fake model.
 */
import { mkdirSync } from "node:fs"
import path from "node:path"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signInTab } from "../support/consoleTabs.ts"
import { launchBrowser } from "../support/browser.ts"
import { type AuthStack, post, signedIn, startAuthStack } from "../support/auth.ts"
import { ensureConsoleBuilt } from "../support/build.ts"
import { startChatStack } from "../support/chat.ts"
import { startService } from "../support/services.ts"

const OUTPUT = process.env["SCREENSHOTS_DIR"]

let stack: AuthStack
let browser: Browser

beforeAll(async () => {
  if (OUTPUT === undefined) return
  mkdirSync(OUTPUT, { recursive: true })
  await ensureConsoleBuilt()
  stack = await startAuthStack()
  browser = await launchBrowser()
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await stack?.close()
})

const fence = "```"
const DASHBOARD = [
  "# Sales at a glance",
  "",
  "Orders of all [customers](table:customers), paid and open. Figures are live: they come from the orders as you may see them.",
  "",
  `${fence}sql totals`,
  "SELECT coalesce(sum(total), 0) AS revenue, count(*) AS orders FROM orders",
  fence,
  "",
  `${fence}value query=totals column=revenue label="Revenue" format=currency currency=GBP`,
  fence,
  "",
  `${fence}value query=totals column=orders label="Orders"`,
  fence,
  "",
  `${fence}sql by_customer`,
  "SELECT c.name AS customer, o.status, sum(o.total) AS total FROM orders o JOIN customers c ON c.id = o.customer GROUP BY 1, 2 ORDER BY 1, 2",
  fence,
  "",
  `${fence}chart query=by_customer type=bar x=customer y=total series=status title="Revenue by customer"`,
  fence,
  "",
  `${fence}sql open_orders`,
  "SELECT customer_display AS customer, total, status FROM orders_v WHERE status = 'open' ORDER BY total DESC",
  fence,
  "",
  `${fence}table query=open_orders title="Open orders"`,
  fence,
  ""
].join("\n")

const shoot = (page: Page, name: string) => page.screenshot({ path: path.join(OUTPUT!, `${name}.png`) })

describe.skipIf(OUTPUT === undefined)("screenshots of the console", () => {
  it("takes the sign-in, app, Users, Audit, table and page screens", async () => {
    const owner = await signedIn(stack, "ada@example.com", "owner")
    const sql = async (statement: string, params: ReadonlyArray<unknown>, app = "sales") => {
      const answer = await post(stack.main.url, "/sql", { sql: statement, params }, { token: owner.token, headers: { "x-app-schema": app } })
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
    }
    await sql("SELECT sys.update_profile(NULL, $1)", ["Ada Lovelace"], "public")
    await sql("SELECT sys.create_app($1, $2, $3)", ["sales", "Sales", "Customers, their orders and invoices"], "public")
    await sql("SELECT sys.create_table($1, $2)", ["customers", [{ name: "name", type: "text", required: true }, { name: "email", type: "email" }]])
    await sql("SELECT sys.create_table($1, $2)", ["orders", [
      { name: "customer", type: "reference", references: "customers", required: true },
      { name: "total", type: "currency" },
      { name: "status", type: "choice", options: [{ value: "open", label: "Open", color: "blue" }, { value: "paid", label: "Paid", color: "green" }] }
    ]])
    await sql("SELECT sys.create_table($1, $2)", ["order_lines", [{ name: "sale", type: "reference", references: "orders" }, { name: "quantity", type: "integer" }]])
    await sql("INSERT INTO customers (name, email) VALUES ($1, $2), ($3, $4), ($5, $6)", [
      "Analytical Engines Ltd", "orders@engines.example", "Difference & Co", "buy@difference.example", "Jacquard Looms", "looms@jacquard.example"
    ])
    for (const [customer, total, status] of [["Analytical Engines Ltd", "12500", "open"], ["Difference & Co", "980.5", "paid"], ["Jacquard Looms", "4310", "paid"]]) {
      await sql("INSERT INTO orders (customer, total, status) SELECT id, $2, $3 FROM customers WHERE name = $1", [customer, total, status])
    }
    for (const [email, role] of [["grace@example.com", "admin"], ["mia@example.com", "member"], ["tim@example.com", "staff"]] as const) {
      await post(stack.main.url, "/admin/invite", { email, role }, { token: owner.token })
    }
    await signedIn(stack, "linus@example.com", "member")

    const page = await (await browser.newContext({ viewport: { width: 1200, height: 720 } })).newPage()
    await page.goto(`${stack.main.url}/console/`)
    await page.getByRole("heading", { level: 1, name: "Sign in to Plinth" }).waitFor()
    await shoot(page, "sign-in")

    // Signed in as the owner of the fixtures (their link was spent making them).
    await signInTab(page, `${stack.main.url}/console`, { token: owner.token, user: { ...owner.user, display_name: "Ada Lovelace" } }, "/apps/sales")
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Order lines" }).waitFor()
    await shoot(page, "app")

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click()
    await page.getByRole("table", { name: "All users" }).waitFor()
    await shoot(page, "users")

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click()
    await page.getByRole("table", { name: /latest/ }).waitFor()
    await shoot(page, "audit")

    await page.goto(`${stack.main.url}/console/apps/sales/tables/orders`)
    await page.getByRole("table", { name: "Orders" }).getByRole("row").nth(3).waitFor()
    await shoot(page, "table")

    await sql("SELECT sys.create_page($1, $2, $3)", ["dashboard", "Dashboard", DASHBOARD])
    await page.goto(`${stack.main.url}/console/apps/sales/pages/dashboard`)
    await page.getByRole("figure", { name: "Revenue by customer" }).getByRole("img").nth(3).waitFor()
    await page.getByRole("table", { name: "Open orders" }).getByRole("row").nth(1).waitFor()
    await page.setViewportSize({ width: 1200, height: 1000 })
    await shoot(page, "page")
  }, 60_000)
})

describe.skipIf(OUTPUT === undefined)("screenshot of the chat", () => {
  it("takes the chat beside an app, after a reply that made a table, its rows and a page", async () => {
    const chatStack = await startChatStack({ CORS_ORIGINS: "*" })
    // A main service whose console names this chat service (config.json's chatUrl).
    const consoleService = await startService("main", chatStack.db.mainUrl, { ...chatStack.env, CHAT_URL: chatStack.chat.url })
    try {
      const owner = await signedIn(chatStack, "ada@example.com", "owner")
      await post(chatStack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["sales", "Sales", "Customers and their orders"] }, { token: owner.token })
      chatStack.model.respondWith((request) => {
        if (request.body.stream !== true) return { kind: "reply", blocks: [{ type: "text", text: "A small CRM" }] }
        const sent = JSON.stringify(request.body.messages)
        const step = sent.includes("toolu_page") ? 2 : sent.includes("toolu_seed") ? 1 : 0
        const turns = [
          {
            kind: "reply" as const,
            blocks: [
              { type: "text" as const, text: "I'll make a table of customers and add a few to start with." },
              {
                type: "tool_use" as const,
                id: "toolu_customers",
                name: "propose_create_table",
                input: { table_name: "customers", columns: [{ name: "name", type: "text", required: true }, { name: "email", type: "email" }, { name: "city", type: "text" }] }
              },
              {
                type: "tool_use" as const,
                id: "toolu_seed",
                name: "propose_seed_data",
                input: {
                  table_name: "customers",
                  rows: [
                    { name: "Analytical Engines Ltd", email: "orders@engines.example", city: "London" },
                    { name: "Difference & Co", email: "buy@difference.example", city: "Cambridge" },
                    { name: "Jacquard Looms", email: "looms@jacquard.example", city: "Lyon" }
                  ]
                }
              }
            ]
          },
          {
            kind: "reply" as const,
            blocks: [{
              type: "tool_use" as const,
              id: "toolu_page",
              name: "propose_create_page",
              input: { slug: "customers-by-city", title: "Customers by city", source: `# Customers by city\n\n${fence}sql by_city\nSELECT city, count(*) AS customers FROM customers GROUP BY city ORDER BY city\n${fence}\n\n${fence}chart query=by_city type=bar x=city y=customers\n${fence}\n` }
            }]
          },
          { kind: "reply" as const, blocks: [{ type: "text" as const, text: "Done: the customers table has three rows, and the page Customers by city charts them." }] }
        ]
        return turns[Math.min(step, turns.length - 1)]
      })
      const page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage()
      await signInTab(page, `${consoleService.url}/console`, { token: owner.token, user: { ...owner.user, display_name: "Ada Lovelace" } }, "/apps/sales")
      await page.getByRole("button", { name: "Chat" }).click()
      const chat = page.getByRole("complementary", { name: "Chat" })
      await chat.getByRole("button", { name: "New conversation" }).click()
      await chat.getByLabel("Message", { exact: true }).fill("Make me a table of customers with a few sample rows, and a page of them by city")
      await chat.getByRole("button", { name: "Send" }).click()
      await chat.getByText("Done: the customers table has three rows").waitFor()
      await chat.getByText("page customers-by-city created").waitFor()
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers by city" }).waitFor()
      await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers", exact: true }).click()
      await page.getByRole("table", { name: "Customers" }).getByRole("row").nth(3).waitFor()
      await page.mouse.wheel(0, -10_000)
      await shoot(page, "chat")
    } finally {
      await consoleService.close()
      await chatStack.close()
    }
  }, 60_000)
})
