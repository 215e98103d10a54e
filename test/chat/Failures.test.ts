/**
 * When the model fails or the client goes away (spec §3.1, §6.2): an HTTP error before streaming
 * (after the SDK's retries), an error mid-stream (the partial text is kept), no model configured,
 * a client that disconnects mid-reply (the reply still finishes and is stored), and the bound on
 * the agentic loop's steps (CHAT_MAX_STEPS). Never a message left pending, and the conversation
 * goes on afterwards.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { get } from "../support/http.ts"
import { startService } from "../support/services.ts"
import {
  admin,
  chat,
  chatUntilFirstToken,
  doneEvents,
  eventsNamed,
  eventually,
  fresh,
  insertMessage,
  messagesInDatabase,
  names,
  pendingIn,
  relationExists,
  replyRequests,
  scriptedTurns,
  type SlowProxy,
  startSlowProxy,
  sysCall,
  text,
  tokensOf,
  toolUse,
  type Turns
} from "./helpers.ts"

const MAX_STEPS = 3

let proxy: SlowProxy
let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  proxy = await startSlowProxy()
  stack = await startChatStack({ CHAT_MAX_STEPS: String(MAX_STEPS), ANTHROPIC_BASE_URL: proxy.url })
  proxy.target = stack.model.url
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "failures-owner@plinth.test", "owner")
})
afterAll(async () => {
  await stack?.close()
  await proxy?.close()
})
afterEach(() => {
  turns.reset()
  proxy.chunkDelay = 0
  proxy.startDelay = 0
})

const storedShape = async (conversationId: string) =>
  (await messagesInDatabase(stack, conversationId)).map((message) => [message.role, message.status, message.content["type"]])

/** After a failure, the next message gets an ordinary reply. */
const expectConversationGoesOn = async (conversationId: string) => {
  turns.push(text("Back on track."))
  const reply = await chat(stack, owner, conversationId, "try again")
  expect(reply.status).toBe(200)
  expect(doneEvents(reply).at(-1)!.message).toMatchObject({ status: "complete", content: { type: "text", text: "Back on track." } })
  expect(await pendingIn(stack, conversationId)).toBe(0)
}

describe("model failures", () => {
  it("an HTTP error before streaming (500 on every retry): an error event, the message saved with status error", async () => {
    const id = await newConversation(stack, owner.token)
    // The SDK tries three times.
    turns.push({ kind: "http_error", status: 500 }, { kind: "http_error", status: 500 }, { kind: "http_error", status: 500 })
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, id, "hello?")
    expect(reply.status).toBe(200)
    expect(reply.contentType).toContain("text/event-stream")
    expect(names(reply)).toEqual(["error"])
    expect(reply.events[0]!.data).toEqual({ error: expect.stringMatching(/.+/) })
    expect(replyRequests(stack.model, from).length).toBe(3)
    expect(turns.left()).toBe(0)
    const stored = await messagesInDatabase(stack, id)
    expect(stored.map((message) => [message.role, message.status])).toEqual([["user", "complete"], ["assistant", "error"]])
    expect(stored[1]!.content).toEqual({ type: "text", text: "" })
    await expectConversationGoesOn(id)
  })

  it("a 500 that recovers on the SDK's retry is an ordinary reply", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push({ kind: "http_error", status: 500 }, text("Second time lucky."))
    const reply = await chat(stack, owner, id, "hello?")
    expect(reply.status).toBe(200)
    expect(names(reply)).not.toContain("error")
    expect(tokensOf(reply)).toBe("Second time lucky.")
    expect(await storedShape(id)).toEqual([["user", "complete", "text"], ["assistant", "complete", "text"]])
  })

  it("an error that is not retried (401) ends the reply the same way", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push({ kind: "http_error", status: 401 })
    const reply = await chat(stack, owner, id, "hello?")
    expect(reply.status).toBe(200)
    expect(names(reply)).toEqual(["error"])
    expect(await storedShape(id)).toEqual([["user", "complete", "text"], ["assistant", "error", "text"]])
    await expectConversationGoesOn(id)
  })

  it("an error mid-stream: tokens, then error; the message is error and keeps the partial text", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push({ kind: "stream_error", afterText: "Here is the beginning of" })
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, id, "tell me a story")
    expect(reply.status).toBe(200)
    const eventNames = names(reply)
    expect(eventNames.at(-1)).toBe("error")
    expect(eventNames.slice(0, -1).every((name) => name === "token")).toBe(true)
    expect(eventNames.length).toBeGreaterThan(1)
    expect(tokensOf(reply)).toBe("Here is the beginning of")
    expect(eventsNamed(reply, "error")[0]!.data).toEqual({ error: expect.stringMatching(/.+/) })
    // A stream that started is never retried.
    expect(replyRequests(stack.model, from).length).toBe(1)
    const stored = await messagesInDatabase(stack, id)
    expect(stored.map((message) => [message.role, message.status])).toEqual([["user", "complete"], ["assistant", "error"]])
    expect(stored[1]!.content).toEqual({ type: "text", text: "Here is the beginning of" })

    // The partial text is part of the history of the next reply.
    const next = stack.model.requests.length
    await expectConversationGoesOn(id)
    expect(JSON.stringify(replyRequests(stack.model, next)[0]!.body.messages)).toContain("Here is the beginning of")
  })

  it("a failure after a tool ran: the tool call stays complete, the next step's message is error", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push(
      toolUse("toolu_before_failure", "propose_plan", { steps: ["one"] }),
      { kind: "http_error", status: 500 },
      { kind: "http_error", status: 500 },
      { kind: "http_error", status: 500 }
    )
    const reply = await chat(stack, owner, id, "plan it")
    expect(reply.status).toBe(200)
    expect(names(reply)).toEqual(["tool_call", "done", "error"])
    expect(await storedShape(id)).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "error", "text"]
    ])
    await expectConversationGoesOn(id)
  })

  it("without ANTHROPIC_API_KEY: an error event naming it, the message error, and the service keeps serving", async () => {
    const { ANTHROPIC_API_KEY: _, ...env } = stack.env
    const keyless = await startService("chat", stack.db.chatUrl, env)
    try {
      const id = await newConversation(stack, owner.token)
      const requests = stack.model.requests.length
      for (let attempt = 0; attempt < 2; attempt++) {
        const reply = await postSse(keyless.url, `/conversations/${id}/chat`, { content: `attempt ${attempt}` }, { token: owner.token })
        expect(reply.status).toBe(200)
        expect(names(reply)).toEqual(["error"])
        expect(String(reply.events[0]!.data["error"])).toContain("ANTHROPIC_API_KEY")
      }
      expect(stack.model.requests.length).toBe(requests)
      expect(await storedShape(id)).toEqual([
        ["user", "complete", "text"],
        ["assistant", "error", "text"],
        ["user", "complete", "text"],
        ["assistant", "error", "text"]
      ])
      const health = await get(keyless.url, "/health")
      expect(health).toEqual({ status: 200, body: { status: "ok" } })
      const listed = await get<Array<{ id: string }>>(keyless.url, "/conversations", owner.token)
      expect(listed.status).toBe(200)
      expect(listed.body.map((conversation) => conversation.id)).toContain(id)
      // The same conversation, through the service that has a model.
      await expectConversationGoesOn(id)
    } finally {
      await keyless.close()
    }
  })
})

describe("a client that disconnects", () => {
  it("mid-stream: the reply still finishes and is stored complete; nothing stays pending", async () => {
    const id = await newConversation(stack, owner.token)
    const table = fresh("after_disconnect")
    turns.push(
      toolUse("toolu_disconnect", "propose_create_table", { table_name: table, columns: [{ name: "name", type: "text" }] }, "Working on it, step one."),
      text("All of it is done, even though nobody was listening any more.")
    )
    proxy.chunkDelay = 80
    // Each model call waits a while first: the reply is still running when the client leaves,
    // however late a busy machine lets this test read its first token.
    proxy.startDelay = 1_500
    const { status, seen } = await chatUntilFirstToken(stack, owner, id, "build it")
    expect(status).toBe(200)
    expect(seen).toContain("event: token")
    expect(seen).not.toContain("event: done")
    // Still running when the client left.
    expect(await pendingIn(stack, id)).toBeGreaterThan(0)

    const stored = await eventually(async () => {
      const messages = await messagesInDatabase(stack, id)
      return messages.some((message) => message.status === "pending") || messages.length < 3 ? undefined : messages
    })
    expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "text"]
    ])
    expect(stored.at(-1)!.content).toEqual({ type: "text", text: "All of it is done, even though nobody was listening any more." })
    expect(await relationExists(stack, `public.${table}`)).toBe(true)
    // Titled at the end of the reply, as if someone were listening.
    expect(await eventually(async () => {
      const [row] = await admin<{ title: string }>(stack, "SELECT title FROM sys.conversations WHERE id = $1", [id])
      return row?.title === "ok" ? row.title : undefined
    })).toBe("ok")
    expect(stack.chat.logs.filter((entry) => entry.message.includes("chat reply failed"))).toEqual([])
    expect(turns.left()).toBe(0)
  })
})

describe("a client that disconnects from execute-tool", () => {
  it("mid-tool: the message does not stay pending, and the conversation goes on", async () => {
    const table = fresh("slow_delete")
    await sysCall(stack, owner, "sys.create_table($1, $2::jsonb)", [table, JSON.stringify([{ name: "name", type: "text" }])])
    await admin(stack, `INSERT INTO public.${table} (name) VALUES ('x')`)
    const id = await newConversation(stack, owner.token)
    await insertMessage(stack, id, "user", { type: "text", text: "clean up" }, "complete")
    const messageId = await insertMessage(stack, id, "assistant", {
      type: "tool_call",
      tool_calls: [{ id: "toolu_slow", name: "propose_delete_rows", args: { table_name: table, where: "name = 'x' AND pg_sleep(1) IS NOT NULL" } }]
    }, "pending_approval")
    const controller = new AbortController()
    const call = fetch(`${stack.chat.url}/conversations/${id}/execute-tool`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
      body: JSON.stringify({ message_id: messageId }),
      signal: controller.signal
    }).catch(() => undefined)
    // Mid-tool: while its statement sleeps.
    await eventually(async () =>
      (await admin(stack, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
        AND query LIKE '%pg_sleep(1)%' AND pid <> pg_backend_pid()`)).length > 0 || undefined
    )
    controller.abort()
    await call
    const status = await eventually(async () => {
      const [message] = (await messagesInDatabase(stack, id)).filter((m) => m.id === messageId)
      return message!.status === "pending" ? undefined : message!.status
    }, 5_000)
    expect(["complete", "error", "pending_approval"]).toContain(status)
    await expectConversationGoesOn(id)
  })
})

describe("the step bound", () => {
  it(`with CHAT_MAX_STEPS=${MAX_STEPS} and a model that always calls a tool: ${MAX_STEPS} steps, then an error event; nothing pending`, async () => {
    const id = await newConversation(stack, owner.token)
    let calls = 0
    turns.always(() => toolUse(`toolu_loop_${calls++}`, "propose_plan", { steps: ["again"] }))
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, id, "loop forever")
    expect(reply.status).toBe(200)
    expect(names(reply)).toEqual([...Array.from({ length: MAX_STEPS }, () => ["tool_call", "done"]).flat(), "error"])
    expect(String(eventsNamed(reply, "error")[0]!.data["error"])).toContain(String(MAX_STEPS))
    expect(replyRequests(stack.model, from).length).toBe(MAX_STEPS)
    const stored = await messagesInDatabase(stack, id)
    expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      // The latest message is the last tool call (issue #20): /continue resumes it (StepBound.test.ts).
      ...Array.from({ length: MAX_STEPS }, () => ["assistant", "complete", "tool_call"])
    ])
    expect(await pendingIn(stack, id)).toBe(0)
    turns.always(undefined)
    await expectConversationGoesOn(id)
  })
})
