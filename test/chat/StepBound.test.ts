/**
 * The step bound (CHAT_MAX_STEPS) ends a reply after a step's tool calls and leaves the
 * conversation where POST /continue resumes it (spec §4.8: the latest message is a completed or
 * failed tool call), not with a text message that would make /continue answer 400 (issue #20).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, startChatStack } from "../support/chat.ts"
import {
  chat,
  continueTurn,
  doneEvents,
  eventsNamed,
  lastToolResults,
  messagesInDatabase,
  names,
  pendingIn,
  replyRequests,
  scriptedTurns,
  text,
  toolUse,
  type Turns
} from "./helpers.ts"

const MAX_STEPS = 2

let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack({ CHAT_MAX_STEPS: String(MAX_STEPS) })
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "step-bound@plinth.test", "owner")
})
afterAll(() => stack?.close())
afterEach(() => turns.reset())

const shape = async (id: string) => (await messagesInDatabase(stack, id)).map((message) => [message.role, message.status, message.content["type"]])

describe("a reply stopped by CHAT_MAX_STEPS", () => {
  it("ends on its last tool call, and /continue resumes the loop from there", async () => {
    const id = await newConversation(stack, owner.token)
    let calls = 0
    turns.always(() => toolUse(`toolu_bound_${calls++}`, "propose_plan", { steps: ["again"] }))
    const from = stack.model.requests.length
    const stopped = await chat(stack, owner, id, "keep going")
    expect(stopped.status).toBe(200)
    expect(names(stopped)).toEqual(["tool_call", "done", "tool_call", "done", "error"])
    expect(String(eventsNamed(stopped, "error")[0]!.data["error"])).toContain(String(MAX_STEPS))
    expect(replyRequests(stack.model, from).length).toBe(MAX_STEPS)
    expect(await shape(id)).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "tool_call"]
    ])
    expect(await pendingIn(stack, id)).toBe(0)

    // The model still calls tools: /continue runs another MAX_STEPS steps, and stops the same way.
    const again = await continueTurn(stack.chat.url, owner, id)
    expect(again.status).toBe(200)
    expect(names(again)).toEqual(["tool_call", "done", "tool_call", "done", "error"])
    // The resumed loop gave the model the last tool call's result.
    const resumed = replyRequests(stack.model, from)[MAX_STEPS]!
    expect(lastToolResults(resumed).map((block) => block.tool_use_id)).toEqual([`toolu_bound_${MAX_STEPS - 1}`])

    // Now the model answers in text: /continue ends the reply as any other.
    turns.always(() => text("All done."))
    const finished = await continueTurn(stack.chat.url, owner, id)
    expect(finished.status).toBe(200)
    expect(doneEvents(finished).at(-1)!.message).toMatchObject({ status: "complete", content: { type: "text", text: "All done." } })
    expect(await shape(id)).toEqual([
      ["user", "complete", "text"],
      ...Array.from({ length: 2 * MAX_STEPS }, () => ["assistant", "complete", "tool_call"]),
      ["assistant", "complete", "text"]
    ])
    expect(await pendingIn(stack, id)).toBe(0)
    // And the text reply is what /continue refuses, as before.
    expect((await continueTurn(stack.chat.url, owner, id)).status).toBe(400)
  })

  it("several tool calls in the last step: each is stored with its result, nothing pending, /continue works", async () => {
    const id = await newConversation(stack, owner.token)
    let step = 0
    turns.always(() => {
      step++
      return {
        kind: "reply",
        blocks: [
          { type: "tool_use", id: `toolu_many_${step}_a`, name: "propose_plan", input: { steps: ["a"] } },
          { type: "tool_use", id: `toolu_many_${step}_b`, name: "preview_page", input: { source: "# b" } }
        ]
      }
    })
    const stopped = await chat(stack, owner, id, "many at once")
    expect(names(stopped).at(-1)).toBe("error")
    expect(await shape(id)).toEqual([
      ["user", "complete", "text"],
      ...Array.from({ length: 2 * MAX_STEPS }, () => ["assistant", "complete", "tool_call"])
    ])
    expect(await pendingIn(stack, id)).toBe(0)
    turns.always(() => text("Stopped looping."))
    const resumed = await continueTurn(stack.chat.url, owner, id)
    expect(resumed.status).toBe(200)
    expect(doneEvents(resumed).at(-1)!.message).toMatchObject({ status: "complete", content: { type: "text", text: "Stopped looping." } })
  })
})
