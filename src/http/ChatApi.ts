/** The chat service's HTTP API (spec §4.8); `/openapi.json` documents it. */
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "effect/http-api"
import { Authentication, ValidationErrors } from "./ApiMiddleware.ts"
import { ChatEvent, MessageContent } from "./ChatEvents.ts"
import { BadRequest, Conflict, Forbidden, NotFound, Unauthorized, Unavailable } from "./Errors.ts"
import { isShallowJson } from "./JsonDepth.ts"
import { documented } from "./OperationDocs.ts"
import { describeEventStreams } from "./StreamDescription.ts"
import { SystemApi } from "./SystemApi.ts"

const Conversation = Schema.Struct({ id: Schema.String, title: Schema.String, created_at: Schema.String, updated_at: Schema.String })
const Message = Schema.Struct({
  id: Schema.String,
  role: Schema.Literals(["user", "assistant"]),
  content: MessageContent,
  status: Schema.Literals(["pending", "pending_approval", "complete", "rejected", "error"]),
  created_at: Schema.String,
  /** Why the reply ended at this message (the `error` event's text), or null. */
  error: Schema.NullOr(Schema.String)
})
const id = { id: Schema.String }
const errors = [BadRequest, Unauthorized, Forbidden, NotFound, Unavailable]

export class ConversationsApi extends HttpApiGroup.make("conversations")
  .add(HttpApiEndpoint.get("list", "/conversations", { success: Schema.Array(Conversation), error: errors }).annotateMerge(documented({
    summary: "List the caller's conversations",
    description: "Newest first."
  })))
  .add(HttpApiEndpoint.post("create", "/conversations", {
    // A blank title: the first message names the conversation.
    payload: Schema.Struct({ title: Schema.String.pipe(Schema.check(Schema.isMaxLength(200))) }),
    success: Conversation.pipe(HttpApiSchema.status(201)),
    error: errors
  }).annotateMerge(documented({
    summary: "Start a conversation",
    description: "With a blank `title`, the conversation is named after its first message (its first line, at most 60 " +
      "characters), and then by the model's title for it once the first reply ends."
  })))
  .add(HttpApiEndpoint.get("get", "/conversations/:id", {
    params: id,
    success: Schema.Struct({ ...Conversation.fields, messages: Schema.Array(Message) }),
    error: errors
  }).annotateMerge(documented({ summary: "A conversation with its messages" })))
  .add(HttpApiEndpoint.delete("delete", "/conversations/:id", { params: id, success: HttpApiSchema.NoContent, error: errors }).annotateMerge(
    documented({ summary: "Delete a conversation and its messages" })
  ))
  .add(HttpApiEndpoint.post("chat", "/conversations/:id/chat", {
    params: id,
    // Not blank: the model would be given a turn with nothing in it.
    payload: Schema.Struct({ content: Schema.String.pipe(Schema.check(Schema.isPattern(/\S/), Schema.isMaxLength(100_000))) }),
    // text/event-stream (spec §6.2); errors before streaming are JSON.
    success: HttpApiSchema.StreamSse({ events: ChatEvent }),
    error: errors
  }).annotateMerge(documented({
    summary: "Send a message; the reply streams as Server-Sent Events",
    description: "Events `token`, `tool_call`, `status`, `title`, `done` and `error` (docs/api.md, section 6); the model's tools run " +
      "as the caller, in the app of `X-App-Schema`. 400 while another reply of the conversation runs.",
    appSchema: true
  })))
  .add(HttpApiEndpoint.post("executeTool", "/conversations/:id/execute-tool", {
    params: id,
    payload: Schema.Struct({
      message_id: Schema.String,
      approved: Schema.optionalKey(Schema.Boolean),
      modified_args: Schema.optionalKey(Schema.NullOr(Schema.Record(Schema.String, Schema.Unknown).pipe(Schema.check(isShallowJson))))
    }),
    success: Schema.Struct({
      status: Schema.Literals(["complete", "rejected", "error"]),
      result: Schema.optionalKey(Schema.Unknown),
      error: Schema.optionalKey(Schema.NullOr(Schema.String)),
      already_processed: Schema.optionalKey(Schema.Boolean)
    }),
    error: errors
  }).annotateMerge(documented({
    summary: "Approve or reject a tool call awaiting approval",
    description: "For older messages awaiting approval; the tool runs as the caller, in the app of `X-App-Schema`. " +
      "Asked again: `{status, already_processed: true}`.",
    appSchema: true
  })))
  .add(HttpApiEndpoint.post("continue", "/conversations/:id/continue", {
    params: id,
    success: HttpApiSchema.StreamSse({ events: ChatEvent }),
    error: errors
  }).annotateMerge(documented({
    summary: "Continue the reply after a tool call, as Server-Sent Events",
    description: "The events of `chat`. 400 unless the latest message is a completed or failed tool call.",
    appSchema: true
  })))
  .add(HttpApiEndpoint.post("stop", "/conversations/:id/stop", {
    params: id,
    success: HttpApiSchema.NoContent,
    error: [...errors, Conflict]
  }).annotateMerge(documented({
    summary: "Stop the running reply",
    description: "Ends the conversation's running reply on the server: the model's request is cut, the text so far is stored as " +
      "the reply, and the reply's events end with `done` and `stopped: true`; a tool call already running completes first. " +
      "Answers once the reply has ended (from another instance of the chat service, within a few seconds; 503 after 10 s); " +
      "then the conversation takes the next message. 409 when no reply is running."
  })))
  .add(HttpApiEndpoint.get("stream", "/conversations/:id/stream", {
    params: id,
    success: HttpApiSchema.StreamSse({ events: ChatEvent }),
    error: errors
  }).annotateMerge(documented({
    summary: "Attach to the running reply, as Server-Sent Events",
    description: "While a reply runs: its events from its first, then live until it ends (a reload or a second tab). When none " +
      "runs: one `done` with the latest message (none when there is no message). A reply running on another instance of " +
      "the chat service: a `status`, then that `done` once the reply has ended. Never starts a reply."
  })))
  .middleware(Authentication)
{}

export class ChatApi extends HttpApi.make("plinth-chat").add(SystemApi).add(ConversationsApi).middleware(ValidationErrors)
  .annotateMerge(describeEventStreams)
{}
