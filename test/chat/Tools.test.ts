/**
 * The fifteen tools of spec §4.8, each run end to end through POST /chat: the model (fake) answers
 * with a tool_use, the server runs it as the caller, stores it as its own message, streams
 * tool_call + done { streaming_continues, tool_result }, and re-prompts the model with the
 * tool_result for that tool_use id; the effect is checked in the database or through the main
 * service. Also: a failing tool fed back as is_error and corrected by the model, several tool
 * calls in one answer, select_data's limits, and X-App-Schema.
 */
import { Effect } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, type SseReply, startChatStack } from "../support/chat.ts"
import { query } from "../support/database.ts"
import type { RecordedRequest } from "../support/FakeAnthropic.ts"
import {
  admin,
  blocksOf,
  chat,
  continueTurn,
  type DoneData,
  doneEvents,
  eventsNamed,
  eventually,
  fresh,
  insertMessage,
  lastToolResults,
  messagesInDatabase,
  relationExists,
  replyRequests,
  scriptedTurns,
  sqlAs,
  sysCall,
  text,
  tokensOf,
  toolUse,
  type Turns,
  visibleNames
} from "./helpers.ts"

let stack: ChatStack
let owner: SignIn
let adminUser: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack()
  turns = scriptedTurns(stack.model)
  ;[owner, adminUser] = await Promise.all([
    signedIn(stack, "tools-owner@plinth.test", "owner"),
    signedIn(stack, "tools-admin@plinth.test", "admin")
  ])
})
afterAll(() => stack?.close())
afterEach(() => turns.reset())

interface ToolRun {
  readonly conversationId: string
  readonly toolUseId: string
  readonly reply: SseReply
  /** The streamed requests of this chat: [the one answered with the tool_use, the next one]. */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** What the server fed back to the model (and streamed in done.tool_result). */
  readonly toolResult: Record<string, unknown>
}

/** One chat whose model answers with one tool_use, then with text. */
const runTool = async (
  name: string,
  input: Record<string, unknown>,
  options: { readonly user?: SignIn; readonly headers?: Record<string, string> } = {}
): Promise<Omit<ToolRun, "toolResult">> => {
  const user = options.user ?? owner
  const conversationId = await newConversation(stack, user.token, name)
  const toolUseId = `toolu_${fresh(name)}`
  turns.push(toolUse(toolUseId, name, input, `Running ${name}.`), text(`Finished ${name}.`))
  const from = stack.model.requests.length
  const reply = await chat(stack, user, conversationId, `Please ${name}`, options.headers ?? {})
  expect(reply.status).toBe(200)
  expect(turns.left()).toBe(0)
  return { conversationId, toolUseId, reply, requests: replyRequests(stack.model, from) }
}

/** The common shape of a tool that ran and succeeded, visible to the user (every tool but select_data). */
const expectVisibleSuccess = async (name: string, input: Record<string, unknown>, run: Omit<ToolRun, "toolResult">): Promise<ToolRun> => {
  const { reply, toolUseId, requests, conversationId } = run
  expect(reply.status).toBe(200)
  expect(visibleNames(reply)).toEqual(["tool_call", "done", "title", "done"])
  expect(eventsNamed(reply, "tool_call")[0]!.data).toEqual({ id: toolUseId, name, args: input })
  const [toolDone, finalDone] = doneEvents(reply) as [DoneData, DoneData]
  expect(toolDone.streaming_continues).toBe(true)
  expect(toolDone.tool_result).toEqual({ result: expect.anything() })
  expect(toolDone.message).toMatchObject({
    role: "assistant",
    status: "complete",
    content: { type: "tool_call", text: `Running ${name}.`, tool_calls: [{ id: toolUseId, name, args: input }], tool_result: toolDone.tool_result }
  })
  expect(finalDone.message).toMatchObject({ role: "assistant", status: "complete", content: { type: "text", text: `Finished ${name}.` } })
  expect(finalDone.streaming_continues).toBeUndefined()
  expect(tokensOf(reply)).toBe(`Running ${name}.Finished ${name}.`)

  // The model got the tool_result for its tool_use id, with the result the client saw.
  expect(requests.length).toBe(2)
  const results = lastToolResults(requests[1]!)
  expect(results.map((result) => [result.tool_use_id, result.is_error ?? false])).toEqual([[toolUseId, false]])
  expect(JSON.parse(results[0]!.content)).toEqual(toolDone.tool_result)

  // Stored: the user's message, the tool call as its own message, the final text.
  const stored = await messagesInDatabase(stack, conversationId)
  expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
    ["user", "complete", "text"],
    ["assistant", "complete", "tool_call"],
    ["assistant", "complete", "text"]
  ])
  expect(stored[1]!.id).toBe(toolDone.message.id)
  expect(stored[1]!.content["tool_result"]).toEqual(toolDone.tool_result)
  return { ...run, toolResult: toolDone.tool_result! }
}

const tool = async (name: string, input: Record<string, unknown>, options: { readonly user?: SignIn; readonly headers?: Record<string, string> } = {}) =>
  expectVisibleSuccess(name, input, await runTool(name, input, options))

const createTable = (name: string, columns: ReadonlyArray<Record<string, unknown>>, schema?: string) =>
  sysCall(stack, owner, "sys.create_table($1, $2::jsonb)", [name, JSON.stringify(columns)], schema)

const itemsTable = async () => {
  const table = fresh("items")
  await createTable(table, [{ name: "name", type: "text" }, { name: "qty", type: "integer" }])
  await admin(stack, `INSERT INTO public.${table} (name, qty) VALUES ('a', 1), ('b', 2), ('c', 3)`)
  return table
}

const columnsOf = async (table: string, schema = "public") =>
  (await admin<{ column_name: string }>(
    stack,
    "SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
    [schema, table]
  )).map((row) => row.column_name)

const pageOf = async (slug: string) =>
  (await admin<{ schema_name: string; title: string; source: string; updated_by: string | null }>(
    stack,
    "SELECT schema_name, title, source, updated_by::text FROM sys.pages WHERE slug = $1",
    [slug]
  ))[0]

const slugOf = (label: string) => fresh(label).replaceAll("_", "-")

describe("schema tools", () => {
  it("propose_create_table creates the table (and its read view) as the caller", async () => {
    const table = fresh("products")
    const input = { table_name: table, columns: [{ name: "title", type: "text", required: true }, { name: "price", type: "currency" }] }
    const run = await tool("propose_create_table", input)
    expect(run.toolResult).toEqual({ result: { schema: "public", table, view: `${table}_v` } })
    const schema = await post<{ relations: Array<{ table_name: string }>; column_metadata: Record<string, Record<string, { display_type: string }>> }>(
      stack.main.url,
      "/",
      {},
      { token: owner.token }
    )
    expect(schema.status).toBe(200)
    expect(schema.body.relations.map((relation) => relation.table_name)).toEqual(expect.arrayContaining([table, `${table}_v`]))
    expect(schema.body.column_metadata[table]?.["price"]?.display_type).toBe("currency")
    expect(await columnsOf(table)).toEqual(["id", "created_at", "updated_at", "created_by", "title", "price"])
    // The schema is refreshed after the tool: the next prompt shows the new table.
    expect(String(run.requests[0]!.body.system)).not.toContain(table)
    expect(String(run.requests[1]!.body.system)).toContain(table)
  })

  it("propose_alter_table adds and renames columns", async () => {
    const table = fresh("alter")
    await createTable(table, [{ name: "name", type: "text" }])
    const input = {
      table_name: table,
      operations: [{ op: "add_column", column: { name: "notes", type: "text" } }, { op: "rename_column", name: "name", to: "full_name" }]
    }
    const run = await tool("propose_alter_table", input)
    expect(run.toolResult).toEqual({ result: { schema: "public", table, view: `${table}_v` } })
    expect(await columnsOf(table)).toEqual(["id", "created_at", "updated_at", "created_by", "full_name", "notes"])
  })

  it("propose_drop_table drops the table and its read view", async () => {
    const table = fresh("drop")
    await createTable(table, [{ name: "name", type: "text" }])
    const run = await tool("propose_drop_table", { table_name: table })
    expect(run.toolResult).toEqual({ result: { schema: "public", table, view: `${table}_v` } })
    expect(await relationExists(stack, `public.${table}`)).toBe(false)
    expect(await relationExists(stack, `public.${table}_v`)).toBe(false)
  })

  it("propose_create_view creates a read-only view the main service can query", async () => {
    const table = await itemsTable()
    const view = fresh("big_items")
    const run = await tool("propose_create_view", { view_name: view, sql: `SELECT name, qty FROM ${table} WHERE qty > 1` })
    expect(run.toolResult).toEqual({ result: { schema: "public", view } })
    const rows = await sqlAs(stack, owner, `SELECT name FROM ${view} ORDER BY name`)
    expect(rows.status).toBe(200)
    expect(rows.body.rows).toEqual([{ name: "b" }, { name: "c" }])
  })

  it("propose_drop_view drops a custom view", async () => {
    const table = await itemsTable()
    const view = fresh("gone_view")
    await sysCall(stack, owner, "sys.create_view($1, $2)", [view, `SELECT name FROM ${table}`])
    expect(await relationExists(stack, `public.${view}`)).toBe(true)
    const run = await tool("propose_drop_view", { view_name: view })
    expect(run.toolResult).toEqual({ result: { schema: "public", view } })
    expect(await relationExists(stack, `public.${view}`)).toBe(false)
    expect(await admin(stack, "SELECT view_name FROM sys.managed_views WHERE view_name = $1", [view])).toEqual([])
  })

  it("configure_fk_display sets the display columns", async () => {
    const table = fresh("customers")
    await createTable(table, [{ name: "name", type: "text" }, { name: "code", type: "text" }])
    const run = await tool("configure_fk_display", { table_name: table, columns: ["code", "name"] })
    expect(run.toolResult).toEqual({ result: { schema: "public", table, view: `${table}_v` } })
    const schema = await post<{ table_metadata: Record<string, { display_columns?: Array<string> }> }>(stack.main.url, "/", {}, { token: owner.token })
    expect(schema.status).toBe(200)
    expect(schema.body.table_metadata[table]?.display_columns).toEqual(["code", "name"])
  })
})

describe("data tools", () => {
  it("propose_seed_data inserts the rows as the caller (created_by is the caller)", async () => {
    const table = fresh("seeded")
    await createTable(table, [{ name: "name", type: "text" }, { name: "qty", type: "integer" }])
    const rows = [{ name: "x", qty: 1 }, { name: "y", qty: 2 }, { name: "z" }]
    const run = await tool("propose_seed_data", { table_name: table, rows }, { user: adminUser })
    expect(run.toolResult).toEqual({ result: { rowCount: 3 } })
    expect(await admin(stack, `SELECT name, qty, created_by::text AS created_by FROM public.${table} ORDER BY name`)).toEqual([
      { name: "x", qty: 1, created_by: adminUser.user.id },
      { name: "y", qty: 2, created_by: adminUser.user.id },
      { name: "z", qty: null, created_by: adminUser.user.id }
    ])
  })

  it("propose_update_rows sets values on the rows matching WHERE only", async () => {
    const table = await itemsTable()
    const run = await tool("propose_update_rows", { table_name: table, values: { qty: 10, name: "A" }, where: "name = 'a'" })
    expect(run.toolResult).toEqual({ result: { rowCount: 1 } })
    expect(await admin(stack, `SELECT name, qty FROM public.${table} ORDER BY qty`)).toEqual([
      { name: "b", qty: 2 },
      { name: "c", qty: 3 },
      { name: "A", qty: 10 }
    ])
  })

  it("propose_update_rows with a table-qualified WHERE sets values on the matching rows only", async () => {
    const table = await itemsTable()
    const run = await tool("propose_update_rows", { table_name: table, values: { qty: 10, name: "A" }, where: `${table}.name = 'a'` })
    expect(run.toolResult).toEqual({ result: { rowCount: 1 } })
    expect(await admin(stack, `SELECT name, qty FROM public.${table} ORDER BY qty`)).toEqual([
      { name: "b", qty: 2 },
      { name: "c", qty: 3 },
      { name: "A", qty: 10 }
    ])
  })

  it("propose_delete_rows deletes the rows matching WHERE only", async () => {
    const table = await itemsTable()
    const run = await tool("propose_delete_rows", { table_name: table, where: "qty > 1" })
    expect(run.toolResult).toEqual({ result: { rowCount: 2 } })
    expect(await admin(stack, `SELECT name FROM public.${table}`)).toEqual([{ name: "a" }])
  })
})

describe("page tools", () => {
  it("propose_create_page creates the page in the caller's schema", async () => {
    const slug = slugOf("home")
    const run = await tool("propose_create_page", { slug, title: "Home", source: "<h1>Home</h1>" })
    expect(run.toolResult).toEqual({ result: expect.objectContaining({ schema_name: "public", slug, title: "Home", source: "<h1>Home</h1>" }) })
    expect(await pageOf(slug)).toEqual({ schema_name: "public", title: "Home", source: "<h1>Home</h1>", updated_by: owner.user.id })
  })

  it("propose_update_page changes the source and keeps the title when none is given", async () => {
    const slug = slugOf("report")
    await sysCall(stack, owner, "sys.create_page($1, $2, $3)", [slug, "Report", "v1"])
    const run = await tool("propose_update_page", { slug, source: "v2" }, { user: adminUser })
    expect(run.toolResult).toEqual({ result: expect.objectContaining({ slug, title: "Report", source: "v2" }) })
    expect(await pageOf(slug)).toEqual({ schema_name: "public", title: "Report", source: "v2", updated_by: adminUser.user.id })
  })

  it("propose_delete_page deletes the page", async () => {
    const slug = slugOf("old")
    await sysCall(stack, owner, "sys.create_page($1, $2, $3)", [slug, "Old", "x"])
    const run = await tool("propose_delete_page", { slug })
    expect(run.toolResult).toEqual({ result: { schema_name: "public", slug } })
    expect(await pageOf(slug)).toBeUndefined()
  })

  it("preview_page completes at once with \"Preview rendered\" and creates nothing", async () => {
    const slug = slugOf("preview")
    const run = await tool("preview_page", { slug, title: "Preview", source: "<p>draft</p>" })
    expect(run.toolResult).toEqual({ result: "Preview rendered" })
    expect(doneEvents(run.reply)[0]!.message.status).toBe("complete")
    expect(await pageOf(slug)).toBeUndefined()
  })

  it("propose_plan completes at once with \"Plan presented\"", async () => {
    const run = await tool("propose_plan", { title: "CRM", steps: ["Create contacts", "Create deals", "Build a dashboard"] })
    expect(run.toolResult).toEqual({ result: "Plan presented" })
    expect(doneEvents(run.reply)[0]!.message).toMatchObject({ status: "complete", content: { tool_result: { result: "Plan presented" } } })
  })
})

// ---------------------------------------------------------------------------------------------
// select_data: invisible to the user, read-only, at most 20 rows

/** Runs select_data; the user sees only status events, then the final reply. */
const selectData = async (statement: string, user: SignIn = owner) => {
  const run = await runTool("select_data", { sql: statement }, { user })
  expect(run.reply.status).toBe(200)
  expect(visibleNames(run.reply)).toEqual(["status", "status", "title", "done"])
  const [first, second] = eventsNamed(run.reply, "status")
  expect(String(first!.data["text"]).length).toBeGreaterThan(0)
  expect(second!.data).toEqual({ text: "" })
  expect(doneEvents(run.reply)[0]!.message).toMatchObject({ status: "complete", content: { type: "text", text: "Finished select_data." } })
  expect(run.requests.length).toBe(2)
  const [result] = lastToolResults(run.requests[1]!)
  expect(result!.tool_use_id).toBe(run.toolUseId)
  const stored = await messagesInDatabase(stack, run.conversationId)
  expect(stored.map((message) => message.content["type"])).toEqual(["text", "tool_call", "text"])
  return { ...run, result: result!, fed: JSON.parse(result!.content) as Record<string, unknown>, stored }
}

describe("select_data", () => {
  it("runs the SELECT as the caller's role and user, read-only, and feeds the rows to the model", async () => {
    const run = await selectData(
      "SELECT current_user AS who, current_setting('app.user_id') AS uid, current_setting('transaction_read_only') AS ro",
      adminUser
    )
    expect(run.result.is_error).toBe(false)
    expect(run.fed).toEqual({ result: { rows: [{ who: "admin", uid: adminUser.user.id, ro: "on" }], rowCount: 1, truncated: false } })
    expect(run.stored[1]!.status).toBe("complete")
  })

  it("cannot read what the caller's role may not (the chat service's own tables), so it is not run as the service", async () => {
    const theirs = await newConversation(stack, adminUser.token, "secret conversation")
    const run = await selectData("SELECT id, title FROM sys.conversations")
    expect(run.result.is_error).toBe(true)
    expect(run.fed).toEqual({ error: expect.stringContaining("permission denied") })
    expect(run.result.content).not.toContain(theirs)
    expect(run.stored[1]!.status).toBe("error")
  })

  it("reads the caller's data", async () => {
    const table = await itemsTable()
    const run = await selectData(`SELECT name, qty FROM ${table} ORDER BY qty`)
    expect(run.fed).toEqual({ result: { rows: [{ name: "a", qty: 1 }, { name: "b", qty: 2 }, { name: "c", qty: 3 }], rowCount: 3, truncated: false } })
  })

  it("returns at most 20 rows, with truncated: true when there were more", async () => {
    const many = await selectData("SELECT g FROM generate_series(1, 50) AS g ORDER BY g")
    expect(many.fed).toEqual({ result: { rows: Array.from({ length: 20 }, (_, index) => ({ g: index + 1 })), rowCount: 20, truncated: true } })
    const exactly = await selectData("SELECT g FROM generate_series(1, 20) AS g ORDER BY g")
    expect(exactly.fed).toMatchObject({ result: { rowCount: 20, truncated: false } })
  })

  it("a data-modifying CTE fails, is fed back as an error, and changes nothing", async () => {
    const table = await itemsTable()
    const run = await selectData(`WITH gone AS (DELETE FROM ${table} RETURNING id) SELECT count(*) AS n FROM gone`)
    expect(run.result.is_error).toBe(true)
    expect(run.fed).toEqual({ error: expect.any(String) })
    expect(run.stored[1]!.status).toBe("error")
    expect(await admin(stack, `SELECT count(*)::int AS n FROM public.${table}`)).toEqual([{ n: 3 }])
  })

  it("a statement that is not a SELECT fails and changes nothing", async () => {
    const table = await itemsTable()
    const run = await selectData(`DELETE FROM ${table}`)
    expect(run.result.is_error).toBe(true)
    expect(run.fed).toEqual({ error: expect.any(String) })
    expect(await admin(stack, `SELECT count(*)::int AS n FROM public.${table}`)).toEqual([{ n: 3 }])
  })
})

// ---------------------------------------------------------------------------------------------
// Failures and several calls

/** Until a tool's statement of this file's database sleeps in `pg_sleep(0.3)` (the tests below hold tools up with it). */
const toolSleeping = () =>
  eventually(async () =>
    (await admin(stack, `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'
      AND query LIKE '%pg_sleep(0.3%' AND pid <> pg_backend_pid()`)).length > 0 || undefined
  )

describe("the loop", () => {
  /**
   * What the conversation holds while a tool's statement runs (held up by pg_sleep): the message
   * that will carry the call, as stored at that moment.
   */
  const storedWhileRunning = async (name: string, input: Record<string, unknown>) => {
    const conversationId = await newConversation(stack, owner.token, name)
    turns.push(toolUse(`toolu_${fresh(name)}`, name, input), text("Done."))
    const reply = chat(stack, owner, conversationId, `Please ${name}`)
    await toolSleeping()
    const during = (await messagesInDatabase(stack, conversationId)).at(-1)!
    expect((await reply).status).toBe(200)
    const after = (await messagesInDatabase(stack, conversationId)).find((message) => message.id === during.id)!
    return { during, after }
  }

  it("the next prompt goes out while the step's result is still being stored; the client hears of it in order", async () => {
    const conversationId = await newConversation(stack, owner.token, "overlap")
    turns.push(toolUse(`toolu_${fresh("overlap")}`, "select_data", { sql: "SELECT pg_sleep(0.3) IS NOT NULL AS slept" }), text("After."))
    const from = stack.model.requests.length
    const reply = chat(stack, owner, conversationId, "Look")
    await toolSleeping()
    // Held until released: no message can be written, so the tool's result waits.
    const locked = Promise.withResolvers<void>()
    const release = Promise.withResolvers<void>()
    const holding = query(stack.db.adminUrl, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`LOCK TABLE sys.messages IN SHARE MODE`
        locked.resolve()
        yield* Effect.promise(() => release.promise)
      })))
    try {
      await locked.promise
      await eventually(async () => replyRequests(stack.model, from).length === 2 || undefined)
      expect((await messagesInDatabase(stack, conversationId)).at(-1)).toMatchObject({ status: "pending", content: { type: "text", text: "" } })
    } finally {
      release.resolve()
      await holding
    }
    const answered = await reply
    // The step's closing status before any token of the next reply (a run of tokens named once).
    const order = answered.events.map((event) => event.event === "status" ? `status:${String(event.data["text"]) === "" ? "end" : "start"}` : event.event)
    expect(order.filter((name, index) => name !== "token" || order[index - 1] !== "token")).toEqual(["status:start", "status:end", "token", "title", "done"])
    expect(tokensOf(answered)).toBe("After.")
    expect((await messagesInDatabase(stack, conversationId)).map((message) => [message.status, message.content["type"]])).toEqual([
      ["complete", "text"],
      ["complete", "tool_call"],
      ["complete", "text"]
    ])
  })

  it("a conversation deleted while a tool runs: the reply ends with an error event, not a hang", async () => {
    const conversationId = await newConversation(stack, owner.token, "deleted")
    turns.push(toolUse(`toolu_${fresh("deleted")}`, "select_data", { sql: "SELECT pg_sleep(0.3) IS NOT NULL AS slept" }), text("Never stored."))
    const reply = chat(stack, owner, conversationId, "Look")
    await toolSleeping()
    await admin(stack, "DELETE FROM sys.conversations WHERE id = $1", [conversationId])
    const answered = await reply
    expect(answered.status).toBe(200)
    expect(answered.events.at(-1)).toEqual({ event: "error", data: { error: "the reply failed" } })
    expect(tokensOf(answered)).toBe("")
    expect(await messagesInDatabase(stack, conversationId)).toEqual([])
  })

  it("a tool that changes the app is on record, pending, before it runs", async () => {
    const table = await itemsTable()
    const input = { table_name: table, values: { qty: 9 }, where: "name = 'a' AND pg_sleep(0.3) IS NOT NULL" }
    const { during, after } = await storedWhileRunning("propose_update_rows", input)
    expect(during.status).toBe("pending")
    expect(during.content).toEqual({ type: "tool_call", tool_calls: [{ id: expect.any(String), name: "propose_update_rows", args: input }] })
    expect(after).toMatchObject({ status: "complete", content: { tool_result: { result: expect.anything() } } })
  })

  it("a tool that only reads is stored once, with its result: while it runs, the reply's placeholder is pending", async () => {
    const { during, after } = await storedWhileRunning("select_data", { sql: "SELECT pg_sleep(0.3) IS NOT NULL AS slept" })
    expect(during).toMatchObject({ role: "assistant", status: "pending", content: { type: "text", text: "" } })
    expect(after).toMatchObject({
      status: "complete",
      content: { type: "tool_call", tool_calls: [{ name: "select_data" }], tool_result: { result: { rows: [{ slept: true }] } } }
    })
  })

  it("a failing tool is fed back with is_error: true, its message is error, and the model corrects itself", async () => {
    const missing = fresh("missing")
    const table = fresh("corrected")
    const conversationId = await newConversation(stack, owner.token)
    turns.push(
      toolUse("toolu_bad_drop", "propose_drop_table", { table_name: missing }),
      toolUse("toolu_good_create", "propose_create_table", { table_name: table, columns: [{ name: "name", type: "text" }] }, "Let me create it instead."),
      text("All good now.")
    )
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, conversationId, "drop it")
    expect(reply.status).toBe(200)
    expect(visibleNames(reply)).toEqual(["tool_call", "done", "tool_call", "done", "title", "done"])
    const [failed, succeeded, final] = doneEvents(reply) as [DoneData, DoneData, DoneData]
    expect(failed.streaming_continues).toBe(true)
    expect(failed.tool_result).toEqual({ error: expect.stringContaining(missing) })
    expect(failed.message).toMatchObject({ status: "error", content: { type: "tool_call", tool_calls: [{ id: "toolu_bad_drop" }] } })
    expect(succeeded.message.status).toBe("complete")
    expect(final.message).toMatchObject({ status: "complete", content: { type: "text", text: "All good now." } })

    const requests = replyRequests(stack.model, from)
    expect(requests.length).toBe(3)
    expect(lastToolResults(requests[1]!).map((result) => [result.tool_use_id, result.is_error])).toEqual([["toolu_bad_drop", true]])
    expect(JSON.parse(lastToolResults(requests[1]!)[0]!.content)).toEqual(failed.tool_result)
    expect(lastToolResults(requests[2]!).map((result) => [result.tool_use_id, result.is_error])).toEqual([["toolu_good_create", false]])
    // The failure stays in the history the model sees.
    expect(JSON.stringify(requests[2]!.body.messages)).toContain("toolu_bad_drop")

    expect((await messagesInDatabase(stack, conversationId)).map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      ["assistant", "error", "tool_call"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "text"]
    ])
    expect(await relationExists(stack, `public.${table}`)).toBe(true)
    expect(turns.left()).toBe(0)
  })

  it("several tool_uses in one answer: each runs, is stored as its own message, and each gets its tool_result", async () => {
    const table = fresh("multi")
    const slug = slugOf("multi")
    const conversationId = await newConversation(stack, owner.token)
    turns.push(
      {
        kind: "reply",
        blocks: [
          { type: "text", text: "Two things at once." },
          { type: "tool_use", id: "toolu_multi_table", name: "propose_create_table", input: { table_name: table, columns: [{ name: "name", type: "text" }] } },
          { type: "tool_use", id: "toolu_multi_page", name: "propose_create_page", input: { slug, title: "Multi", source: "x" } }
        ]
      },
      text("Both done.")
    )
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, conversationId, "table and page")
    expect(reply.status).toBe(200)
    expect(visibleNames(reply)).toEqual(["tool_call", "done", "tool_call", "done", "title", "done"])
    expect(eventsNamed(reply, "tool_call").map((event) => event.data["id"])).toEqual(["toolu_multi_table", "toolu_multi_page"])
    const requests = replyRequests(stack.model, from)
    expect(requests.length).toBe(2)
    const answered = requests[1]!.body.messages.flatMap((message) =>
      message.role === "user" ? blocksOf(message.content).filter((block) => block.type === "tool_result").map((block) => [block["tool_use_id"], block["is_error"]]) : []
    )
    expect(answered).toEqual([["toolu_multi_table", false], ["toolu_multi_page", false]])
    const stored = await messagesInDatabase(stack, conversationId)
    expect(stored.map((message) => [message.role, message.status, message.content["type"]])).toEqual([
      ["user", "complete", "text"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "tool_call"],
      ["assistant", "complete", "text"]
    ])
    expect(await relationExists(stack, `public.${table}`)).toBe(true)
    expect(await pageOf(slug)).toMatchObject({ title: "Multi" })
  })

  it("an unknown tool name fails as a tool error, fed back to the model", async () => {
    const run = await runTool("no_such_tool", { x: 1 })
    expect(run.reply.status).toBe(200)
    expect(doneEvents(run.reply)[0]!.message.status).toBe("error")
    expect(lastToolResults(run.requests[1]!)[0]).toMatchObject({ tool_use_id: run.toolUseId, is_error: true })
    expect(doneEvents(run.reply).at(-1)!.message.status).toBe("complete")
  })
})

// ---------------------------------------------------------------------------------------------
// X-App-Schema

describe("X-App-Schema", () => {
  it("propose_create_table with the header lands in the app's schema", async () => {
    const app = fresh("app")
    await sysCall(stack, owner, "sys.create_app($1, $2, $3)", [app, "Chat app", "for chat"])
    const table = fresh("in_app")
    const input = { table_name: table, columns: [{ name: "name", type: "text" }] }
    const run = await tool("propose_create_table", input, { headers: { "x-app-schema": app } })
    expect(run.toolResult).toEqual({ result: { schema: app, table, view: `${table}_v` } })
    expect(await relationExists(stack, `${app}.${table}`)).toBe(true)
    expect(await relationExists(stack, `public.${table}`)).toBe(false)
    expect(String(run.requests[0]!.body.system)).toContain(`App schema: ${app}`)
  })

  it("continue with the header runs in the app's schema too", async () => {
    const app = fresh("app_cont")
    await sysCall(stack, owner, "sys.create_app($1, $2, $3)", [app, "Continue app", ""])
    const table = fresh("app_table")
    await createTable(table, [{ name: "name", type: "text" }], app)
    const conversationId = await newConversation(stack, owner.token)
    await insertMessage(stack, conversationId, "user", { type: "text", text: "hi" }, "complete")
    await insertMessage(stack, conversationId, "assistant", {
      type: "tool_call",
      tool_calls: [{ id: "toolu_app_plan", name: "propose_plan", args: { steps: ["x"] } }],
      tool_result: { result: "Plan presented" }
    }, "complete")
    turns.push(text("In the app."))
    const from = stack.model.requests.length
    const reply = await continueTurn(stack.chat.url, owner, conversationId, { "x-app-schema": app })
    expect(reply.status).toBe(200)
    const system = String(replyRequests(stack.model, from)[0]!.body.system)
    expect(system).toContain(`App schema: ${app}`)
    expect(system).toContain(table)
  })
})
