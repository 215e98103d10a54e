/**
 * `plinth/client` in a real browser (a headless Chromium from npm), bundled as a web app would
 * bundle it and loaded by a page of another origin: the page signs in, runs /sql, hears a
 * page_change and streams a chat reply, all through the client.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { Browser } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { ChatEvent, PageEvent } from "../../src/client/index.ts"
import { launchBrowser } from "../support/browser.ts"
import { inviteAsDatabaseAdmin, post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, startChatStack } from "../support/chat.ts"
import { bundleClient } from "../support/clientBundle.ts"
import { scriptedTurns, text, type Turns } from "../chat/helpers.ts"

/** The page: each step is a function the test calls with `page.evaluate`, written with the client alone. */
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>plinth/client in a page</title></head>
<body><script type="module">
import { createPlinthClient } from "/client.js"

let client
window.steps = {
  signIn: async (url, chatUrl, linkToken) => {
    client = createPlinthClient({ url, chatUrl })
    return (await client.signIn(linkToken)).user.role
  },
  sql: (sql, params) => client.sql(sql, params),
  listen: async () => {
    const events = await client.events()
    window.firstPageChange = (async () => {
      for await (const event of events) if (event.event === "page_change") return event
    })()
  },
  firstPageChange: () => window.firstPageChange,
  chat: async (content) => {
    const conversation = await client.run((c) => c.chatApi.conversations.create({ payload: { title: "From the page" } }))
    const events = []
    for await (const event of client.chat(conversation.id, content)) events.push(event)
    return events
  }
}
</script></body></html>`

interface Steps {
  signIn: (url: string, chatUrl: string, linkToken: string) => Promise<string>
  sql: (sql: string, params?: ReadonlyArray<unknown>) => Promise<{ rows: Array<Record<string, unknown>>; rowCount: number }>
  listen: () => Promise<void>
  firstPageChange: () => Promise<PageEvent>
  chat: (content: string) => Promise<Array<ChatEvent>>
}
/** The page's steps, as `page.evaluate` callbacks reach them (they run in the page, not here). */
type Page = typeof globalThis & { steps: Steps }

let stack: ChatStack
let turns: Turns
let browser: Browser
let server: Server
let origin: string
let builder: SignIn

beforeAll(async () => {
  const bundle = await bundleClient()
  server = createServer((request, response) => {
    if (request.url === "/client.js") {
      response.writeHead(200, { "content-type": "text/javascript; charset=utf-8" })
      response.end(bundle)
    } else {
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
      response.end(PAGE)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  stack = await startChatStack({ CORS_ORIGINS: origin })
  turns = scriptedTurns(stack.model)
  builder = await signedIn(stack, "client-page-builder@plinth.test", "owner")
  browser = await launchBrowser()
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await stack?.close()
  server?.close()
})

describe("plinth/client in a page of another origin", () => {
  it("signs in, runs /sql, hears a page_change and streams a chat reply", async () => {
    const page = await browser.newPage()
    await page.goto(`${origin}/`)
    await page.waitForFunction(() => (globalThis as unknown as { steps?: unknown }).steps !== undefined)

    const linkToken = await inviteAsDatabaseAdmin(stack.db, "client-page-owner@plinth.test", "owner")
    expect(await page.evaluate(([url, chatUrl, token]) => (globalThis as Page).steps.signIn(url, chatUrl, token), [stack.main.url, stack.chat.url, linkToken] as const)).toBe("owner")

    expect(await page.evaluate(() => (globalThis as Page).steps.sql("SELECT $1::int + 1 AS two", [1]))).toEqual({ rows: [{ two: 2 }], rowCount: 1 })

    await page.evaluate(() => (globalThis as Page).steps.listen())
    const change = await post(stack.main.url, "/sql", { sql: "SELECT sys.create_page('from-the-client-page', 'Hello', '<p>hi</p>')" }, { token: builder.token })
    expect(change.status).toBe(200)
    expect(await page.evaluate(() => (globalThis as Page).steps.firstPageChange())).toEqual({ event: "page_change", data: { schema: "public", slug: "from-the-client-page" } })

    turns.push(text("Hello from the model"))
    const reply = await page.evaluate(() => (globalThis as Page).steps.chat("Say hello"))
    expect(reply.flatMap((event) => (event.event === "token" ? [event.data.text] : [])).join("")).toBe("Hello from the model")
    expect(reply.at(-1)).toMatchObject({ event: "done", data: { message: { role: "assistant", content: { type: "text", text: "Hello from the model" } } } })
  })
})
