/**
 * Issue #19, finding 1: the chats stored by the chat service are readable through POST /sql only
 * as the caller's own (public.conversations, public.messages; owners and admins), also when the
 * caller's WHERE raises an error that would print the value it was given: row-level security on
 * sys.conversations/sys.messages and security-barrier views filter before any condition of theirs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type JsonResponse, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, postSse, startChatStack } from "../support/chat.ts"
import { type RunningService, startService } from "../support/services.ts"
import { sqlRequest } from "../sql/fixtures.ts"

let stack: ChatStack
let production: RunningService
let owner: SignIn
let ownerConversation: string
let ownerTitled: string
let attackers: { readonly member: SignIn; readonly staff: SignIn; readonly admin: SignIn }

const SECRET_TITLE = "owner secret title 7f3a"
const SECRET_MESSAGE = "owner secret message 91c2"
const SECRET_REPLY = "assistant secret reply 5d0e"

beforeAll(async () => {
  stack = await startChatStack()
  production = await startService("main", stack.db.mainUrl, { ...stack.env, NODE_ENV: "production" })
  owner = await signedIn(stack, "isolation-owner@plinth.test", "owner")
  attackers = {
    member: await signedIn(stack, "isolation-member@plinth.test", "member"),
    staff: await signedIn(stack, "isolation-staff@plinth.test", "staff"),
    admin: await signedIn(stack, "isolation-admin@plinth.test", "admin")
  }
  // Through the chat service as it stores them (as chat_authenticator, under row-level security).
  ownerConversation = await newConversation(stack, owner.token, "to be titled by the model")
  stack.model.script({ kind: "reply", blocks: [{ type: "text", text: SECRET_REPLY }] })
  const reply = await postSse(stack.chat.url, `/conversations/${ownerConversation}/chat`, { content: SECRET_MESSAGE }, { token: owner.token })
  expect(reply.events.at(-1)?.event).toBe("done")
  // A first message retitles its conversation: this one keeps the title it was created with.
  ownerTitled = await newConversation(stack, owner.token, SECRET_TITLE)
})
afterAll(async () => {
  await production?.close()
  await stack?.close()
})

/** Conditions that raise an error naming the value they were given, on every row they see. */
const ATTACKS = [
  "SELECT * FROM public.conversations WHERE title::bool",
  "SELECT * FROM public.conversations WHERE id::text::bool",
  "SELECT * FROM public.conversations WHERE id::text < '8' AND id::text::bool",
  "SELECT * FROM public.conversations WHERE id::text >= '8' AND id::text::bool",
  "SELECT * FROM public.conversations WHERE (title || '')::int > 0",
  "SELECT * FROM public.messages WHERE content::text::bool",
  "SELECT * FROM public.messages WHERE (content ->> 'text')::bool",
  "SELECT * FROM public.messages WHERE conversation_id::text::bool",
  "SELECT 1 WHERE (SELECT bool_or(title::bool) FROM public.conversations)",
  "SELECT 1 WHERE (SELECT bool_or(content::text::bool) FROM public.messages)",
  "SELECT 1 WHERE EXISTS (SELECT FROM public.messages m WHERE m.content::text::int > 0)",
  "SELECT (SELECT string_agg(title, ',') FROM public.conversations)::int",
  "SELECT * FROM public.conversations c WHERE EXISTS (SELECT FROM public.messages m WHERE m.conversation_id = c.id AND m.content::text::bool)",
  "SELECT * FROM sys.conversations WHERE title::bool",
  "SELECT * FROM sys.messages WHERE content::text::bool"
]

const SECRETS = () => [SECRET_TITLE, SECRET_MESSAGE, SECRET_REPLY, ownerConversation, ownerTitled]

/** The whole answer as text: neither a row nor an error message or detail may carry a secret. */
const revealed = (response: JsonResponse<unknown>) => SECRETS().filter((secret) => JSON.stringify(response.body).includes(secret))

const attack = async (base: string, who: SignIn) => {
  const leaks: Array<{ statement: string; status: number; revealed: ReadonlyArray<string> }> = []
  for (const statement of ATTACKS) {
    const response = await sqlRequest(base, who.token, statement)
    expect(response.status, `${statement}: ${JSON.stringify(response.body)}`).not.toBe(500)
    const found = revealed(response)
    if (found.length > 0) leaks.push({ statement, status: response.status, revealed: found })
  }
  return leaks
}

describe("attack: reading other users' chats through an error message", () => {
  for (const mode of ["development", "production"] as const) {
    const base = () => (mode === "production" ? production.url : stack.main.url)

    it(`attack: a member reads other users' chats through an error message (${mode})`, async () => {
      expect(await attack(base(), attackers.member)).toEqual([])
    })

    it(`attack: a staff user reads other users' chats through an error message (${mode})`, async () => {
      expect(await attack(base(), attackers.staff)).toEqual([])
    })

    it(`attack: an admin reads the owner's chats through an error message (${mode})`, async () => {
      expect(await attack(base(), attackers.admin)).toEqual([])
    })
  }
})

describe("the chat views", () => {
  it("are not granted to staff and members (they have no conversations): 403", async () => {
    for (const who of [attackers.member, attackers.staff]) {
      for (const view of ["public.conversations", "public.messages"]) {
        const response = await sqlRequest(stack.main.url, who.token, `SELECT count(*) FROM ${view}`)
        expect({ status: response.status, body: response.body }).toMatchObject({
          status: 403,
          body: { error: { code: "42501", message: `permission denied for view ${view.slice("public.".length)}` } }
        })
      }
    }
  })

  it("show owners and admins their own conversations and messages, and nobody else's", async () => {
    const adminConversation = await newConversation(stack, attackers.admin.token, "the admin's own")
    const asOwner = await sqlRequest<{ rows: ReadonlyArray<{ id: string; title: string }> }>(
      stack.main.url,
      owner.token,
      "SELECT id::text, title FROM public.conversations ORDER BY created_at"
    )
    expect(asOwner.body.rows).toEqual([{ id: ownerConversation, title: expect.any(String) }, { id: ownerTitled, title: SECRET_TITLE }])
    const ownerMessages = await sqlRequest<{ rows: ReadonlyArray<{ conversation_id: string; text: string }> }>(
      stack.main.url,
      owner.token,
      "SELECT conversation_id::text, content ->> 'text' AS text FROM public.messages ORDER BY created_at"
    )
    expect(ownerMessages.body.rows.map((row) => row.text)).toEqual([SECRET_MESSAGE, SECRET_REPLY])
    const asAdmin = await sqlRequest<{ rows: ReadonlyArray<{ id: string; title: string }> }>(
      stack.main.url,
      attackers.admin.token,
      "SELECT id::text, title FROM public.conversations"
    )
    expect(asAdmin.body.rows).toEqual([{ id: adminConversation, title: "the admin's own" }])
    const adminMessages = await sqlRequest(stack.main.url, attackers.admin.token, "SELECT * FROM public.messages")
    expect(adminMessages.body).toEqual({ rows: [], rowCount: 0 })
  })
})
