/** Crash recovery: replies a dead process left `pending` are closed when a chat service starts. */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { query } from "../support/database.ts"
import { get } from "../support/http.ts"
import { startService } from "../support/services.ts"

let stack: ChatStack
beforeAll(async () => {
  stack = await startChatStack()
})
afterAll(() => stack?.close())

describe("a chat service starting", () => {
  it("marks replies pending for longer than CHAT_ABANDONED_AFTER as error, and leaves recent ones alone", async () => {
    const owner = await signedIn(stack, "recovery@plinth.test", "owner")
    const abandoned = await newConversation(stack, owner.token)
    const live = await newConversation(stack, owner.token)
    for (const id of [abandoned, live]) {
      await query(stack.db.adminUrl, (sql) => sql`INSERT INTO sys.messages (conversation_id, role, content, status)
        VALUES (${id}, 'user', '{"type":"text","text":"hi"}', 'complete'), (${id}, 'assistant', '{"type":"text","text":"half a rep"}', 'pending')`)
    }
    await query(stack.db.adminUrl, (sql) => sql`UPDATE sys.messages SET updated_at = now() - interval '1 hour'
      WHERE conversation_id = ${abandoned} AND status = 'pending'`)

    // Refused while the reply looks alive.
    expect((await postSse(stack.chat.url, `/conversations/${abandoned}/chat`, { content: "again" }, { token: owner.token })).status).toBe(400)

    const restarted = await startService("chat", stack.db.chatUrl, { ...stack.env, CHAT_ABANDONED_AFTER: "10m" })
    try {
      const statuses = async (id: string) =>
        (await get<{ messages: Array<{ status: string }> }>(restarted.url, `/conversations/${id}`, owner.token)).body.messages.map((m) => m.status)
      expect(await statuses(abandoned)).toEqual(["complete", "error"])
      expect(await statuses(live)).toEqual(["complete", "pending"])
      stack.model.script({ kind: "reply", blocks: [{ type: "text", text: "Back again." }] })
      const reply = await postSse(restarted.url, `/conversations/${abandoned}/chat`, { content: "again" }, { token: owner.token })
      expect(reply.status).toBe(200)
      expect(reply.events.at(-1)?.event).toBe("done")
    } finally {
      await restarted.close()
    }
  })
})
