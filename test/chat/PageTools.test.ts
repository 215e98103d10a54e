/**
 * The page format in the chat (issue #26): a page tool given a source that breaks the format
 * (propose_create_page, propose_update_page, preview_page) feeds the model an error naming the
 * block, saves nothing, and the model's corrected call succeeds; the system prompt the model gets
 * explains the format with an example that parses without problems and whose queries run.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type SignIn, signedIn } from "../support/auth.ts"
import { type ChatStack, newConversation, startChatStack } from "../support/chat.ts"
import { BUILDER_GUIDE, PAGE_EXAMPLE } from "../../src/services/BuilderGuide.ts"
import { parsePage } from "../../src/services/PageFormat.ts"
import { admin, chat, doneEvents, fresh, lastToolResults, replyRequests, scriptedTurns, sqlAs, sysCall, text, toolUse, type Turns } from "./helpers.ts"

let stack: ChatStack
let owner: SignIn
let turns: Turns

beforeAll(async () => {
  stack = await startChatStack()
  turns = scriptedTurns(stack.model)
  owner = await signedIn(stack, "pages-owner@plinth.test", "owner")
})
afterAll(() => stack?.close())
afterEach(() => turns.reset())

const slugOf = (label: string) => fresh(label).replaceAll("_", "-")

const BROKEN = ["# Broken", "", "```sql totals", "SELECT 1 AS n", "```", "", "```chart query=totals type=donut x=n y=n", "```"].join("\n")
const BROKEN_MESSAGE = 'chart block 2 (line 7, query=totals): type "donut" is not a chart type; use bar, line, area, pie.'
const FIXED = BROKEN.replace("type=donut", "type=bar")

const pageOf = async (slug: string) =>
  (await admin<{ source: string }>(stack, "SELECT source FROM sys.pages WHERE slug = $1", [slug]))[0]

/**
 * One reply: the model calls `name` with `broken`, gets the tool's error, calls it again with
 * `fixed`, then answers. What the model was fed for each call.
 */
const correctedCall = async (name: string, broken: Record<string, unknown>, fixed: Record<string, unknown>) => {
  const conversationId = await newConversation(stack, owner.token, name)
  turns.push(toolUse(`toolu_${fresh("broken")}`, name, broken), toolUse(`toolu_${fresh("fixed")}`, name, fixed), text("Done."))
  const from = stack.model.requests.length
  const reply = await chat(stack, owner, conversationId, `Please ${name}`)
  expect(reply.status).toBe(200)
  expect(turns.left()).toBe(0)
  const requests = replyRequests(stack.model, from)
  expect(requests.length).toBe(3)
  const [first] = lastToolResults(requests[1]!)
  const [second] = lastToolResults(requests[2]!)
  expect(doneEvents(reply).map((done) => done.message.status)).toEqual(["error", "complete", "complete"])
  return { first: first!, second: second! }
}

describe("a page tool given a source that breaks the format", () => {
  it("propose_create_page: the tool_result is an error naming the block, nothing is saved, the corrected call saves the page", async () => {
    const slug = slugOf("created")
    const { first, second } = await correctedCall("propose_create_page", { slug, title: "T", source: BROKEN }, { slug, title: "T", source: FIXED })
    expect(first.is_error).toBe(true)
    expect(JSON.parse(first.content)).toEqual({ error: expect.stringContaining(BROKEN_MESSAGE) })
    expect(second.is_error).toBe(false)
    expect(await pageOf(slug)).toEqual({ source: FIXED })
  })

  it("propose_update_page: the page keeps its source until the corrected call", async () => {
    const slug = slugOf("updated")
    await sysCall(stack, owner, "sys.create_page($1, $2, $3)", [slug, "T", "# Before"])
    const { first, second } = await correctedCall("propose_update_page", { slug, source: BROKEN }, { slug, source: FIXED })
    expect(first.is_error).toBe(true)
    expect(JSON.parse(first.content)).toEqual({ error: expect.stringContaining(BROKEN_MESSAGE) })
    expect(second.is_error).toBe(false)
    expect(await pageOf(slug)).toEqual({ source: FIXED })
  })

  it("preview_page: a query that is not one SELECT is named too", async () => {
    const broken = "Intro\n\n```sql wipe\nDELETE FROM sys_pages_nothing\n```\n"
    const { first, second } = await correctedCall("preview_page", { source: broken }, { source: FIXED })
    expect(first.is_error).toBe(true)
    expect(JSON.parse(first.content)).toEqual({
      error: expect.stringContaining("sql block 1 (line 3, wipe): a page query must be one SELECT, not a DELETE.")
    })
    expect(JSON.parse(second.content)).toEqual({ result: "Preview rendered" })
  })
})

describe("the system prompt", () => {
  it("explains the page format with an example that parses without problems", () => {
    expect(parsePage(PAGE_EXAMPLE).problems).toEqual([])
    const kinds = parsePage(PAGE_EXAMPLE).blocks.map((block) => block.kind)
    for (const kind of ["query", "value", "chart", "table"]) expect(kinds).toContain(kind)
  })

  it("reaches the model with the column spec, the display types and the example, which saves and whose queries run", async () => {
    // The tables the example is written for.
    const customers = "customers"
    await sysCall(stack, owner, "sys.create_table($1, $2::jsonb)", [customers, JSON.stringify([{ name: "name", type: "text" }])])
    await sysCall(stack, owner, "sys.create_table($1, $2::jsonb)", ["orders", JSON.stringify([
      { name: "status", type: "choice", options: [{ value: "open" }, { value: "paid" }] },
      { name: "total", type: "currency" },
      { name: "customer", type: "reference", references: customers }
    ])])
    const slug = slugOf("example")
    const conversationId = await newConversation(stack, owner.token, "example")
    turns.push(toolUse(`toolu_${fresh("example")}`, "propose_create_page", { slug, title: "Sales", source: PAGE_EXAMPLE }), text("Made it."))
    const from = stack.model.requests.length
    const reply = await chat(stack, owner, conversationId, "Make me a dashboard")
    expect(reply.status).toBe(200)
    const requests = replyRequests(stack.model, from)
    const system = String(requests[0]!.body.system)
    expect(system).toContain(BUILDER_GUIDE)
    expect(system).toContain(PAGE_EXAMPLE)
    expect(system).toContain("display_type")
    expect(lastToolResults(requests[1]!)[0]!.is_error).toBe(false)
    expect(await pageOf(slug)).toEqual({ source: PAGE_EXAMPLE })
    for (const block of parsePage(PAGE_EXAMPLE).blocks) {
      if (block.kind !== "query") continue
      const ran = await sqlAs(stack, owner, block.sql, block.params.map(() => null))
      expect(ran.status, block.name).toBe(200)
    }
  })
})
