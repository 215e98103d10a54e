/**
 * `plinth/client` against the real services: every endpoint's happy path goes through the client
 * (the Effect one and the promise facade), so a change of the API the client does not follow fails
 * here; the streams' events are decoded with the schemas the servers write them from.
 */
import { Effect, Fiber, Option, Stream } from "effect"
import { FetchHttpClient, type HttpClient } from "effect/http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Conflict, createPlinthClient, DatabaseError, make, type PageEvent, type PlinthClient, Unauthorized } from "../../src/client/index.ts"
import { inviteAsDatabaseAdmin, mailedToken } from "../support/auth.ts"
import { type ChatStack, startChatStack } from "../support/chat.ts"
import { admin, fresh, hangAfter, insertMessage, pendingIn, scriptedTurns, text, toolUse, type Turns } from "../chat/helpers.ts"
import { ddl } from "../sql/fixtures.ts"
import { eventually } from "../support/eventually.ts"

const MAX_STEPS = 1

let stack: ChatStack
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack({ CHAT_MAX_STEPS: String(MAX_STEPS) })
  turns = scriptedTurns(stack.model)
  await ddl(stack, `
    CREATE FUNCTION public.add(a int, b int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT a + b';
    GRANT EXECUTE ON FUNCTION public.add(int, int) TO owner, admin, staff, member;
  `)
}, 60_000)
afterAll(() => stack?.close())

const run = <A, E>(effect: Effect.Effect<A, E, HttpClient.HttpClient>) => Effect.runPromise(Effect.provide(effect, FetchHttpClient.layer))

/** An Effect client with no caller yet, and one signed in as a new `role` (through the client). */
const anonymous = () => run(make({ url: stack.main.url, chatUrl: stack.chat.url }))
const signedInAs = async (role: string): Promise<PlinthClient> => {
  const client = await anonymous()
  const linkToken = await inviteAsDatabaseAdmin(stack.db, `${fresh(role)}@plinth.test`, role)
  const signIn = await run(client.mainApi.auth.verifyMagicLink({ payload: { token: linkToken } }))
  return run(client.withCaller({ token: signIn.token }))
}

describe("the Effect client", () => {
  it("system: health and ready of both services", async () => {
    const client = await anonymous()
    expect(await run(client.mainApi.system.health())).toEqual({ status: "ok" })
    expect(await run(client.mainApi.system.ready())).toEqual({ status: "ready" })
    expect(await run(client.chatApi.system.health())).toEqual({ status: "ok" })
    expect(await run(client.chatApi.system.ready())).toEqual({ status: "ready" })
  })

  it("auth: magic link, verify, set a password, log in, change the email and verify it", async () => {
    const client = await anonymous()
    const email = `${fresh("auth")}@plinth.test`
    await inviteAsDatabaseAdmin(stack.db, email, "member")
    expect(await run(client.mainApi.auth.requestMagicLink({ payload: { email } }))).toEqual({ sent: true })
    const signIn = await run(client.mainApi.auth.verifyMagicLink({ payload: { token: await mailedToken(stack.mail, email) } }))
    expect(signIn.user).toMatchObject({ email, role: "member", needs_password: true })

    const member = await run(client.withCaller({ token: signIn.token }))
    const password = await run(member.mainApi.account.setPassword({ payload: { password: "correct horse battery" } }))
    expect(password).toEqual({ ok: true, token: expect.any(String) })
    const login = await run(client.mainApi.auth.login({ payload: { email, password: "correct horse battery" } }))
    expect(login.user).toMatchObject({ email, needs_password: false })

    const changed = `${fresh("changed")}@plinth.test`
    expect(await run(member.mainApi.account.requestEmailChange({ payload: { email: changed } }))).toEqual({ sent: true })
    const confirmed = await run(client.mainApi.auth.verifyEmailChange({ payload: { token: await mailedToken(stack.mail, changed) } }))
    expect(confirmed.user).toMatchObject({ id: signIn.user.id, email: changed })
  })

  it("account: an owner invites a member", async () => {
    const owner = await signedInAs("owner")
    const email = `${fresh("invited")}@plinth.test`
    expect(await run(owner.mainApi.account.invite({ payload: { email, role: "member" } }))).toEqual({ ok: true })
    expect(await mailedToken(stack.mail, email)).toMatch(/^[0-9a-f]{64}$/)
  })

  it("introspection, /sql and /function", async () => {
    const owner = await signedInAs("owner")
    const schema = await run(owner.mainApi.introspection.introspect({ payload: {} }))
    expect(schema.curr_role).toBe("owner")
    expect(await run(owner.mainApi.data.sql({ payload: { sql: "SELECT $1::int + 1 AS two", params: [1] } }))).toEqual({ rows: [{ two: 2 }], rowCount: 1 })
    expect(await run(owner.mainApi.data.function({ params: { name: "add" }, payload: [2, 3] }))).toEqual({ rows: [{ add: 5 }], rowCount: 1 })
  })

  it("an endpoint's error is its tagged failure", async () => {
    const client = await run((await anonymous()).withCaller({ token: "not-a-jwt" }))
    const failure = await run(Effect.flip(client.mainApi.data.sql({ payload: { sql: "SELECT 1" } })))
    expect(failure).toBeInstanceOf(Unauthorized)
    expect(failure).toMatchObject({ _tag: "Unauthorized", error: expect.any(String) })
  })

  it("the database's refusal of a statement is a tagged DatabaseError with its code; a bad body a BadRequest", async () => {
    const owner = await signedInAs("owner")
    const conflict = await run(Effect.flip(owner.mainApi.data.sql({ payload: { sql: "SELECT 1 / 0 AS never" } })))
    expect(conflict).toBeInstanceOf(DatabaseError)
    expect(conflict).toMatchObject({ _tag: "DatabaseError", error: { code: "22012", message: expect.stringContaining("division by zero") } })
    const denied = await run(Effect.flip(owner.mainApi.data.sql({ payload: { sql: "SELECT * FROM sys.users" } })))
    expect(denied).toMatchObject({ _tag: "DatabaseError", error: { code: "42501" } })
    const invalid = await run(Effect.flip(owner.mainApi.data.sql({ payload: { sql: "DROP TABLE nothing" } })))
    expect(invalid).toMatchObject({ _tag: "BadRequest", error: expect.any(String) })
  })

  it("events: a page_change, decoded, with the token in the header or as ?token=", async () => {
    const owner = await signedInAs("owner")
    for (const query of [{}, { token: owner.options.token! }]) {
      const slug = fresh("client-page")
      const first = await run(Effect.gen(function*() {
        // The endpoint answers once the stream is subscribed: a change after that is not missed.
        const events = yield* owner.mainApi.events.events({ query })
        yield* owner.mainApi.data.sql({ payload: { sql: "SELECT sys.create_page($1, 'Hello', '<p>hi</p>')", params: [slug] } })
        return yield* Stream.runHead(events)
      }))
      expect(first).toEqual(Option.some({ event: "page_change", data: { schema: "public", slug } } satisfies PageEvent))
    }
  })

  it("events(): the same as a Stream", async () => {
    const owner = await signedInAs("owner")
    const slug = fresh("client-stream")
    const reading = Effect.runFork(Stream.runHead(Stream.filter(owner.events(), (event) => event.event === "page_change" && event.data.slug === slug)))
    // The stream subscribes when it is run: change the page until the change is seen.
    expect(await eventually(async () => {
      await run(owner.mainApi.data.sql({ payload: { sql: "SELECT sys.create_page($1, 'Hello', '<p>hi</p>'), sys.delete_page($1)", params: [slug] } }))
      return reading.pollUnsafe() !== undefined
    }, 10_000, 100)).toBe(true)
    expect(await Effect.runPromise(Fiber.join(reading))).toEqual(Option.some({ event: "page_change", data: { schema: "public", slug } }))
  })

  it("conversations: create, list, get, a streamed chat reply, execute-tool, continue, delete", async () => {
    const owner = await signedInAs("owner")
    const conversation = await run(owner.chatApi.conversations.create({ payload: { title: "Through the client" } }))
    expect(conversation).toMatchObject({ id: expect.any(String), title: "Through the client" })
    expect((await run(owner.chatApi.conversations.list())).map((c) => c.id)).toContain(conversation.id)

    turns.push(text("Hello from the model"))
    const reply = await run(Stream.runCollect(owner.chat(conversation.id, "Say hello")))
    expect(reply.filter((event) => event.event === "token").map((event) => event.data.text).join("")).toBe("Hello from the model")
    expect(reply.at(-1)).toMatchObject({ event: "done", data: { message: { role: "assistant", status: "complete", content: { type: "text", text: "Hello from the model" } } } })

    // A tool call stops the reply at the step bound (MAX_STEPS); continue resumes it.
    turns.push(toolUse("toolu_client", "propose_plan", { steps: ["one"] }))
    const stopped = await run(Stream.runCollect(owner.chat(conversation.id, "Plan something")))
    expect(stopped.map((event) => event.event)).toEqual(["tool_call", "done", "error"])
    turns.push(text("Planned."))
    const continued = await run(Stream.runCollect(owner.continue(conversation.id)))
    expect(continued.at(-1)).toMatchObject({ event: "done", data: { message: { content: { type: "text", text: "Planned." } } } })

    const got = await run(owner.chatApi.conversations.get({ params: { id: conversation.id } }))
    expect(got.messages.map((message) => message.role)).toEqual(["user", "assistant", "user", "assistant", "assistant"])

    const pending = await insertMessage(stack, conversation.id, "assistant", {
      type: "tool_call",
      tool_calls: [{ id: "toolu_legacy", name: "propose_plan", args: { steps: ["legacy"] } }]
    }, "pending_approval")
    const executed = await run(owner.chatApi.conversations.executeTool({ params: { id: conversation.id }, payload: { message_id: pending } }))
    expect(executed.status).toBe("complete")

    await run(owner.chatApi.conversations.delete({ params: { id: conversation.id } }))
    expect(await admin(stack, "SELECT id FROM sys.conversations WHERE id = $1", [conversation.id])).toEqual([])
  })

  it("stop and stream: a reply attached from its first event, stopped on the server with its text kept; Conflict when none runs", async () => {
    const owner = await signedInAs("owner")
    const conversation = await run(owner.chatApi.conversations.create({ payload: { title: "" } }))
    const stopIdle = await run(Effect.flip(owner.stop(conversation.id)))
    expect(stopIdle).toBeInstanceOf(Conflict)
    turns.push(hangAfter("So far, so good."))
    const reading = Effect.runFork(Effect.provide(Stream.runCollect(owner.chat(conversation.id, "Keep going")), FetchHttpClient.layer))
    expect(await eventually(async () => (await pendingIn(stack, conversation.id)) > 0)).toBe(true)
    const attached = Effect.runFork(Effect.provide(Stream.runCollect(owner.stream(conversation.id)), FetchHttpClient.layer))
    // The attacher has the reply's text from its first token before the reply is stopped.
    const firstToken = await run(Stream.runHead(Stream.filter(owner.stream(conversation.id), (event) => event.event === "token")))
    expect(Option.getOrThrow(firstToken)).toMatchObject({ event: "token" })
    await run(owner.stop(conversation.id))
    const events = await Effect.runPromise(Fiber.join(reading))
    expect(events.at(-1)).toEqual({
      event: "done",
      data: { message: { id: expect.any(String), role: "assistant", content: { type: "text", text: "So far, so good." }, status: "complete" }, stopped: true }
    })
    expect(await Effect.runPromise(Fiber.join(attached))).toEqual(events)
    // No reply runs now: the stream is the latest message.
    const latest = await run(Stream.runCollect(owner.stream(conversation.id)))
    expect(latest).toEqual([{ event: "done", data: { message: (events.at(-1)!.data as { message: unknown }).message } }])
  })
})

describe("the promise client", () => {
  it("signs in, runs /sql and /function, hears a page_change and streams a chat reply", async () => {
    const client = createPlinthClient({ url: stack.main.url, chatUrl: stack.chat.url })
    const signIn = await client.signIn(await inviteAsDatabaseAdmin(stack.db, `${fresh("async")}@plinth.test`, "owner"))
    expect(client.token()).toBe(signIn.token)
    expect(await client.sql("SELECT $1::int * 2 AS four", [2])).toEqual({ rows: [{ four: 4 }], rowCount: 1 })
    expect(await client.call("add", [40, 2])).toEqual({ rows: [{ add: 42 }], rowCount: 1 })

    const slug = fresh("async-page")
    const pageEvents = await client.events()
    await client.sql("SELECT sys.create_page($1, 'Hello', '<p>hi</p>')", [slug])
    for await (const event of pageEvents) {
      expect(event).toEqual({ event: "page_change", data: { schema: "public", slug } })
      break
    }

    const conversation = await client.run((c) => c.chatApi.conversations.create({ payload: { title: "Async" } }))
    turns.push(text("Hi there"))
    const events = []
    for await (const event of client.chat(conversation.id, "Hello")) events.push(event)
    expect(events.at(-1)).toMatchObject({ event: "done", data: { message: { content: { type: "text", text: "Hi there" } } } })

    // stop and stream: a second reader of a running reply, and the stop that ends it.
    await expect(client.stop(conversation.id)).rejects.toBeInstanceOf(Conflict)
    turns.push(hangAfter("Half a thought"))
    const sofar: Array<unknown> = []
    const running = (async () => {
      for await (const event of client.chat(conversation.id, "Think")) sofar.push(event)
      return sofar
    })()
    expect(await eventually(async () => (await pendingIn(stack, conversation.id)) > 0)).toBe(true)
    // Stopped once its last token has streamed: a stop before the first would keep no text.
    const streamed = () => sofar.map((event) => (event as { event: string; data: { text?: string } })).filter((event) => event.event === "token").map((event) => event.data.text).join("")
    expect(await eventually(async () => streamed() === "Half a thought"), JSON.stringify(sofar)).toBe(true)
    const attached = (async () => {
      const seen = []
      for await (const event of client.stream(conversation.id)) seen.push(event)
      return seen
    })()
    await client.stop(conversation.id)
    const seen = await running
    expect(seen.at(-1)).toMatchObject({ event: "done", data: { stopped: true, message: { content: { type: "text", text: "Half a thought" } } } })
    expect(await attached).toEqual(seen)
  })

  it("rejects with the endpoint's tagged error", async () => {
    const client = createPlinthClient({ url: stack.main.url, token: "not-a-jwt" })
    await expect(client.sql("SELECT 1")).rejects.toBeInstanceOf(Unauthorized)
  })
})
