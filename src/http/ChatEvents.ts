/**
 * The events of a chat reply, POST /conversations/:id/chat and /continue (spec §6.2), as Server-Sent
 * Events: each schema decodes an SSE frame's `{event, data}` (data as the JSON text on the wire)
 * into `{event, data}` with data parsed. The routes write their frames from these types,
 * /openapi.json documents them, and the client decodes with them.
 */
import { Schema } from "effect"

const JsonObject = Schema.Record(Schema.String, Schema.Unknown)

export const ToolCall = Schema.Struct({ id: Schema.String, name: Schema.String, args: JsonObject }).annotate({ identifier: "ToolCall" })

/** Spec §2.8's two shapes of a message's content. */
export const MessageContent = Schema.Union([
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }).annotate({ identifier: "TextContent" }),
  Schema.Struct({
    type: Schema.Literal("tool_call"),
    tool_calls: Schema.Array(ToolCall),
    text: Schema.optionalKey(Schema.String),
    /** `{result}` or `{error}`, once the tool has run. */
    tool_result: Schema.optionalKey(JsonObject)
  }).annotate({ identifier: "ToolCallContent" })
]).annotate({ identifier: "MessageContent" })

const event = <const Name extends string, Data extends Schema.Constraint>(name: Name, data: Data, description: string) =>
  Schema.Struct({ event: Schema.Literal(name), data: Schema.fromJsonString(data) }).annotate({ description })

export const ChatEvent = Schema.Union([
  event("token", Schema.Struct({ text: Schema.String }), "the next piece of the model's text"),
  event("tool_call", ToolCall, "the model called a tool; it runs at once, as the caller"),
  event(
    "status",
    Schema.Struct({ text: Schema.String }),
    "a transient note: while select_data runs (its rows are for the model only), or while a reply attached to runs on another instance"
  ),
  event("title", Schema.Struct({ title: Schema.String }), "the conversation's generated title (first message only, before done)"),
  event(
    "done",
    Schema.Struct({
      message: Schema.Struct({
        id: Schema.String,
        role: Schema.Literals(["user", "assistant"]),
        content: MessageContent,
        status: Schema.Literals(["pending", "pending_approval", "complete", "rejected", "error"])
      }),
      streaming_continues: Schema.optionalKey(Schema.Boolean),
      tool_result: Schema.optionalKey(JsonObject),
      /** The user stopped the reply (POST /conversations/:id/stop): `message` holds its text so far, and the reply ends here. */
      stopped: Schema.optionalKey(Schema.Boolean)
    }),
    "a message is stored; after a tool call streaming_continues is true, tool_result is the tool's, and the reply goes on; " +
      "stopped is true when the user stopped the reply, which ends with this message"
  ),
  event("error", Schema.Struct({ error: Schema.String }), "the reply ended with this reason; the message is stored with it")
]).annotate({ identifier: "ChatEvent" })
export type ChatEvent = typeof ChatEvent.Type

/** What the 200 of a chat stream says besides the events. */
export const CHAT_EVENTS_DESCRIPTION = "Server-Sent Events, one reply: `token`, `tool_call`, `status`, `title`, `done` and `error` " +
  "(each event's data as in ChatEvent); the stream ends after the last `done` (or a `done` with `stopped`) or an `error`."
