/**
 * Issue #21's first acceptance point, in a real browser (a headless Chromium from npm, with its web
 * security on): a page served from another origin signs in with a magic-link token, runs /sql,
 * receives a page_change on an EventSource with `?token=`, and streams a chat reply with fetch; the
 * same page from an origin CORS_ORIGINS does not list is blocked by the browser.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { launchBrowser } from "../support/browser.ts"
import { inviteAsDatabaseAdmin, post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, startChatStack } from "../support/chat.ts"
import { scriptedTurns, text, type Turns } from "../chat/helpers.ts"

/**
 * The page: what a web app on another origin does, written as a browser runs it (no bundler, no
 * library). Each step is a function the test calls with `page.evaluate` and whose result it checks.
 */
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Plinth from another origin</title></head>
<body><pre id="log"></pre>
<script>
const log = (line) => { document.getElementById("log").textContent += line + "\\n" }
const json = async (response) => ({ status: response.status, requestId: response.headers.get("x-request-id"), body: await response.json() })

window.signIn = async (main, token) => {
  const response = await fetch(main + "/auth/magic-link/verify", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ token })
  })
  const answer = await json(response)
  log("signed in: " + answer.status)
  return answer
}

window.sql = async (main, jwt, sql, params) => {
  const response = await fetch(main + "/sql", {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer " + jwt, "x-request-id": "from-the-page" },
    body: JSON.stringify({ sql, params: params ?? [] })
  })
  return json(response)
}

/** Opens an EventSource; resolves once it is open (or failed), and keeps the first page_change. */
window.listen = (main, jwt) => new Promise((resolve) => {
  const source = new EventSource(main + "/events?token=" + encodeURIComponent(jwt))
  window.firstPageChange = new Promise((received) => {
    source.addEventListener("page_change", (event) => { source.close(); received(JSON.parse(event.data)) })
  })
  source.onopen = () => resolve("open")
  source.onerror = () => { source.close(); resolve("error") }
})

/** Creates a conversation and streams a reply with fetch, reading the SSE frames as they come. */
window.chat = async (chatUrl, jwt, content) => {
  const headers = { "content-type": "application/json", authorization: "Bearer " + jwt }
  const created = await fetch(chatUrl + "/conversations", { method: "POST", headers, body: JSON.stringify({ title: "From the page" }) })
  const { id } = await created.json()
  const response = await fetch(chatUrl + "/conversations/" + id + "/chat", { method: "POST", headers, body: JSON.stringify({ content }) })
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  const events = []
  let buffered = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    buffered += value
    let end
    while ((end = buffered.indexOf("\\n\\n")) >= 0) {
      const frame = buffered.slice(0, end)
      buffered = buffered.slice(end + 2)
      const event = /^event: (.*)$/m.exec(frame)
      const data = /^data: (.*)$/m.exec(frame)
      if (event) events.push({ event: event[1], data: data ? JSON.parse(data[1]) : null })
    }
  }
  return { status: response.status, contentType: response.headers.get("content-type"), events }
}

/** What a blocked call looks like from the page: the error's name and message. */
window.attempt = async (call) => {
  try {
    return { ok: true, value: await call() }
  } catch (error) {
    return { ok: false, name: error.name, message: String(error.message) }
  }
}
</script></body></html>`

/** A tiny web server on 127.0.0.1 serving the page at `/` (each port is an origin of its own). */
const servePage = async (): Promise<{ readonly origin: string; readonly server: Server }> => {
  const server = createServer((_request, response) => {
    response.writeHead(200, { "content-type": "text/html; charset=utf-8" })
    response.end(PAGE)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }
}

/** The page's functions, as `page.evaluate` callbacks reach them (on the page's `globalThis`). */
interface Steps {
  signIn: (main: string, token: string) => Promise<{ status: number; requestId: string | null; body: { token: string; user: { role: string } } }>
  sql: (main: string, jwt: string, sql: string, params?: ReadonlyArray<unknown>) => Promise<{ status: number; requestId: string | null; body: { rows: Array<Record<string, unknown>> } }>
  listen: (main: string, jwt: string) => Promise<"open" | "error">
  firstPageChange: Promise<{ schema: string; slug: string }>
  chat: (chatUrl: string, jwt: string, content: string) => Promise<{ status: number; contentType: string | null; events: Array<{ event: string; data: Record<string, unknown> | null }> }>
  attempt: <A>(call: () => Promise<A>) => Promise<{ ok: true; value: A } | { ok: false; name: string; message: string }>
}

let stack: ChatStack
let turns: Turns
let browser: Browser
let allowed: { readonly origin: string; readonly server: Server }
let disallowed: { readonly origin: string; readonly server: Server }
let builder: SignIn

beforeAll(async () => {
  allowed = await servePage()
  disallowed = await servePage()
  stack = await startChatStack({ CORS_ORIGINS: allowed.origin })
  turns = scriptedTurns(stack.model)
  builder = await signedIn(stack, "browser-builder@plinth.test", "owner")
  browser = await launchBrowser()
}, 60_000)
afterAll(async () => {
  await browser?.close()
  await stack?.close()
  for (const page of [allowed, disallowed]) page?.server.close()
})

/** Pages stay open until the browser closes: with `--single-process`, closing its last page ends the browser. */
const openPage = async (origin: string): Promise<Page> => {
  const page = await browser.newPage()
  await page.goto(`${origin}/`)
  return page
}

describe("a page of an allowed origin", () => {
  it("signs in with a magic-link token, runs /sql, hears a page_change on an EventSource and streams a chat reply", async () => {
    const page = await openPage(allowed.origin)
    const main = stack.main.url
    const magicToken = await inviteAsDatabaseAdmin(stack.db, "browser-owner@plinth.test", "owner")
    const signIn = await page.evaluate(([main, token]) => (globalThis as unknown as Steps).signIn(main, token), [main, magicToken] as const)
    expect(signIn.status).toBe(200)
    expect(signIn.body.user.role).toBe("owner")
    // The exposed header is readable by the page.
    expect(signIn.requestId).not.toBeNull()
    const jwt = signIn.body.token

    const sql = await page.evaluate(([main, jwt]) => (globalThis as unknown as Steps).sql(main, jwt, "SELECT $1::int + 1 AS two", [1]), [main, jwt] as const)
    expect(sql).toEqual({ status: 200, requestId: "from-the-page", body: expect.objectContaining({ rows: [{ two: 2 }] }) })

    expect(await page.evaluate(([main, jwt]) => (globalThis as unknown as Steps).listen(main, jwt), [main, jwt] as const)).toBe("open")
    const change = await post(main, "/sql", { sql: "SELECT sys.create_page('from-the-browser-test', 'Hello', '<p>hi</p>')" }, { token: builder.token })
    expect(change.status).toBe(200)
    expect(await page.evaluate(() => (globalThis as unknown as Steps).firstPageChange)).toEqual({ schema: "public", slug: "from-the-browser-test" })

    turns.push(text("Hello from the model"))
    const reply = await page.evaluate(([chatUrl, jwt]) => (globalThis as unknown as Steps).chat(chatUrl, jwt, "Say hello"), [stack.chat.url, jwt] as const)
    expect(reply.status).toBe(200)
    expect(reply.contentType).toContain("text/event-stream")
    const tokens = reply.events.filter((event) => event.event === "token").map((event) => String(event.data?.["text"])).join("")
    expect(tokens).toBe("Hello from the model")
    expect(reply.events.at(-1)?.event).toBe("done")
  })
})

describe("the same page from an origin that is not allowed", () => {
  it("is blocked: its fetch rejects with a TypeError and its EventSource fails", async () => {
    const page = await openPage(disallowed.origin)
    const main = stack.main.url
    const magicToken = await inviteAsDatabaseAdmin(stack.db, "browser-blocked@plinth.test", "owner")
    const signIn = await page.evaluate(([main, token]) => (globalThis as unknown as Steps).attempt(() => (globalThis as unknown as Steps).signIn(main, token)), [main, magicToken] as const)
    expect(signIn).toMatchObject({ ok: false, name: "TypeError" })
    // The preflight was refused, so the token was not even sent: it still signs in (from here).
    const stillValid = await post(main, "/auth/magic-link/verify", { token: magicToken })
    expect(stillValid.status).toBe(200)

    const sql = await page.evaluate(([main, jwt]) => (globalThis as unknown as Steps).attempt(() => (globalThis as unknown as Steps).sql(main, jwt, "SELECT 1")), [main, builder.token] as const)
    expect(sql).toMatchObject({ ok: false, name: "TypeError" })
    expect(await page.evaluate(([main, jwt]) => (globalThis as unknown as Steps).listen(main, jwt), [main, builder.token] as const)).toBe("error")
    const chat = await page.evaluate(([chatUrl, jwt]) => (globalThis as unknown as Steps).attempt(() => (globalThis as unknown as Steps).chat(chatUrl, jwt, "hi")), [stack.chat.url, builder.token] as const)
    expect(chat).toMatchObject({ ok: false, name: "TypeError" })
  })
})
