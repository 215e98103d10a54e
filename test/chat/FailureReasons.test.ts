/**
 * A reply that fails keeps its reason (issue #22): reopening the conversation shows the message
 * where the reply ended with `error`, the text of the `error` event the client was sent, for every
 * way a reply ends early: the model failing (before or while streaming), no model configured, the
 * step bound, the service shutting down mid-reply, and a reply abandoned by a process that died.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { ABANDONED } from "../../src/services/Conversations.ts"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, type SseReply, startChatStack } from "../support/chat.ts"
import { startService } from "../support/services.ts"
import {
  admin,
  chat,
  continueTurn,
  eventsNamed,
  eventually,
  getConversation,
  names,
  pendingIn,
  scriptedTurns,
  type SlowProxy,
  sqlAs,
  startSlowProxy,
  type StoredMessage,
  text,
  toolUse,
  type Turns
} from "./helpers.ts"

const MAX_STEPS = 2

let proxy: SlowProxy
let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  proxy = await startSlowProxy()
  stack = await startChatStack({ CHAT_MAX_STEPS: String(MAX_STEPS), ANTHROPIC_BASE_URL: proxy.url })
  proxy.target = stack.model.url
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "failure-reasons@plinth.test", "owner")
})
afterAll(async () => {
  await stack?.close()
  await proxy?.close()
})
afterEach(() => {
  turns.reset()
  proxy.startDelay = 0
})

/** The one `error` event of a reply, which ends it. */
const errorOf = (reply: SseReply) => {
  expect(reply.status).toBe(200)
  expect(names(reply).at(-1)).toBe("error")
  const [event] = eventsNamed(reply, "error")
  return String(event!.data["error"])
}

/** The conversation as a client reopening it sees it: each message's role, status, content type and error. */
const reopened = async (id: string) =>
  (await getConversation(stack, owner, id)).messages.map((message: StoredMessage & { readonly error?: unknown }) =>
    [message.role, message.status, message.content["type"], message.error]
  )

describe("the reason a reply ended is stored on the message it ended at", () => {
  it.each([
    ["an HTTP error before streaming (not retried)", [{ kind: "http_error", status: 401 }] as const, ""],
    ["an error mid-stream (the partial text is kept too)", [{ kind: "stream_error", afterText: "Half of" }] as const, "Half of"]
  ])("the model failing: %s", async (_, scripted, partial) => {
    const id = await newConversation(stack, owner.token)
    turns.push(...scripted)
    const reason = errorOf(await chat(stack, owner, id, "hello?"))
    expect(reason).toMatch(/the AI model failed/)
    expect(await reopened(id)).toEqual([["user", "complete", "text", null], ["assistant", "error", "text", reason]])
    const conversation = await getConversation(stack, owner, id)
    expect(conversation.messages[1]!.content).toEqual({ type: "text", text: partial })
  })

  it("no model configured (no ANTHROPIC_API_KEY)", async () => {
    const { ANTHROPIC_API_KEY: _, ...env } = stack.env
    const keyless = await startService("chat", stack.db.chatUrl, env)
    try {
      const id = await newConversation(stack, owner.token)
      const reason = errorOf(await postSse(keyless.url, `/conversations/${id}/chat`, { content: "hi" }, { token: owner.token }))
      expect(reason).toContain("ANTHROPIC_API_KEY")
      expect(await reopened(id)).toEqual([["user", "complete", "text", null], ["assistant", "error", "text", reason]])
    } finally {
      await keyless.close()
    }
  })

  it("the step bound: on the last tool call, which stays complete and is where /continue resumes", async () => {
    const id = await newConversation(stack, owner.token)
    let calls = 0
    turns.always(() => toolUse(`toolu_reason_${calls++}`, "propose_plan", { steps: ["again"] }))
    const reason = errorOf(await chat(stack, owner, id, "keep going"))
    expect(reason).toContain(String(MAX_STEPS))
    expect(await reopened(id)).toEqual([
      ["user", "complete", "text", null],
      ["assistant", "complete", "tool_call", null],
      ["assistant", "complete", "tool_call", reason]
    ])
    turns.always(() => text("Done now."))
    const resumed = await continueTurn(stack.chat.url, owner, id)
    expect(names(resumed).at(-1)).toBe("done")
    expect((await reopened(id)).at(-1)).toEqual(["assistant", "complete", "text", null])
  })

  it("the service shutting down mid-reply", async () => {
    const doomed = await startService("chat", stack.db.chatUrl, { ...stack.env, ANTHROPIC_BASE_URL: proxy.url })
    const id = await newConversation(stack, owner.token)
    turns.push(text("Never heard."))
    // The model call is held long enough for the service to close while the reply waits for it.
    proxy.startDelay = 3_000
    const controller = new AbortController()
    const call = fetch(`${doomed.url}/conversations/${id}/chat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
      body: JSON.stringify({ content: "hello?" }),
      signal: controller.signal
    }).catch(() => undefined)
    await eventually(async () => ((await pendingIn(stack, id)) > 0 ? true : undefined))
    controller.abort()
    await call
    await doomed.close()
    expect(await pendingIn(stack, id)).toBe(0)
    expect(await reopened(id)).toEqual([["user", "complete", "text", null], ["assistant", "error", "text", "the service is shutting down"]])
  })

  it("a reply abandoned by a process that died, closed by the next chat service to start", async () => {
    const id = await newConversation(stack, owner.token)
    await admin(stack, `INSERT INTO sys.messages (conversation_id, role, content, status, updated_at)
      VALUES ($1, 'user', '{"type": "text", "text": "hi"}', 'complete', now() - interval '1 hour'),
             ($1, 'assistant', '{"type": "text", "text": "half a rep"}', 'pending', now() - interval '1 hour')`, [id])
    const restarted = await startService("chat", stack.db.chatUrl, { ...stack.env, CHAT_ABANDONED_AFTER: "10m" })
    await restarted.close()
    expect(await reopened(id)).toEqual([["user", "complete", "text", null], ["assistant", "error", "text", ABANDONED]])
  })

  it("an ordinary reply has none; the owner's view public.messages shows the column too", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push({ kind: "http_error", status: 401 })
    const reason = errorOf(await chat(stack, owner, id, "first"))
    turns.push(text("Fine."))
    expect(names(await chat(stack, owner, id, "second")).at(-1)).toBe("done")
    expect((await reopened(id)).map((message) => message[3])).toEqual([null, reason, null, null])
    const viewed = await sqlAs(stack, owner, "SELECT status, error FROM public.messages WHERE conversation_id = $1 ORDER BY created_at, status", [id])
    expect(viewed.status).toBe(200)
    expect(viewed.body.rows.filter((row) => row["error"] !== null)).toEqual([{ status: "error", error: reason }])
  })
})
