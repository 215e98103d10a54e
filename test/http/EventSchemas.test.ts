/**
 * The two event streams as /openapi.json documents them: each stream's 200 is `text/event-stream`
 * with its events' schema (PageEvents.ts, ChatEvents.ts: the types the routes write their frames
 * from, and what plinth/client decodes with), each event's data described, and nothing of Effect's
 * own stream protocol (`x-effect-stream`), which Plinth does not speak.
 */
import { Schema } from "effect"
import { OpenApi } from "effect/http-api"
import { describe, expect, it } from "vitest"
import { ChatApi } from "../../src/http/ChatApi.ts"
import { ChatEvent } from "../../src/http/ChatEvents.ts"
import { MainApi } from "../../src/http/MainApi.ts"
import { PageEvent } from "../../src/http/PageEvents.ts"

const main = OpenApi.fromApi(MainApi) as unknown as Record<string, any>
const chat = OpenApi.fromApi(ChatApi) as unknown as Record<string, any>

const streamOf = (document: Record<string, any>, path: string, method: string) => document["paths"][path][method]["responses"]["200"]
const eventNames = (document: Record<string, any>, component: string): Array<string> =>
  document["components"]["schemas"][component]["anyOf"].map((member: Record<string, any>) => member["properties"]["event"]["enum"][0])

describe("/openapi.json's event streams", () => {
  it("GET /events: the PageEvent schema, page_change and resync, and the comment lines", () => {
    const ok = streamOf(main, "/events", "get")
    expect(ok.content).toEqual({ "text/event-stream": { schema: { $ref: "#/components/schemas/PageEvent" } } })
    expect(ok.description).toContain(": connected")
    expect(ok.description).toContain(": heartbeat")
    expect(eventNames(main, "PageEvent")).toEqual(["page_change", "resync"])
    expect(main["components"]["schemas"]["PageChange"]).toMatchObject({ required: ["schema", "slug"] })
  })

  it("chat and continue: the ChatEvent schema, each event with its data", () => {
    for (const path of ["/conversations/{id}/chat", "/conversations/{id}/continue"]) {
      expect(streamOf(chat, path, "post").content).toEqual({ "text/event-stream": { schema: { $ref: "#/components/schemas/ChatEvent" } } })
    }
    expect(eventNames(chat, "ChatEvent")).toEqual(["token", "tool_call", "status", "title", "done", "error"])
    expect(JSON.stringify(chat)).not.toContain("x-effect-stream")
    expect(JSON.stringify(main)).not.toContain("x-effect-stream")
  })
})

describe("the event schemas", () => {
  it("decode a frame's {event, data} as the server writes it, and refuse one that does not match", () => {
    const page = Schema.decodeUnknownSync(PageEvent)
    expect(page({ event: "page_change", data: JSON.stringify({ schema: "public", slug: "home" }) })).toEqual({ event: "page_change", data: { schema: "public", slug: "home" } })
    expect(page({ event: "resync", data: "{}" })).toEqual({ event: "resync", data: {} })
    expect(() => page({ event: "page_change", data: JSON.stringify({ slug: "home" }) })).toThrow()
    const reply = Schema.decodeUnknownSync(ChatEvent)
    expect(reply({ event: "token", data: JSON.stringify({ text: "Hi" }) })).toEqual({ event: "token", data: { text: "Hi" } })
    expect(() => reply({ event: "token", data: JSON.stringify({ title: "Hi" }) })).toThrow()
    expect(() => reply({ event: "unknown", data: "{}" })).toThrow()
  })
})
