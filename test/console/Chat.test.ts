/**
 * The console's chat (issue #26) in a real browser, the model replaced by the fake Anthropic
 * server: a reply streams (its text shows before it ends), a reload mid-reply attaches to it again
 * from its first token, Stop ends it on the server (the fake's request is cut) and keeps its text,
 * tool calls show as cards with a summary and their result (and the navigation refreshes at
 * once), a plan as a checklist and a page preview rendered, an error leaves the conversation
 * usable, Continue resumes a reply cut by the step bound; no axe-core violation. The tool cards'
 * words are checked on their own too.
 */
import AxeBuilder from "@axe-core/playwright"
import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { applyEvent, beforeRunningReply, canContinue, emptyReply, entriesOf } from "../../console/src/chat/reply.ts"
import { changesApp, describeCall, describeResult } from "../../console/src/chat/tools.ts"
import { hangAfter, scriptedTurns, text, toolUse, type Turns } from "../chat/helpers.ts"
import { post, type SignIn, signedIn } from "../support/auth.ts"
import { launchBrowser } from "../support/browser.ts"
import { ensureConsoleBuilt } from "../support/build.ts"
import { type ChatStack, startChatStack } from "../support/chat.ts"
import { consoleTabs } from "../support/consoleTabs.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningService, startService } from "../support/services.ts"

const MAX_STEPS = 3

const fence = "```"
/** The dashboard the scripted model writes: a value, a bar chart and a table (docs/pages.md). */
const CRM_DASHBOARD = [
  "# Sales",
  "",
  `${fence}sql totals`,
  "SELECT coalesce(sum(total), 0) AS revenue FROM orders",
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
  "SELECT customer, status, total FROM orders ORDER BY customer, total",
  fence,
  "",
  `${fence}table query=all_orders title="All orders"`,
  fence,
  ""
].join("\n")

let stack: ChatStack
/** The main service whose console's config.json names this chat service (CHAT_URL). */
let consoleService: RunningService
let browser: Browser
let owner: SignIn
let member: SignIn
let turns: Turns

beforeAll(async () => {
  await ensureConsoleBuilt()
  stack = await startChatStack({ CORS_ORIGINS: "*", CHAT_MAX_STEPS: String(MAX_STEPS) })
  consoleService = await startService("main", stack.db.mainUrl, { ...stack.env, CHAT_URL: stack.chat.url })
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "chat-owner@plinth.test", "owner")
  member = await signedIn(stack, "chat-member@plinth.test", "member")
  browser = await launchBrowser()
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await consoleService?.close()
  await stack?.close()
})

const { openAs, recycle } = consoleTabs(() => browser, () => `${consoleService.url}/console`)
afterEach(async () => {
  turns.reset()
  await recycle()
})

const expectNoAxeViolations = async (page: Page, screen: string) => {
  const results = await new AxeBuilder({ page }).withTags(["wcag2a", "wcag2aa"]).analyze()
  const found = results.violations.map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`)
  expect(found, screen).toEqual([])
}

/** The owner's console with the chat open, on a new conversation. */
const chatTab = async (who: SignIn = owner) => {
  const page = await openAs(who, "/")
  await page.getByRole("button", { name: "Chat" }).click()
  const chat = page.getByRole("complementary", { name: "Chat" })
  await chat.getByRole("button", { name: "New conversation" }).click()
  await chat.getByRole("heading", { name: "Untitled conversation" }).waitFor()
  return { page, chat }
}

const send = async (chat: ReturnType<Page["getByRole"]>, content: string) => {
  await chat.getByLabel("Message", { exact: true }).fill(content)
  await chat.getByRole("button", { name: "Send" }).click()
}

const messagesOf = (chat: ReturnType<Page["getByRole"]>) => chat.getByRole("list", { name: "Messages" })

describe("the chat in the console", () => {
  it("streams a reply (its text shows before it ends); Stop ends it on the server and keeps its text; the conversation goes on", async () => {
    const { chat } = await chatTab()
    const abortedBefore = stack.model.aborted()
    turns.push(hangAfter("Let me think about customers and orders. "))
    await send(chat, "Make me a CRM")
    // The text is there while the reply still runs (the model has not finished it).
    await messagesOf(chat).getByText("Let me think about customers and orders.").waitFor()
    await chat.getByRole("button", { name: "Stop" }).waitFor()
    // Named after the first message at once.
    await chat.getByRole("heading", { name: "Make me a CRM" }).waitFor()

    await chat.getByRole("button", { name: "Stop" }).click()
    await chat.getByRole("status").filter({ hasText: "The reply was stopped." }).waitFor()
    expect(await eventually(async () => stack.model.aborted() > abortedBefore)).toBe(true)
    expect(await messagesOf(chat).getByText("Let me think about customers and orders.").count()).toBe(1)
    // The button goes once the stream has ended, which can be a render after the status.
    await chat.getByRole("button", { name: "Stop" }).waitFor({ state: "detached" })

    turns.push(text("A short answer then."))
    await send(chat, "Just say something")
    await messagesOf(chat).getByText("A short answer then.").waitFor()
    await chat.getByRole("button", { name: "Send" }).and(chat.locator(":disabled")).waitFor()
    await chat.getByRole("listitem").filter({ hasText: "Just say something" }).waitFor()
  })

  it("a reload mid-reply attaches to the running reply and shows its text from the start; no second reply starts", async () => {
    const { page, chat } = await chatTab()
    turns.push(hangAfter("The first words of a long answer. "))
    await send(chat, "Tell me everything")
    await messagesOf(chat).getByText("The first words of a long answer.").waitFor()
    const repliesBefore = stack.model.requests.filter((request) => request.body.stream === true).length

    await page.reload()
    const again = page.getByRole("complementary", { name: "Chat" })
    await messagesOf(again).getByText("The first words of a long answer.").waitFor()
    await messagesOf(again).getByText("Tell me everything").waitFor()
    await again.getByRole("button", { name: "Stop" }).waitFor()
    expect(stack.model.requests.filter((request) => request.body.stream === true).length).toBe(repliesBefore)

    // A second tab of the same person, opening the conversation from the list, attaches too.
    const second = await openAs(owner, "/")
    await second.getByRole("button", { name: "Chat" }).click()
    const other = second.getByRole("complementary", { name: "Chat" })
    await other.getByRole("region", { name: "Conversations" }).getByRole("button", { name: "Tell me everything", exact: true }).click()
    await messagesOf(other).getByText("The first words of a long answer.").waitFor()
    await other.getByRole("button", { name: "Stop" }).waitFor()
    expect(stack.model.requests.filter((request) => request.body.stream === true).length).toBe(repliesBefore)

    await again.getByRole("button", { name: "Stop" }).click()
    await again.getByRole("status").filter({ hasText: "The reply was stopped." }).waitFor()
    // The other tab sees the reply end too.
    await other.getByRole("status").filter({ hasText: "The reply was stopped." }).waitFor()
    expect(await messagesOf(again).getByText("The first words of a long answer.").count()).toBe(1)
  })

  it("shows each tool call as a card with a summary and its result; the navigation shows a new table at once; a plan as a checklist; a page preview rendered", async () => {
    const { page, chat } = await chatTab()
    turns.push(
      toolUse("toolu_plan", "propose_plan", { title: "The CRM", steps: ["Create customers", "Add sample data"] }, "Here is the plan."),
      toolUse("toolu_customers", "propose_create_table", { table_name: "customers", columns: [{ name: "name", type: "text" }, { name: "email", type: "email" }] }),
      toolUse("toolu_seed", "propose_seed_data", { table_name: "customers", rows: [{ name: "Ada", email: "ada@example.com" }, { name: "Bob", email: "bob@example.com" }] }),
      toolUse("toolu_preview", "preview_page", { title: "Customers", source: "# Customer list\n\nEveryone we know.\n" }),
      text("All set.")
    )
    await send(chat, "Plan a CRM")
    // The plan: a checklist of its steps.
    const plan = chat.getByRole("article", { name: /^Plan: / })
    await plan.getByRole("checkbox", { name: "Create customers" }).waitFor()
    await plan.getByRole("checkbox", { name: "Add sample data" }).check()
    const table = chat.getByRole("article", { name: "Create table: Table customers: name text, email email" })
    await table.getByText("created table customers").waitFor()
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers" }).waitFor()
    await chat.getByRole("article", { name: "Seed data: 2 rows into customers" }).getByText("inserted 2 rows").waitFor()
    // The step bound (3) ends the reply after the rows: Continue resumes it.
    await chat.getByRole("alert").filter({ hasText: "continue resumes it" }).waitFor()
    await chat.getByRole("button", { name: "Continue" }).click()
    const preview = chat.getByRole("article", { name: "Preview page: Preview of Customers" })
    await preview.getByRole("region", { name: "Page preview" }).getByRole("heading", { name: "Customer list" }).waitFor()
    await messagesOf(chat).getByText("All set.").waitFor()
    await expectNoAxeViolations(page, "the chat with tool cards")
  })

  it("an error is shown and leaves the conversation usable", async () => {
    const { chat } = await chatTab()
    turns.push({ kind: "http_error", status: 400, message: "prompt is too long" })
    await send(chat, "A question that fails")
    await chat.getByRole("alert").filter({ hasText: "prompt is too long" }).waitFor()
    turns.push(text("Working again."))
    await send(chat, "Try again")
    await messagesOf(chat).getByText("Working again.").waitFor()
  })

  it("lists conversations newest first, opens and deletes them", async () => {
    const { page, chat } = await chatTab()
    turns.push(text("First reply."))
    await send(chat, "First conversation")
    await messagesOf(chat).getByText("First reply.").waitFor()
    await chat.getByRole("button", { name: "New conversation" }).click()
    turns.push(text("Second reply."))
    await send(chat, "Second conversation")
    await messagesOf(chat).getByText("Second reply.").waitFor()
    const list = chat.getByRole("region", { name: "Conversations" })
    // The newest first (the one open now); the fake model titles every conversation "ok" once its first reply ends.
    expect(await eventually(async () => (await list.getByRole("button", { name: /^Delete / }).count()) >= 2)).toBe(true)
    const newest = list.getByRole("listitem").first().getByRole("button").first()
    expect(await newest.getAttribute("aria-current")).toBe("true")
    expect(await eventually(async () => (await newest.textContent()) === "ok")).toBe(true)
    await list.getByRole("listitem").nth(1).getByRole("button").first().click()
    await messagesOf(chat).getByText("First reply.").waitFor()
    const before = await list.getByRole("listitem").count()
    // Delete asks first: "Keep it" keeps it, "Yes, delete it" deletes it.
    await list.getByRole("listitem").first().getByRole("button", { name: /^Delete / }).click()
    await list.getByRole("alertdialog").getByRole("button", { name: "Keep it" }).click()
    await list.getByRole("alertdialog").waitFor({ state: "detached" })
    expect(await list.getByRole("listitem").count()).toBe(before)
    await list.getByRole("listitem").first().getByRole("button", { name: /^Delete / }).click()
    await list.getByRole("alertdialog").waitFor()
    await expectNoAxeViolations(page, "the chat asking before a delete")
    await list.getByRole("alertdialog").getByRole("button", { name: "Yes, delete it" }).click()
    expect(await eventually(async () => (await list.getByRole("listitem").count()) === before - 1)).toBe(true)
  })

  it("acceptance: a scripted CRM conversation makes two tables, their rows and a dashboard; the navigation shows them; the page renders, for a member over their own rows", async () => {
    const sqlAs = async (who: SignIn, statement: string, params: ReadonlyArray<unknown> = []) => {
      const answer = await post<{ rows: Array<Record<string, unknown>> }>(stack.main.url, "/sql", { sql: statement, params }, {
        token: who.token,
        headers: { "x-app-schema": "crm" }
      })
      expect(answer.status, JSON.stringify(answer.body)).toBe(200)
      return answer.body.rows
    }
    await post(stack.main.url, "/sql", { sql: "SELECT sys.create_app($1, $2, $3)", params: ["crm", "CRM", "Customers and orders"] }, { token: owner.token })
    const page = await openAs(owner, "/apps/crm")
    await page.getByRole("button", { name: "Chat" }).click()
    const chat = page.getByRole("complementary", { name: "Chat" })
    await chat.getByRole("button", { name: "New conversation" }).click()
    await chat.getByRole("heading", { name: "Untitled conversation" }).waitFor()

    turns.push(
      {
        kind: "reply",
        blocks: [
          { type: "text", text: "I will make the tables and some sample data." },
          { type: "tool_use", id: "toolu_customers", name: "propose_create_table", input: { table_name: "customers", columns: [{ name: "name", type: "text" }, { name: "city", type: "text" }] } },
          {
            type: "tool_use",
            id: "toolu_orders",
            name: "propose_create_table",
            input: { table_name: "orders", columns: [{ name: "customer", type: "text" }, { name: "status", type: "text" }, { name: "total", type: "currency" }] }
          },
          { type: "tool_use", id: "toolu_seed_customers", name: "propose_seed_data", input: { table_name: "customers", rows: [{ name: "Ada", city: "London" }, { name: "Grace", city: "New York" }] } },
          {
            type: "tool_use",
            id: "toolu_seed_orders",
            name: "propose_seed_data",
            input: {
              table_name: "orders",
              rows: [{ customer: "Ada", status: "open", total: 100 }, { customer: "Grace", status: "open", total: 250.5 }, { customer: "Ada", status: "shipped", total: 49.5 }]
            }
          }
        ]
      },
      toolUse("toolu_page", "propose_create_page", { slug: "dashboard", title: "Sales dashboard", source: CRM_DASHBOARD }, "Now the dashboard."),
      text("Your CRM is ready.")
    )
    await send(chat, "Make me a CRM with customers and orders, some sample data, and a dashboard page")
    await chat.getByRole("article", { name: "Create table: Table customers: name text, city text" }).getByText("created table customers").waitFor()
    await chat.getByRole("article", { name: "Create table: Table orders: customer text, status text, total currency" }).getByText("created table orders").waitFor()
    await chat.getByRole("article", { name: "Seed data: 2 rows into customers" }).getByText("inserted 2 rows").waitFor()
    await chat.getByRole("article", { name: "Seed data: 3 rows into orders" }).getByText("inserted 3 rows").waitFor()
    await chat.getByRole("article", { name: "Create page: Page dashboard (Sales dashboard)" }).getByText("page dashboard created").waitFor()
    await messagesOf(chat).getByText("Your CRM is ready.").waitFor()

    const navigation = page.getByRole("navigation", { name: "Main" })
    const tables = navigation.getByRole("region", { name: "Tables", exact: true })
    await tables.getByRole("link", { name: "Customers" }).waitFor()
    await tables.getByRole("link", { name: "Orders" }).waitFor()
    await navigation.getByRole("region", { name: "Pages" }).getByRole("link", { name: "Sales dashboard" }).click()
    await page.getByRole("heading", { level: 1, name: "Sales dashboard" }).waitFor()
    await page.getByRole("figure", { name: "Revenue" }).getByText("$400.00").waitFor()
    const chart = page.getByRole("figure", { name: "Orders by status" })
    for (const bar of ["open: 2", "shipped: 1"]) await chart.getByRole("img", { name: bar, exact: true }).waitFor()
    expect(await page.getByRole("table", { name: "All orders" }).getByRole("row").allTextContents()).toEqual([
      "CustomerStatusTotal",
      "Adashipped49.50",
      "Adaopen100.00",
      "Graceopen250.50"
    ])

    // A member sees the page computed over their own rows only.
    const crmMember = await signedIn(stack, "crm-member@plinth.test", "member")
    await sqlAs(crmMember, "INSERT INTO orders (customer, status, total) VALUES ('Mia', 'cancelled', 7)")
    const theirs = await openAs(crmMember, "/apps/crm/pages/dashboard")
    await theirs.getByRole("figure", { name: "Revenue" }).getByText("$7.00").waitFor()
    await theirs.getByRole("figure", { name: "Orders by status" }).getByRole("img", { name: "cancelled: 1", exact: true }).waitFor()
    expect(await theirs.getByRole("table", { name: "All orders" }).getByRole("row").allTextContents()).toEqual(["CustomerStatusTotal", "Miacancelled7.00"])
  })

  it("is for owners and admins only", async () => {
    const page = await openAs(member, "/")
    await page.getByRole("button", { name: "Sign out" }).waitFor()
    expect(await page.getByRole("button", { name: "Chat" }).count()).toBe(0)
  })
})

describe("tool calls in words", () => {
  it("summarise arguments and results, with or without the propose_ prefix", () => {
    expect(describeCall("propose_create_table", { table_name: "orders", columns: [{ name: "total", type: "currency" }] })).toBe("Table orders: total currency")
    expect(describeResult("create_table", { table_name: "orders" }, { result: {} })).toBe("created table orders")
    expect(describeResult("propose_seed_data", { table_name: "orders", rows: [{}, {}] }, { result: { rowCount: 12 } })).toBe("inserted 12 rows")
    expect(describeResult("propose_update_page", { slug: "orders" }, { result: {} })).toBe("page orders updated")
    expect(describeResult("propose_create_page", { slug: "orders" }, { error: "block 2 (chart): unknown query" })).toBe("Failed: block 2 (chart): unknown query")
    expect(describeCall("propose_delete_rows", { table_name: "orders", where: "total < 0" })).toBe("orders where total < 0")
    expect(changesApp("propose_create_table")).toBe(true)
    expect(changesApp("create_page")).toBe(true)
    expect(changesApp("propose_plan")).toBe(false)
    expect(changesApp("preview_page")).toBe(false)
  })
})

describe("a reply as the chat shows it", () => {
  const call = { id: "toolu_1", name: "propose_create_table", args: { table_name: "t" } }
  const message = (id: string, role: "user" | "assistant", content: Record<string, unknown>, status = "complete", error: string | null = null) =>
    ({ id, role, content, status, created_at: "", error }) as unknown as Parameters<typeof entriesOf>[0][number]

  it("folds tokens into one text, completes a tool card with its result, keeps the status transient, and ends on done, a stop or an error", () => {
    let reply = emptyReply()
    reply = applyEvent(reply, { event: "token", data: { text: "Hel" } })
    reply = applyEvent(reply, { event: "token", data: { text: "lo" } })
    reply = applyEvent(reply, { event: "status", data: { text: "Looking at the data…" } })
    expect(reply.status).toBe("Looking at the data…")
    reply = applyEvent(reply, { event: "status", data: { text: "" } })
    expect(reply.status).toBe("")
    reply = applyEvent(reply, { event: "tool_call", data: call })
    reply = applyEvent(reply, {
      event: "done",
      data: { message: { id: "m1", role: "assistant", content: { type: "tool_call", tool_calls: [call] }, status: "complete" }, streaming_continues: true, tool_result: { result: {} } }
    })
    expect(reply.completed).toEqual([call])
    expect(reply.ended).toBe(false)
    expect(reply.entries.map((entry) => (entry.kind === "text" ? entry.text : entry.result))).toEqual(["Hello", { result: {} }])
    const stopped = applyEvent(reply, { event: "done", data: { message: { id: "m2", role: "assistant", content: { type: "text", text: "" }, status: "complete" }, stopped: true } })
    expect([stopped.ended, stopped.stopped, stopped.completed]).toEqual([true, true, []])
    const failed = applyEvent(reply, { event: "error", data: { error: "the model failed" } })
    expect([failed.ended, failed.error]).toEqual([true, "the model failed"])
  })

  it("reads stored messages: Continue after a tool call, the running reply's messages left to its stream", () => {
    const messages = [
      message("u1", "user", { type: "text", text: "Build it" }),
      message("a1", "assistant", { type: "tool_call", tool_calls: [call], text: "On it.", tool_result: { result: {} } }),
      message("a2", "assistant", { type: "text", text: "" }, "pending")
    ]
    expect(entriesOf(messages).map((entry) => entry.kind)).toEqual(["text", "text", "tool"])
    expect(beforeRunningReply(messages).map((m) => m.id)).toEqual(["u1"])
    expect(canContinue(messages)).toBe(false)
    expect(canContinue(messages.slice(0, 2))).toBe(true)
    expect(canContinue(messages.slice(0, 1))).toBe(false)
  })
})
