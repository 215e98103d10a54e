/**
 * Several replicas on one database, and chat processes that stop in the middle of a reply:
 * page changes reach the event streams of every main replica; a chat service that is shut down
 * or killed mid-turn leaves no message pending for good.
 */
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { post, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { runPlinth } from "../support/cli.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { get } from "../support/http.ts"
import { freePort } from "../support/ports.ts"
import { type RunningService, startService, TEST_JWT_SECRET } from "../support/services.ts"

let stack: ChatStack
beforeAll(async () => {
  stack = await startChatStack()
})
afterAll(() => stack?.close())

const lastStatuses = async (conversationId: string) =>
  (await query(stack.db.adminUrl, (sql) =>
    sql<{ status: string }>`SELECT status FROM sys.messages WHERE conversation_id = ${conversationId} ORDER BY position`)).map((row) => row.status)

const waitFor = async (check: () => Promise<boolean>, timeoutMs = 10_000) => {
  if (!(await eventually(check, timeoutMs, 50))) throw new Error("timed out")
}

describe("three main replicas", () => {
  let replicas: Array<RunningService>
  beforeAll(async () => {
    replicas = await Promise.all([0, 1, 2].map(() => startService("main", stack.db.mainUrl, stack.env)))
  })
  afterAll(async () => {
    for (const replica of replicas ?? []) await replica.close()
  })

  it("a page change reaches the event streams connected to every replica", async () => {
    const owner = await signedIn(stack, "replicas-owner@plinth.test", "owner")
    const texts = replicas.map(() => ({ text: "" }))
    const requests = replicas.map((replica, index) =>
      http.get(new URL(`/events?token=${owner.token}`, replica.url), { agent: false }, (response) => {
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => (texts[index]!.text += chunk))
      }))
    try {
      await waitFor(async () => texts.every((entry) => entry.text.includes(": connected")))
      const created = await post(replicas[1]!.url, "/sql", { sql: "SELECT sys.create_page('everywhere', 'E', '')" }, { token: owner.token })
      expect(created.status).toBe(200)
      await waitFor(async () => texts.every((entry) => entry.text.includes('"slug":"everywhere"')), 3_000)
    } finally {
      for (const request of requests) request.destroy()
    }
  })
})

describe("a chat service stopping mid-reply", () => {
  it("shut down gracefully: the reply it was writing is marked error, and the conversation goes on", async () => {
    const owner = await signedIn(stack, "graceful@plinth.test", "owner")
    const chat = await startService("chat", stack.db.chatUrl, { ...stack.env })
    const id = await newConversation(stack, owner.token)
    const asked = stack.model.requests.length
    stack.model.script({ kind: "hang" })
    const controller = new AbortController()
    const reply = fetch(`${chat.url}/conversations/${id}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
      body: JSON.stringify({ content: "hello" }),
      signal: controller.signal
    }).then((response) => response.text()).catch(() => "")
    // Until the model has the request (and its hanging turn), the reply is not yet mid-way.
    await waitFor(async () => stack.model.requests.length > asked && (await lastStatuses(id)).includes("pending"))
    await chat.close()
    controller.abort()
    await reply
    expect(await lastStatuses(id)).toEqual(["complete", "error"])
    stack.model.script({ kind: "reply", blocks: [{ type: "text", text: "Here again." }] })
    const again = await postSse(stack.chat.url, `/conversations/${id}/chat`, { content: "still there?" }, { token: owner.token })
    expect(again.status).toBe(200)
    expect(again.events.at(-1)?.event).toBe("done")
  }, 30_000)

  it("killed (SIGKILL) and restarted: the reply is marked error, and /chat and /continue work again", async () => {
    const owner = await signedIn(stack, "killed@plinth.test", "owner")
    const id = await newConversation(stack, owner.token)
    const env = {
      DATABASE_URL: stack.db.mainUrl,
      CHAT_DATABASE_URL: stack.db.chatUrl,
      JWT_SECRET: TEST_JWT_SECRET,
      CHAT_PORT: String(await freePort()),
      ANTHROPIC_API_KEY: "sk-test",
      ANTHROPIC_BASE_URL: stack.model.url,
      CHAT_ABANDONED_AFTER: "1s",
      RATE_LIMIT_STORE: "memory"
    }
    const first = runPlinth(["serve", "chat"], env)
    await first.waitFor(/Plinth chat service/)
    const asked = stack.model.requests.length
    stack.model.script({ kind: "hang" })
    const base = `http://127.0.0.1:${env.CHAT_PORT}`
    void fetch(`${base}/conversations/${id}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
      body: JSON.stringify({ content: "build me something" })
    }).catch(() => undefined)
    await waitFor(async () => stack.model.requests.length > asked && (await lastStatuses(id)).includes("pending"))
    first.child.kill("SIGKILL")
    await first.exited
    expect(await lastStatuses(id)).toEqual(["complete", "pending"])

    await new Promise((resolve) => setTimeout(resolve, 1_200)) // older than CHAT_ABANDONED_AFTER
    const second = runPlinth(["serve", "chat"], env)
    try {
      await second.waitFor(/Plinth chat service/)
      expect(await lastStatuses(id)).toEqual(["complete", "error"])
      const conversation = await get<{ messages: Array<{ status: string }> }>(base, `/conversations/${id}`, owner.token)
      expect(conversation.body.messages.at(-1)?.status).toBe("error")
      stack.model.script({ kind: "reply", blocks: [{ type: "text", text: "Recovered." }] })
      const again = await postSse(base, `/conversations/${id}/chat`, { content: "again" }, { token: owner.token })
      expect(again.status).toBe(200)
      expect(again.events.at(-1)).toMatchObject({ event: "done", data: { message: { status: "complete" } } })
      // /continue: the latest message is a plain reply, so it is refused as the spec says, not stuck.
      expect((await postSse(base, `/conversations/${id}/continue`, undefined, { token: owner.token })).status).toBe(400)
    } finally {
      second.child.kill("SIGTERM")
      await second.exited
    }
  }, 60_000)
})
