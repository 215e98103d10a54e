/**
 * Stop and reattach (issue #26): POST /conversations/:id/stop ends the running reply on the server
 * (the model's request is cut, its text so far kept, the reply's events end with a stopped `done`,
 * the conversation takes the next message), from the instance running it or from another one;
 * GET /conversations/:id/stream gives a running reply's events from its first, then live, or the
 * finished latest message, and never starts a reply. Untitled conversations are named after
 * their first message.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { type RunningService, startService } from "../support/services.ts"
import {
  admin,
  chat,
  eventually,
  getConversation,
  hangAfter,
  insertMessage,
  liveTokens,
  messagesInDatabase,
  openSse,
  replyRequests,
  scriptedTurns,
  text,
  tokensOf,
  type Turns
} from "./helpers.ts"

let stack: ChatStack
let second: RunningService
let owner: SignIn
let otherOwner: SignIn
let member: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack()
  // A second instance of the chat service on the same database.
  second = await startService("chat", stack.db.chatUrl, stack.env)
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "stop-owner@plinth.test", "owner")
  otherOwner = await signedIn(stack, "stop-other@plinth.test", "owner")
  member = await signedIn(stack, "stop-member@plinth.test", "member")
}, 60_000)
afterAll(async () => {
  await second?.close()
  await stack?.close()
})
afterEach(() => turns.reset())

const stop = (base: string, user: SignIn, id: string) => postSse(base, `/conversations/${id}/stop`, undefined, { token: user.token })

/** Starts a reply that streams `partial` and then waits for ever; answers once its text has arrived. */
const hangingReply = async (id: string, partial: string, content = "Tell me a long story") => {
  turns.push(hangAfter(partial))
  const reply = await openSse(stack.chat.url, `/conversations/${id}/chat`, { token: owner.token, method: "POST", body: { content } })
  expect(reply.status).toBe(200)
  await eventually(async () => (liveTokens(reply.events) === partial ? true : undefined))
  return reply
}

describe("POST /conversations/:id/stop", () => {
  it("ends the running reply on the server: the model's request is cut, its text kept, the stream ends stopped, the conversation goes on", async () => {
    const id = await newConversation(stack, owner.token)
    const abortedBefore = stack.model.aborted()
    const reply = await hangingReply(id, "Once upon a time, ")
    expect(reply.events.map((event) => event.event)).not.toContain("done")

    const stopped = await stop(stack.chat.url, owner, id)
    expect(stopped.status).toBe(204)
    // The model's request was let go by the chat service, not answered to its end.
    await eventually(async () => (stack.model.aborted() > abortedBefore ? true : undefined))
    await reply.ended
    expect(reply.events.at(-1)).toEqual({
      event: "done",
      data: { message: { id: expect.any(String), role: "assistant", content: { type: "text", text: "Once upon a time, " }, status: "complete" }, stopped: true }
    })
    const stored = await messagesInDatabase(stack, id)
    expect(stored.map((message) => [message.role, message.status, message.content])).toEqual([
      ["user", "complete", { type: "text", text: "Tell me a long story" }],
      ["assistant", "complete", { type: "text", text: "Once upon a time, " }]
    ])

    // Usable: the next message gets a reply.
    turns.push(text("Shorter then."))
    const next = await chat(stack, owner, id, "Make it short")
    expect(next.status).toBe(200)
    expect(tokensOf(next)).toBe("Shorter then.")
    expect(next.events.at(-1)?.event).toBe("done")
    // The model was given the stopped reply's text as the assistant's turn.
    const lastRequest = replyRequests(stack.model).at(-1)!
    expect(JSON.stringify(lastRequest.body.messages)).toContain("Once upon a time,")
  })

  it("answers 409 when no reply runs, 404 for a conversation that is not the caller's, 403 for a member", async () => {
    const id = await newConversation(stack, owner.token)
    expect(await stop(stack.chat.url, owner, id)).toMatchObject({ status: 409, body: { error: "no reply is running" } })
    const reply = await hangingReply(id, "Thinking about it")
    expect((await stop(stack.chat.url, otherOwner, id)).status).toBe(404)
    expect((await stop(stack.chat.url, member, id)).status).toBe(403)
    expect((await stop(stack.chat.url, owner, "00000000-0000-4000-8000-000000000000")).status).toBe(404)
    expect((await stop(stack.chat.url, owner, "not-a-uuid")).status).toBe(404)
    // Still running: none of those stopped it.
    expect(reply.events.map((event) => event.event)).not.toContain("done")
    expect((await stop(stack.chat.url, owner, id)).status).toBe(204)
    await reply.ended
    expect(await stop(stack.chat.url, owner, id)).toMatchObject({ status: 409 })
  })

  it("reaching another instance of the chat service, stops the reply where it runs", async () => {
    const id = await newConversation(stack, owner.token)
    const abortedBefore = stack.model.aborted()
    const reply = await hangingReply(id, "Elsewhere, ")
    const stopped = await stop(second.url, owner, id)
    expect(stopped.status).toBe(204)
    await reply.ended
    expect(reply.events.at(-1)).toMatchObject({ event: "done", data: { stopped: true, message: { content: { type: "text", text: "Elsewhere, " } } } })
    expect(stack.model.aborted()).toBeGreaterThan(abortedBefore)
    // The stop recorded for the earlier reply does not stop the next one.
    turns.push(text("Next reply."))
    const next = await chat(stack, owner, id, "Again")
    expect(next.events.at(-1)).toMatchObject({ event: "done", data: { message: { content: { type: "text", text: "Next reply." } } } })
    expect(next.events.at(-1)?.data["stopped"]).toBeUndefined()
  })
})

describe("a reply left by an instance that is gone", () => {
  it("a stop is answered 503 after a bounded wait, not a hang; an attach is told it runs elsewhere", async () => {
    const id = await newConversation(stack, owner.token)
    await insertMessage(stack, id, "user", { type: "text", text: "Anyone there?" }, "complete")
    await insertMessage(stack, id, "assistant", { type: "text", text: "" }, "pending")
    const attached = await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: owner.token })
    expect(await eventually(async () => (attached.events.length > 0 ? true : undefined))).toBe(true)
    expect(attached.events.map((event) => event.event)).toEqual(["status"])
    attached.close()
    const stopped = await stop(stack.chat.url, owner, id)
    expect(stopped).toMatchObject({ status: 503, body: { error: expect.stringContaining("another instance") } })
  }, 30_000)
})

describe("GET /conversations/:id/stream", () => {
  it("gives a second reader and a reload the running reply's events from its first, then live, until it ends; never starts a reply", async () => {
    const id = await newConversation(stack, owner.token)
    const requestsBefore = replyRequests(stack.model).length
    const reply = await hangingReply(id, "From the very start. ")
    const first = await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: owner.token })
    const second_ = await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: owner.token })
    expect(first.status).toBe(200)
    await eventually(async () => (liveTokens(first.events) === "From the very start. " && liveTokens(second_.events) === "From the very start. " ? true : undefined))
    // A reader that leaves (a tab closed) ends nothing.
    second_.close()
    expect((await stop(stack.chat.url, owner, id)).status).toBe(204)
    await Promise.all([reply.ended, first.ended])
    expect(first.events).toEqual(reply.events)
    expect(replyRequests(stack.model).length).toBe(requestsBefore + 1)
  })

  it("without a running reply: one done with the latest message; no events for an empty conversation; 404 for others'", async () => {
    const id = await newConversation(stack, owner.token)
    const empty = await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: owner.token })
    await empty.ended
    expect(empty.status).toBe(200)
    expect(empty.events).toEqual([])
    turns.push(text("All done."))
    await chat(stack, owner, id, "Hello")
    const requestsBefore = replyRequests(stack.model).length
    const finished = await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: owner.token })
    await finished.ended
    expect(finished.events).toEqual([
      { event: "done", data: { message: { id: expect.any(String), role: "assistant", content: { type: "text", text: "All done." }, status: "complete" } } }
    ])
    expect(replyRequests(stack.model).length).toBe(requestsBefore)
    expect((await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: otherOwner.token })).status).toBe(404)
    expect((await openSse(stack.chat.url, `/conversations/${id}/stream`, { token: member.token })).status).toBe(403)
  })

  it("on another instance: the finished message once the reply running elsewhere ends", async () => {
    const id = await newConversation(stack, owner.token)
    const reply = await hangingReply(id, "Over there. ")
    const elsewhere = await openSse(second.url, `/conversations/${id}/stream`, { token: owner.token })
    expect(elsewhere.status).toBe(200)
    expect((await stop(stack.chat.url, owner, id)).status).toBe(204)
    await Promise.all([reply.ended, elsewhere.ended])
    expect(elsewhere.events.map((event) => event.event)).toEqual(["status", "done"])
    expect(elsewhere.events[1]!.data).toEqual({ message: (reply.events.at(-1)!.data as { message: unknown }).message })
  })
})

describe("a conversation's title", () => {
  it("blank, is the first message's first line (bounded) as soon as the reply starts; the model's replaces it when the reply ends", async () => {
    const created = await postSse(stack.chat.url, "/conversations", { title: "" }, { token: owner.token })
    expect(created.status).toBe(201)
    const id = (created.body as { id: string; title: string }).id
    expect((created.body as { title: string }).title).toBe("")
    const long = `${"Build me a customer relationship manager with orders ".repeat(3)}\nand more`
    const reply = await hangingReply(id, "Sure. ", long)
    const title = (await getConversation(stack, owner, id)).title
    expect(title).toBe(`${long.split("\n")[0]!.trim().slice(0, 59)}…`)
    expect(title).toHaveLength(60)
    await stop(stack.chat.url, owner, id)
    await reply.ended

    // A conversation with a title keeps it until the model's.
    const named = await newConversation(stack, owner.token, "My own title")
    const namedReply = await hangingReply(named, "Fine. ", "Something else")
    expect((await getConversation(stack, owner, named)).title).toBe("My own title")
    await stop(stack.chat.url, owner, named)
    await namedReply.ended

    // A finished first reply: the model's title (the fake answers "ok").
    const third = (await postSse(stack.chat.url, "/conversations", { title: "  " }, { token: owner.token })).body as { id: string }
    turns.push(text("Done."))
    await chat(stack, owner, third.id, "Hi there")
    expect((await getConversation(stack, owner, third.id)).title).toBe("ok")
    expect(await admin(stack, "SELECT count(*)::int AS n FROM sys.conversations WHERE id = $1", [third.id])).toEqual([{ n: 1 }])
  })
})
