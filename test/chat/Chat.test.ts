/** The chat service's main paths against a fake model speaking the real streaming protocol. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { get } from "../support/http.ts"
import { post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"

let stack: ChatStack
let owner: SignIn

beforeAll(async () => {
  stack = await startChatStack()
  owner = await signedIn(stack, "chat-owner@plinth.test", "owner")
})
afterAll(() => stack?.close())

describe("a plain reply", () => {
  it("streams tokens, then title (first message), then done with the stored message", async () => {
    const id = await newConversation(stack, owner.token, "")
    stack.model.script({ kind: "reply", blocks: [{ type: "text", text: "Hello there, builder." }] }, { kind: "reply", blocks: [{ type: "text", text: "Greeting" }] })
    const reply = await postSse(stack.chat.url, `/conversations/${id}/chat`, { content: "Hi!" }, { token: owner.token })
    expect(reply.status).toBe(200)
    expect(reply.contentType).toContain("text/event-stream")
    const names = reply.events.map((event) => event.event)
    expect(names.filter((name) => name === "token").length).toBeGreaterThan(1)
    expect(names.slice(-2)).toEqual(["title", "done"])
    expect(reply.events.filter((e) => e.event === "token").map((e) => e.data["text"]).join("")).toBe("Hello there, builder.")
    expect(reply.events.at(-2)!.data).toEqual({ title: "Greeting" })
    const done = reply.events.at(-1)!.data as { message: { role: string; status: string; content: unknown } }
    expect(done.message).toMatchObject({ role: "assistant", status: "complete", content: { type: "text", text: "Hello there, builder." } })
    const conversation = await get<{ title: string; messages: Array<{ role: string; status: string }> }>(stack.chat.url, `/conversations/${id}`, owner.token)
    expect(conversation.body.title).toBe("Greeting")
    expect(conversation.body.messages.map((m) => [m.role, m.status])).toEqual([["user", "complete"], ["assistant", "complete"]])
  })
})

describe("tool calls", () => {
  it("propose_create_table runs as the caller, is stored as its own message, and the loop continues to text", async () => {
    const id = await newConversation(stack, owner.token)
    stack.model.script(
      { kind: "reply", blocks: [{ type: "text", text: "Creating it." }, { type: "tool_use", id: "toolu_create", name: "propose_create_table", input: { table_name: "crm_contacts", columns: [{ name: "name", type: "text" }] } }] },
      { kind: "reply", blocks: [{ type: "text", text: "Done: crm_contacts exists." }] }
    )
    const reply = await postSse(stack.chat.url, `/conversations/${id}/chat`, { content: "Make a contacts table" }, { token: owner.token })
    const names = reply.events.map((event) => event.event).filter((name) => name !== "token")
    expect(names).toEqual(["tool_call", "done", "title", "done"])
    expect(reply.events.find((e) => e.event === "tool_call")!.data).toEqual({ id: "toolu_create", name: "propose_create_table", args: { table_name: "crm_contacts", columns: [{ name: "name", type: "text" }] } })
    const toolDone = reply.events.find((e) => e.event === "done")!.data as { streaming_continues: boolean; tool_result: { result: unknown } }
    expect(toolDone.streaming_continues).toBe(true)
    expect(toolDone.tool_result.result).toMatchObject({ table: "crm_contacts", view: "crm_contacts_v" })
    // The model got the tool_result for its tool_use id.
    const second = stack.model.requests.at(-2)!.body.messages
    expect(JSON.stringify(second)).toContain('"tool_use_id":"toolu_create"')
    const schema = await post<{ relations: Array<{ table_name: string }> }>(stack.main.url, "/", {}, { token: owner.token })
    expect(schema.body.relations.map((r) => r.table_name)).toContain("crm_contacts")
  })
})

describe("routes", () => {
  it("staff and members are 403, no JWT is 401, unknown conversations 404", async () => {
    const staff = await signedIn(stack, "chat-staff@plinth.test", "staff")
    expect((await post(stack.chat.url, "/conversations", { title: "x" }, { token: staff.token })).status).toBe(403)
    expect((await post(stack.chat.url, "/conversations", { title: "x" })).status).toBe(401)
    const missing = await postSse(stack.chat.url, "/conversations/00000000-0000-0000-0000-000000000000/chat", { content: "hi" }, { token: owner.token })
    expect(missing.status).toBe(404)
    expect((await postSse(stack.chat.url, "/conversations/not-a-uuid/continue", undefined, { token: owner.token })).status).toBe(404)
  })

  it("continue without a tool call to continue is 400", async () => {
    const id = await newConversation(stack, owner.token)
    const reply = await postSse(stack.chat.url, `/conversations/${id}/continue`, undefined, { token: owner.token })
    expect(reply.status).toBe(400)
    expect(reply.body).toEqual({ error: expect.any(String) })
  })
})
