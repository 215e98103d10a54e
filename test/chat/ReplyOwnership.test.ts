/**
 * A reply belongs to its conversation's actor, not to the request that asked for it (issue #20):
 * a client that aborts mid-reply leaves it running to its end and stored, and the HTTP layer of
 * the chat service forks no fiber and holds no set of fibers of its own.
 */
import { readFileSync } from "node:fs"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import {
  chatUntilFirstToken,
  eventually,
  messagesInDatabase,
  pendingIn,
  scriptedTurns,
  type SlowProxy,
  startSlowProxy,
  text,
  toolUse,
  type Turns
} from "./helpers.ts"

let proxy: SlowProxy
let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  proxy = await startSlowProxy()
  stack = await startChatStack({ ANTHROPIC_BASE_URL: proxy.url })
  proxy.target = stack.model.url
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "ownership@plinth.test", "owner")
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

describe("a reply whose client aborts", () => {
  it("runs on to its end on the conversation's actor and is stored; meanwhile the conversation is taken", async () => {
    const id = await newConversation(stack, owner.token)
    turns.push(toolUse("toolu_owned", "propose_plan", { steps: ["one", "two"] }, "Planning first."), text("Planned, with nobody listening."))
    // Every model call takes a while: the reply is mid-way when the client leaves.
    proxy.chunkDelay = 60
    proxy.startDelay = 1_000
    const { status, seen } = await chatUntilFirstToken(stack, owner, id, "plan it")
    expect(status).toBe(200)
    expect(seen).not.toContain("event: done")
    expect(await pendingIn(stack, id)).toBeGreaterThan(0)

    // The reply is still the conversation's: another one cannot start in it.
    const meanwhile = await postSse(stack.chat.url, `/conversations/${id}/chat`, { content: "are you there?" }, { token: owner.token })
    expect(meanwhile.status).toBe(400)

    const stored = await eventually(async () => {
      const messages = await messagesInDatabase(stack, id)
      return messages.at(-1)?.status === "complete" && messages.length === 3 ? messages : undefined
    })
    expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "text"]
    ])
    expect(stored.at(-1)!.content).toEqual({ type: "text", text: "Planned, with nobody listening." })
    expect(stack.chat.logs.filter((entry) => entry.message.includes("chat reply failed"))).toEqual([])
  })
})

describe("the chat routes", () => {
  it("fork no fiber and hold no fiber set: replies and tool runs are the actor's", () => {
    const routes = readFileSync(new URL("../../src/http/ChatRoutes.ts", import.meta.url), "utf8")
    expect(routes).not.toMatch(/\bFiberSet\b|\bFiberMap\b|\bFiberHandle\b|\bfork[A-Z]\w*|\bFiber\./)
    expect(routes).toMatch(/actors\.reply\(/)
    expect(routes).toMatch(/actors\.executeTool\(/)
  })
})
