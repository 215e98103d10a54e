/**
 * The local Messages API stand-in against the real `@anthropic-ai/sdk`: streamed and whole replies,
 * the MessageStream helper, HTTP and mid-stream errors, recorded requests, and per-request answers.
 */
import Anthropic from "@anthropic-ai/sdk"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { type FakeAnthropic, startFakeAnthropic } from "../support/FakeAnthropic.ts"

const MODEL = "claude-sonnet-4-6"
const WEATHER_TOOL = {
  name: "get_weather",
  description: "The current weather of a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] }
}
const USER_ONLY: Array<Anthropic.MessageParam> = [{ role: "user", content: "Hello" }]

let fake: FakeAnthropic
let client: Anthropic
beforeAll(async () => {
  fake = await startFakeAnthropic()
  client = new Anthropic({ apiKey: "test", baseURL: fake.url, maxRetries: 0 })
})
afterAll(async () => {
  await fake?.close()
})
beforeEach(() => {
  fake.requests.length = 0
  fake.respondWith(undefined)
})

/** Catches what `run` rejects with (fails the test when it resolves). */
const rejection = async (run: () => Promise<unknown>): Promise<unknown> => {
  try {
    await run()
  } catch (error) {
    return error
  }
  throw new Error("expected a rejection")
}

describe("FakeAnthropic", () => {
  it("streams text and tool_use blocks through create({ stream: true })", async () => {
    const text = "Let me look up the weather in Zürich for you 🌦️."
    fake.script({
      kind: "reply",
      blocks: [{ type: "text", text }, { type: "tool_use", name: "get_weather", input: { city: "Zürich", days: [1, 2] } }]
    })
    const stream = await client.messages.create({ model: MODEL, max_tokens: 1024, messages: USER_ONLY, stream: true })
    const types: Array<string> = []
    let streamedText = ""
    let json = ""
    let textDeltas = 0
    let stopReason: string | null = null
    let model = ""
    let toolBlock: Anthropic.ToolUseBlock | undefined
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "message_start") {
        model = event.message.model
        expect(event.message).toMatchObject({ type: "message", role: "assistant", content: [], stop_reason: null })
        expect(event.message.id).toMatch(/^msg_/)
        expect(event.message.usage.input_tokens).toBeGreaterThan(0)
      }
      if (event.type === "content_block_start" && event.content_block.type === "tool_use") {
        toolBlock = event.content_block
        expect(event.index).toBe(1)
      }
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") {
        streamedText += event.delta.text
        textDeltas += 1
      }
      if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") json += event.delta.partial_json
      if (event.type === "message_delta") {
        stopReason = event.delta.stop_reason
        expect(event.usage.output_tokens).toBeGreaterThan(0)
      }
    }
    expect(model).toBe(MODEL)
    expect(streamedText).toBe(text)
    expect(textDeltas).toBeGreaterThan(1)
    expect(JSON.parse(json)).toEqual({ city: "Zürich", days: [1, 2] })
    expect(toolBlock).toMatchObject({ type: "tool_use", name: "get_weather", input: {} })
    expect(toolBlock?.id).toMatch(/^toolu_/)
    expect(stopReason).toBe("tool_use")
    expect(types[0]).toBe("message_start")
    expect(types.at(-2)).toBe("message_delta")
    expect(types.at(-1)).toBe("message_stop")
    expect(types.filter((type) => type === "content_block_start")).toHaveLength(2)
    expect(types.filter((type) => type === "content_block_stop")).toHaveLength(2)
    expect(fake.requests[0]?.body.stream).toBe(true)
  })

  it("accumulates the final message through the messages.stream() helper", async () => {
    fake.script(
      {
        kind: "reply",
        blocks: [
          { type: "text", text: "Checking both." },
          { type: "tool_use", id: "toolu_fixed_1", name: "get_weather", input: { city: "Bern" } },
          { type: "tool_use", name: "get_weather", input: { city: "Basel" } }
        ]
      },
      { kind: "reply", blocks: [{ type: "text", text: "Truncated answ" }], stopReason: "max_tokens" }
    )
    const stream = client.messages.stream({ model: MODEL, max_tokens: 1024, messages: USER_ONLY, tools: [WEATHER_TOOL] })
    const texts: Array<string> = []
    stream.on("text", (delta) => texts.push(delta))
    const message = await stream.finalMessage()
    expect(texts.join("")).toBe("Checking both.")
    expect(message).toMatchObject({
      role: "assistant",
      model: MODEL,
      stop_reason: "tool_use",
      stop_sequence: null,
      content: [
        { type: "text", text: "Checking both." },
        { type: "tool_use", id: "toolu_fixed_1", name: "get_weather", input: { city: "Bern" } },
        { type: "tool_use", name: "get_weather", input: { city: "Basel" } }
      ]
    })
    const [, first, second] = message.content
    expect(first?.type === "tool_use" && second?.type === "tool_use" && first.id !== second.id).toBe(true)
    expect(second?.type === "tool_use" && second.id).toMatch(/^toolu_/)
    // The parsed inputs are plain enumerable data, as a follow-up request would send them back.
    expect(JSON.parse(JSON.stringify(message.content[1]))).toMatchObject({ input: { city: "Bern" } })

    const truncated = await client.messages.stream({ model: MODEL, max_tokens: 5, messages: USER_ONLY }).finalMessage()
    expect(truncated.stop_reason).toBe("max_tokens")
    expect(truncated.content).toMatchObject([{ type: "text", text: "Truncated answ" }])
  })

  it("answers a non-streaming create with the whole message", async () => {
    fake.script({ kind: "reply", blocks: [{ type: "text", text: "A short title" }] })
    const message = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    expect(message).toMatchObject({
      type: "message",
      role: "assistant",
      model: MODEL,
      content: [{ type: "text", text: "A short title" }],
      stop_reason: "end_turn",
      stop_sequence: null
    })
    expect(message.id).toMatch(/^msg_/)
    expect(message.usage.output_tokens).toBeGreaterThan(0)
    expect(message._request_id).toMatch(/^req_/)
    expect(fake.requests[0]?.body.stream).toBeUndefined()

    fake.script({ kind: "reply", blocks: [{ type: "tool_use", name: "get_weather", input: { city: "Chur" } }] })
    const toolMessage = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY, tools: [WEATHER_TOOL] })
    expect(toolMessage.stop_reason).toBe("tool_use")
    expect(toolMessage.content).toMatchObject([{ type: "tool_use", name: "get_weather", input: { city: "Chur" } }])
  })

  it("answers with an empty queue with a plain 'ok'", async () => {
    const message = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    expect(message.content).toMatchObject([{ type: "text", text: "ok" }])
  })

  it("fails requests with scripted HTTP errors as the SDK's typed APIErrors", async () => {
    fake.script({ kind: "http_error", status: 500 }, { kind: "http_error", status: 529 })
    const serverError = await rejection(() =>
      client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY, stream: true })
    )
    expect(serverError).toBeInstanceOf(Anthropic.APIError)
    expect(serverError).toBeInstanceOf(Anthropic.InternalServerError)
    expect(serverError).toMatchObject({ status: 500, type: "api_error", apiMessage: "Internal server error" })

    const overloaded = await rejection(() => client.messages.stream({ model: MODEL, max_tokens: 32, messages: USER_ONLY }).finalMessage())
    expect(overloaded).toBeInstanceOf(Anthropic.APIError)
    expect(overloaded).toMatchObject({ status: 529, type: "overloaded_error", apiMessage: "Overloaded" })

    fake.script({ kind: "http_error", status: 429, message: "slow down" })
    const limited = await rejection(() => client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY }))
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError)
    expect(limited).toMatchObject({ status: 429, type: "rate_limit_error", apiMessage: "slow down" })
  })

  it("lets the SDK's default retries consume one scripted turn per attempt", async () => {
    const retrying = new Anthropic({ apiKey: "test", baseURL: fake.url, maxRetries: 1 })
    fake.script({ kind: "http_error", status: 529 }, { kind: "reply", blocks: [{ type: "text", text: "second try" }] })
    const message = await retrying.messages.stream({ model: MODEL, max_tokens: 32, messages: USER_ONLY }).finalMessage()
    expect(message.content).toMatchObject([{ type: "text", text: "second try" }])
    expect(fake.requests).toHaveLength(2)
    expect(fake.requests[1]?.headers["x-stainless-retry-count"]).toBe("1")
  })

  it("rejects a request without credentials with 401 authentication_error", async () => {
    const anonymous = new Anthropic({ apiKey: "test", baseURL: fake.url, maxRetries: 0, defaultHeaders: { Authorization: null } })
    const error = await rejection(() => anonymous.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY }))
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError)
    expect(error).toMatchObject({ status: 401, type: "authentication_error", apiMessage: "invalid x-api-key" })
    expect(fake.requests[0]?.headers["authorization"]).toBeUndefined()
    expect(fake.requests[0]?.headers["x-api-key"]).toBeUndefined()

    // The older `x-api-key` header is accepted as well.
    const keyed = new Anthropic({
      apiKey: "test",
      baseURL: fake.url,
      maxRetries: 0,
      defaultHeaders: { Authorization: null, "x-api-key": "sk-ant-test" }
    })
    const message = await keyed.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    expect(message.content).toMatchObject([{ type: "text", text: "ok" }])
    expect(fake.requests[1]?.headers["x-api-key"]).toBe("sk-ant-test")
  })

  it("throws mid-stream after yielding the partial text", async () => {
    fake.script({ kind: "stream_error", afterText: "Half an ans" })
    const stream = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY, stream: true })
    let text = ""
    const error = await rejection(async () => {
      for await (const event of stream) {
        if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
      }
    })
    expect(text).toBe("Half an ans")
    expect(error).toBeInstanceOf(Anthropic.APIError)
    // A mid-stream error has no HTTP status: only the body's type tells what happened.
    expect(error).toMatchObject({ status: undefined, type: "overloaded_error", apiMessage: "Overloaded" })

    fake.script({ kind: "stream_error", afterText: "Some", errorType: "api_error", message: "Internal server error" })
    const helper = client.messages.stream({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    const texts: Array<string> = []
    helper.on("text", (delta) => texts.push(delta))
    const helperError = await rejection(() => helper.finalMessage())
    expect(texts.join("")).toBe("Some")
    expect(helperError).toMatchObject({ type: "api_error", apiMessage: "Internal server error" })
  })

  it("records the system prompt, messages with tool results, tools and headers", async () => {
    const messages: Array<Anthropic.MessageParam> = [
      { role: "user", content: "Weather in Bern?" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Looking it up." },
          { type: "tool_use", id: "toolu_abc", name: "get_weather", input: { city: "Bern" } }
        ]
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_abc", content: "Sunny, 21°C" }] }
    ]
    await client.messages.stream({
      model: MODEL,
      max_tokens: 256,
      system: "You are Plinth's assistant.",
      messages,
      tools: [WEATHER_TOOL]
    }).finalMessage()
    const [recorded] = fake.requests
    expect(recorded?.body).toMatchObject({
      model: MODEL,
      max_tokens: 256,
      stream: true,
      system: "You are Plinth's assistant.",
      messages,
      tools: [WEATHER_TOOL]
    })
    expect(recorded?.headers["authorization"]).toBe("Bearer test")
    expect(recorded?.headers["anthropic-version"]).toBeTruthy()
    expect(recorded?.headers["content-type"]).toBe("application/json")
  })

  it("rejects tool_use / tool_result mismatches like the real API, without consuming a turn", async () => {
    fake.script({ kind: "reply", blocks: [{ type: "text", text: "kept" }] })
    const unanswered = await rejection(() =>
      client.messages.create({
        model: MODEL,
        max_tokens: 32,
        messages: [
          { role: "user", content: "Weather?" },
          { role: "assistant", content: [{ type: "tool_use", id: "toolu_a", name: "get_weather", input: {} }] },
          { role: "user", content: "never mind" }
        ]
      })
    )
    expect(unanswered).toBeInstanceOf(Anthropic.BadRequestError)
    expect(unanswered).toMatchObject({ status: 400, type: "invalid_request_error" })
    expect((unanswered as InstanceType<typeof Anthropic.APIError>).apiMessage).toContain("toolu_a")

    const stray = await rejection(() =>
      client.messages.create({
        model: MODEL,
        max_tokens: 32,
        messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_b", content: "x" }] }]
      })
    )
    expect(stray).toMatchObject({ status: 400, type: "invalid_request_error" })

    const empty = await rejection(() =>
      client.messages.create({ model: MODEL, max_tokens: 32, messages: [{ role: "user", content: [{ type: "text", text: "" }] }] })
    )
    expect(empty).toMatchObject({ status: 400, type: "invalid_request_error" })

    expect(fake.requests).toHaveLength(3)
    const message = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    expect(message.content).toMatchObject([{ type: "text", text: "kept" }])
  })

  it("lets respondWith decide the turn from the request, before the queue", async () => {
    fake.script({ kind: "reply", blocks: [{ type: "text", text: "from the queue" }] })
    fake.respondWith((request) =>
      request.body.stream === true ? undefined : { kind: "reply", blocks: [{ type: "text", text: `title for ${request.body.messages.length}` }] }
    )
    const title = await client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY })
    expect(title.content).toMatchObject([{ type: "text", text: "title for 1" }])
    const streamed = await client.messages.stream({ model: MODEL, max_tokens: 32, messages: USER_ONLY }).finalText()
    expect(streamed).toBe("from the queue")
  })

  it("hangs until the client times out or aborts", async () => {
    fake.script({ kind: "hang" }, { kind: "hang" })
    const timedOut = await rejection(() =>
      client.messages.create({ model: MODEL, max_tokens: 32, messages: USER_ONLY, stream: true }, { timeout: 200 })
    )
    expect(timedOut).toBeInstanceOf(Anthropic.APIConnectionTimeoutError)

    const controller = new AbortController()
    const pending = client.messages.stream({ model: MODEL, max_tokens: 32, messages: USER_ONLY }, { signal: controller.signal })
    setTimeout(() => controller.abort(), 50)
    const aborted = await rejection(() => pending.finalMessage())
    expect(aborted).toBeInstanceOf(Anthropic.APIUserAbortError)
    expect(fake.requests).toHaveLength(2)
  })
})
