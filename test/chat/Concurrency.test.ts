/**
 * Concurrent continue calls at one conversation (spec §4.8: "serialized; the second sees the
 * pending placeholder and returns 400"), through one chat service and through two instances on
 * the same database: exactly one streams, the others are 400, and the history stays well-formed.
 * A proxy holds each model request a little, so the winner's placeholder is pending while the
 * others arrive.
 */
import fc from "fast-check"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { type RunningService, startService } from "../support/services.ts"
import {
  continueTurn,
  doneEvents,
  eventually,
  fresh,
  insertMessage,
  messagesInDatabase,
  pendingIn,
  replyRequests,
  scriptedTurns,
  sleep,
  type SlowProxy,
  startSlowProxy,
  text,
  type Turns
} from "./helpers.ts"

let proxy: SlowProxy
let stack: ChatStack
let secondChat: RunningService
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  proxy = await startSlowProxy()
  stack = await startChatStack({ ANTHROPIC_BASE_URL: proxy.url })
  proxy.target = stack.model.url
  // A second instance of the chat service on the same database, with the same model settings.
  secondChat = await startService("chat", stack.db.chatUrl, stack.env)
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "concurrency-owner@plinth.test", "owner")
})
afterAll(async () => {
  await secondChat?.close()
  await stack?.close()
  await proxy?.close()
})
afterEach(() => {
  turns.reset()
  proxy.startDelay = 0
})

const REPLY = "The one and only reply."

/** A conversation whose latest message is a completed tool call: ready for one continue. */
const readyToContinue = async () => {
  const id = await newConversation(stack, owner.token)
  await insertMessage(stack, id, "user", { type: "text", text: "Plan my app" }, "complete")
  await insertMessage(stack, id, "assistant", {
    type: "tool_call",
    tool_calls: [{ id: `toolu_${fresh("race")}`, name: "propose_plan", args: { steps: ["tables", "pages"] } }],
    tool_result: { result: "Plan presented" }
  }, "complete")
  return id
}

const raceProperty = (bases: () => ReadonlyArray<string>) =>
  fc.asyncProperty(
    fc.integer({ min: 2, max: 6 }).chain((n) => fc.array(fc.integer({ min: 0, max: 60 }), { minLength: n, maxLength: n })),
    async (staggers) => {
      const id = await readyToContinue()
      const targets = bases()
      const from = stack.model.requests.length
      const replies = await Promise.all(staggers.map(async (delay, index) => {
        await sleep(delay)
        return continueTurn(targets[index % targets.length]!, owner, id)
      }))
      const streamed = replies.filter((reply) => reply.status === 200)
      expect(streamed.length).toBe(1)
      for (const reply of replies) {
        if (reply.status === 200) continue
        expect(reply.status).toBe(400)
        expect(reply.body).toEqual({ error: expect.any(String) })
      }
      expect(doneEvents(streamed[0]!).at(-1)!.message).toMatchObject({ role: "assistant", status: "complete", content: { type: "text", text: REPLY } })
      // One model request, and a well-formed history: exactly one new reply, nothing pending.
      expect(replyRequests(stack.model, from).length).toBe(1)
      const stored = await messagesInDatabase(stack, id)
      expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
        ["user", "complete", "text"],
        ["assistant", "complete", "tool_call"],
        ["assistant", "complete", "text"]
      ])
      expect(stored[2]!.content).toEqual({ type: "text", text: REPLY })
    }
  )

/** 10 in CI; `npm run soak` asks for 200. */
const RACE_RUNS = Number(process.env["CHAT_RACE_RUNS"] ?? 10)

describe("concurrent continue calls", () => {

  it("through one chat service: exactly one streams, the others are 400, the history is well-formed", async () => {
    proxy.startDelay = 150
    turns.always(() => text(REPLY))
    await fc.assert(raceProperty(() => [stack.chat.url]), { numRuns: 10 })
  })

  it("through two chat service instances on one database: exactly one streams, the others are 400", async () => {
    proxy.startDelay = 150
    turns.always(() => text(REPLY))
    await fc.assert(raceProperty(() => [stack.chat.url, secondChat.url]), { numRuns: RACE_RUNS })
  }, 30_000 + RACE_RUNS * 2_000)

  it("without the model holding: still exactly one reply (the later calls find the text reply and are 400)", async () => {
    turns.always(() => text(REPLY))
    await fc.assert(raceProperty(() => [stack.chat.url, secondChat.url]), { numRuns: 5 })
  })

  it("a chat while a continue is still replying is 400, and changes nothing", async () => {
    // Held long enough that the chat lands while the reply is pending, even on a busy machine.
    proxy.startDelay = 1_000
    turns.always(() => text(REPLY))
    const id = await readyToContinue()
    const running = continueTurn(stack.chat.url, owner, id)
    await eventually(async () => (await pendingIn(stack, id)) > 0 || undefined)
    const meanwhile = await postSse(secondChat.url, `/conversations/${id}/chat`, { content: "are you there?" }, { token: owner.token })
    expect(meanwhile.status).toBe(400)
    expect(meanwhile.body).toEqual({ error: expect.any(String) })
    const first = await running
    expect(first.status).toBe(200)
    expect((await messagesInDatabase(stack, id)).map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "text"]
    ])
  })
})
