/**
 * One form for every timestamp Plinth answers with (issue #22): ISO 8601 in UTC with `Z`, as /sql
 * gives a timestamptz column, from the chat service's endpoints, /sql, the JSON of the sys
 * functions, the chat's stored tool results and the history a reply starts from; and the SQL
 * helper that builds it (sys.iso_utc) writes each value exactly as /sql does, whatever the
 * session's time zone.
 */
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { post, type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, startChatStack } from "../support/chat.ts"
import { query } from "../support/database.ts"
import { get } from "../support/http.ts"
import { admin, chat, fresh, getConversation, names, scriptedTurns, sqlAs, sysCall, text, toolUse, type Turns } from "./helpers.ts"

const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/

let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack()
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "timestamps@plinth.test", "owner")
})
afterAll(() => stack?.close())

type Row = Record<string, unknown>
const rowsOf = async (statement: string, params: ReadonlyArray<unknown> = []) => {
  const response = await sqlAs(stack, owner, statement, params)
  if (response.status !== 200) throw new Error(`${statement}: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body.rows
}
const times = (value: unknown, keys: ReadonlyArray<string> = ["created_at", "updated_at"]) =>
  keys.map((key) => (value as Row)[key])

/** A conversation with a reply that created a page (its tool result holds the page's timestamps). */
const conversationWithPage = async () => {
  const id = await newConversation(stack, owner.token)
  const slug = fresh("page").replaceAll("_", "-")
  turns.push(toolUse("toolu_page", "propose_create_page", { slug, title: "Page", source: "# Page" }), text("Made it."))
  expect(names(await chat(stack, owner, id, "make a page")).at(-1)).toBe("done")
  return id
}

const cases: ReadonlyArray<readonly [string, () => Promise<ReadonlyArray<unknown>>]> = [
  ["chat: POST /conversations", async () => {
    const response = await post(stack.chat.url, "/conversations", { title: "T" }, { token: owner.token })
    expect(response.status).toBe(201)
    return times(response.body)
  }],
  ["chat: GET /conversations", async () => {
    await newConversation(stack, owner.token)
    const response = await get<Array<Row>>(stack.chat.url, "/conversations", owner.token)
    return response.body.flatMap((conversation) => times(conversation))
  }],
  ["chat: GET /conversations/:id and its messages", async () => {
    const conversation = await getConversation(stack, owner, await conversationWithPage())
    expect(conversation.messages.length).toBe(3)
    return [...times(conversation), ...conversation.messages.map((message) => message.created_at)]
  }],
  ["chat: a stored tool result (propose_create_page's page)", async () => {
    const conversation = await getConversation(stack, owner, await conversationWithPage())
    const toolCall = conversation.messages.find((message) => message.content["type"] === "tool_call")!
    return times((toolCall.content["tool_result"] as Row)["result"])
  }],
  ["chat: the history a reply starts from (sys.begin_turn)", async () => {
    const id = await conversationWithPage()
    const [row] = await admin<{ turn: { messages: Array<Row> } }>(stack, "SELECT sys.begin_turn($1, $2, $3::jsonb) AS turn", [
      owner.user.id,
      id,
      JSON.stringify({ type: "text", text: "again" })
    ])
    return row!.turn.messages.map((message) => message["created_at"])
  }],
  ["/sql: a timestamptz column", async () => (await rowsOf("SELECT now() AS at, now() - interval '1 day' AS before")).flatMap((row) => times(row, ["at", "before"]))],
  ["/sql: the chat views public.conversations and public.messages", async () => [
    ...(await rowsOf("SELECT created_at, updated_at FROM public.conversations")).flatMap((row) => times(row)),
    ...(await rowsOf("SELECT created_at, updated_at FROM public.messages")).flatMap((row) => times(row))
  ]],
  ["sys.create_app, update_app, rename_app, list_apps, drop_app", async () => {
    const name = fresh("app")
    const created = await sysCall(stack, owner, "sys.create_app($1, $2, $3)", [name, "App", ""])
    const updated = await sysCall(stack, owner, "sys.update_app($1, $2, $3)", [name, "App 2", "about"])
    const renamed = await sysCall(stack, owner, "sys.rename_app($1, $2)", [name, `${name}_2`])
    const listed = await rowsOf("SELECT created_at, updated_at FROM sys.list_apps()")
    const dropped = await sysCall(stack, owner, "sys.drop_app($1)", [`${name}_2`])
    return [created, updated, renamed, ...listed, dropped].flatMap((value) => times(value))
  }],
  ["sys.create_page, update_page, sys.pages_v", async () => {
    const slug = fresh("p").replaceAll("_", "-")
    const created = await sysCall(stack, owner, "sys.create_page($1, $2, $3)", [slug, "P", "# P"])
    const updated = await sysCall(stack, owner, "sys.update_page($1, $2, $3)", [slug, "P 2", null])
    const viewed = await rowsOf("SELECT created_at, updated_at FROM sys.pages_v WHERE slug = $1", [slug])
    return [created, updated, ...viewed].flatMap((value) => times(value))
  }]
]

describe("every timestamp is ISO 8601 in UTC with Z", () => {
  it.each(cases)("%s", async (_, read) => {
    const values = await read()
    expect(values.length).toBeGreaterThan(0)
    for (const value of values) expect(value).toMatch(ISO_UTC)
  })
})

describe("sys.iso_utc", () => {
  const VALUES = [
    "2026-11-25 02:53:21.471099+00",
    "2026-11-25 02:53:21+00",
    "2026-11-25 08:23:21.5+05:30",
    "1999-12-31 23:59:59.999999-08",
    "1970-01-01 00:00:00+00",
    "2000-01-01 00:00:00.000001+00",
    "0099-06-01 12:00:00.12+00",
    "infinity",
    "-infinity"
  ]
  const literal = `ARRAY[${VALUES.map((value) => `'${value}'`).join(", ")}]::timestamptz[]`

  it("writes each value exactly as /sql gives the column, in any session time zone", async () => {
    const viaSql = (await rowsOf(`SELECT v FROM unnest(${literal}) WITH ORDINALITY AS t(v, n) ORDER BY n`)).map((row) => row["v"])
    for (const zone of ["UTC", "Asia/Kathmandu", "America/St_Johns"]) {
      const helper = await query(stack.db.adminUrl, (sql) =>
        sql.withTransaction(Effect.andThen(
          sql.unsafe(`SET LOCAL TimeZone = '${zone}'`),
          sql.unsafe<{ v: string }>(`SELECT sys.iso_utc(v) AS v FROM unnest(${literal}) WITH ORDINALITY AS t(v, n) ORDER BY n`)
        )))
      expect(helper.map((row) => row.v), zone).toEqual(viaSql)
    }
    expect(viaSql.slice(0, 3)).toEqual(["2026-11-25T02:53:21.471099Z", "2026-11-25T02:53:21Z", "2026-11-25T02:53:21.5Z"])
  })
})
