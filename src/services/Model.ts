/**
 * The AI model behind the chat service: Anthropic's streaming Messages API through the official
 * SDK (`ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_MODEL`). A reply is a stream of text
 * pieces and complete tool calls; without a key, every reply fails with a clear error instead
 * (src/layers/Integrations.ts chooses).
 */
import Anthropic from "@anthropic-ai/sdk"
import type { MessageParam, RawMessageStreamEvent, Tool } from "@anthropic-ai/sdk/resources/messages"
import { Context, Effect, Option, Redacted, Schema, Stream } from "effect"

export type { MessageParam, Tool }

export type ModelEvent =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "ToolUse"; readonly id: string; readonly name: string; readonly input: Readonly<Record<string, unknown>> }

export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", { message: Schema.String }) {}

export interface ReplyRequest {
  readonly system: string
  readonly messages: ReadonlyArray<MessageParam>
  readonly tools: ReadonlyArray<Tool>
}

const MAX_TOKENS = 4096
const TITLE_MAX_TOKENS = 30
const REQUEST_TIMEOUT_MS = 120_000

export class Model extends Context.Service<Model, {
  readonly reply: (request: ReplyRequest) => Stream.Stream<ModelEvent, ModelError>
  /** A short title for a conversation that starts with `text`; never fails (falls back to the text). */
  readonly title: (text: string) => Effect.Effect<string>
}>()("plinth/Model") {
  /** Without ANTHROPIC_API_KEY: every reply fails with an error saying so. */
  static readonly unconfigured = Model.of({
    reply: () => Stream.fail(new ModelError({ message: "no AI model is configured: set ANTHROPIC_API_KEY" })),
    title: (text) => Effect.succeed(fallbackTitle(text))
  })

  /** Anthropic's streaming Messages API through the SDK. */
  static readonly anthropic = (settings: AnthropicSettings) => {
    const client = new Anthropic({
      apiKey: Redacted.value(settings.apiKey),
      ...(Option.isSome(settings.baseUrl) ? { baseURL: settings.baseUrl.value.toString().replace(/\/$/, "") } : {}),
      timeout: REQUEST_TIMEOUT_MS
    })
    const model = settings.model

    // Defined once, not as a generator written inline per call (docs/performance-notes.md says why).
    const openReply = Effect.fnUntraced(function*(request: ReplyRequest) {
      const controller = new AbortController()
      let ended = false
      // A request still open when its stream is let go (interrupted, failed on the way, or no
      // longer read) is cut. One that ended has nothing to cut, and aborting it anyway would build
      // a DOMException, stack and all, per model call.
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (!ended) controller.abort()
        })
      )
      const events = yield* Effect.tryPromise({
        try: () =>
          client.messages.create({
            model,
            max_tokens: MAX_TOKENS,
            system: request.system,
            messages: [...request.messages],
            tools: [...request.tools],
            stream: true
          }, { signal: controller.signal }),
        catch: asModelError
      })
      return Stream.fromAsyncIterable(events as AsyncIterable<RawMessageStreamEvent>, asModelError).pipe(
        Stream.onEnd(Effect.sync(() => (ended = true))),
        Stream.mapAccum(() => new Map<number, { id: string; name: string; json: string }>(), toModelEvents)
      )
    })

    return Model.of({
      reply: (request) => Stream.unwrap(openReply(request)),
      title: (text) =>
        Effect.tryPromise({
          try: () =>
            client.messages.create({
              model,
              max_tokens: TITLE_MAX_TOKENS,
              messages: [{
                role: "user",
                content: `Write a title of at most six words for a conversation that starts with the message below. Answer with the title only.\n\n${text.slice(0, 2000)}`
              }]
            }),
          catch: asModelError
        }).pipe(
          Effect.map((message) => {
            const title = message.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("").trim().replace(/^["']|["']$/g, "")
            return title === "" ? fallbackTitle(text) : title.slice(0, 200)
          }),
          Effect.orElseSucceed(() => fallbackTitle(text))
        )
    })
  }
}

export interface AnthropicSettings {
  readonly apiKey: Redacted.Redacted<string>
  readonly baseUrl: Option.Option<URL>
  readonly model: string
}

const fallbackTitle = (text: string) => {
  const line = text.trim().split("\n")[0] ?? ""
  return line.length > 60 ? `${line.slice(0, 57)}...` : line || "New conversation"
}

/** The SDK's failure, as one line without the request (it never carries the key). */
const asModelError = (cause: unknown): ModelError => {
  if (cause instanceof Anthropic.APIError) {
    return new ModelError({ message: `the AI model failed (${cause.status ?? "stream"}): ${cause.message}`.slice(0, 500) })
  }
  return new ModelError({ message: `the AI model could not be reached: ${cause instanceof Error ? cause.message : String(cause)}`.slice(0, 500) })
}

/** Stream events → text pieces and whole tool calls (their JSON arrives in pieces, per block). */
const toModelEvents = (
  blocks: Map<number, { id: string; name: string; json: string }>,
  event: RawMessageStreamEvent
): readonly [Map<number, { id: string; name: string; json: string }>, ReadonlyArray<ModelEvent>] => {
  switch (event.type) {
    case "content_block_start":
      if (event.content_block.type === "tool_use") {
        blocks.set(event.index, { id: event.content_block.id, name: event.content_block.name, json: "" })
      }
      return [blocks, []]
    case "content_block_delta":
      if (event.delta.type === "text_delta") return [blocks, [{ _tag: "Text", text: event.delta.text }]]
      if (event.delta.type === "input_json_delta") {
        const block = blocks.get(event.index)
        if (block !== undefined) block.json += event.delta.partial_json
      }
      return [blocks, []]
    case "content_block_stop": {
      const block = blocks.get(event.index)
      if (block === undefined) return [blocks, []]
      blocks.delete(event.index)
      let input: Record<string, unknown> = {}
      try {
        const parsed: unknown = block.json === "" ? {} : JSON.parse(block.json)
        if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) input = parsed as Record<string, unknown>
      } catch {
        input = { invalid_json: block.json }
      }
      return [blocks, [{ _tag: "ToolUse", id: block.id, name: block.name, input }]]
    }
    default:
      return [blocks, []]
  }
}
