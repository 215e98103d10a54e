/**
 * The agentic loop of one reply (spec §4.8, §6.2): prompt the model with the conversation and the
 * caller's current schema, stream its text, run each tool call it makes as the caller (each
 * persisted as its own message), feed the results back, and repeat until it answers with plain
 * text or the step bound is reached (which leaves the conversation for /continue to resume).
 * Everything the client should see goes to `emit`; everything that happened is in the database,
 * whether or not anyone is still listening.
 */
import { Deferred, Effect, Fiber, Option, Stream } from "effect"
import type { SqlError } from "effect/sql"
import { BUILDER_GUIDE } from "./BuilderGuide.ts"
import { TOOLS, runTool, toolMode, type ToolFailed } from "./ChatTools.ts"
import {
  addMessage,
  type ConversationNotFound,
  type Message,
  type MessageContent,
  saveMessage,
  saveMessageAndAddPending,
  setTitle,
  type ToolCall
} from "./Conversations.ts"
import { Introspection } from "./Introspection.ts"
import { type MessageParam, Model, type ModelError, type ModelEvent } from "./Model.ts"
import type { PageChecker } from "./PageChecker.ts"
import type { RequestContext } from "./RequestContext.ts"
import type { SqlGuard } from "./SqlGuard.ts"

export type ChatEvent =
  | { readonly event: "token"; readonly data: { readonly text: string } }
  | { readonly event: "tool_call"; readonly data: ToolCall }
  | { readonly event: "title"; readonly data: { readonly title: string } }
  | { readonly event: "status"; readonly data: { readonly text: string } }
  | {
    readonly event: "done"
    readonly data: {
      readonly message: Pick<Message, "id" | "role" | "content" | "status">
      readonly streaming_continues?: boolean
      readonly tool_result?: Readonly<Record<string, unknown>>
      readonly stopped?: boolean
    }
  }
  | { readonly event: "error"; readonly data: { readonly error: string } }

export interface TurnOptions {
  /** The caller (owner or admin), their user id and app: tools run as them. */
  readonly context: RequestContext
  readonly conversationId: string
  /** The pending message this reply fills first. */
  readonly placeholderId: string
  /** The conversation's messages as the reply starts, the placeholder last (Conversations.beginTurn). */
  readonly history: ReadonlyArray<Message>
  /** Set on a conversation's first message: its text, for the title. */
  readonly titleFrom: Option.Option<string>
  readonly maxSteps: number
  readonly guard: SqlGuard["Service"]
  readonly pages: PageChecker["Service"]
  readonly emit: (event: ChatEvent) => Effect.Effect<void>
  /** Done once the user stopped the reply: the model's request is cut, and the text so far kept. */
  readonly stop: Deferred.Deferred<void>
}

const shown = (message: Message) => ({ id: message.id, role: message.role, content: message.content, status: message.status })

/** Messages → the model's history: text as text, a tool call as tool_use plus its tool_result. */
export const toModelHistory = (messages: ReadonlyArray<Message>): Array<MessageParam> => {
  const history: Array<MessageParam> = []
  const push = (role: "user" | "assistant", blocks: Array<Record<string, unknown>>) => {
    const last = history.at(-1)
    if (last !== undefined && last.role === role && Array.isArray(last.content)) (last.content as Array<unknown>).push(...blocks)
    else history.push({ role, content: blocks } as unknown as MessageParam)
  }
  for (const message of messages) {
    const content = message.content
    if (content.type === "text") {
      if (content.text.trim() === "") continue
      push(message.role, [{ type: "text", text: content.text }])
      continue
    }
    if (message.status === "pending" || message.status === "pending_approval" || content.tool_result === undefined) continue
    push("assistant", [
      ...(content.text !== undefined && content.text.trim() !== "" ? [{ type: "text", text: content.text }] : []),
      ...content.tool_calls.map((call) => ({ type: "tool_use", id: call.id, name: call.name, input: call.args }))
    ])
    push("user", content.tool_calls.map((call) => ({
      type: "tool_result",
      tool_use_id: call.id,
      content: JSON.stringify(content.tool_result),
      is_error: message.status !== "complete"
    })))
  }
  return history
}

interface Relation {
  readonly table_name: string
  readonly schema_name: string
  readonly kind: string
  readonly cols: ReadonlyArray<{ readonly name: string; readonly type: string }>
}

const systemPrompt = (context: RequestContext, schema: Option.Option<{ readonly relations: ReadonlyArray<unknown> }>) => {
  const relations = Option.match(schema, {
    onNone: () => "(the schema could not be read)",
    onSome: (value) =>
      (value.relations as ReadonlyArray<Relation>)
        .map((relation) => `- ${relation.schema_name}.${relation.table_name} (${relation.kind}): ${relation.cols.map((col) => `${col.name} ${col.type}`).join(", ")}`)
        .join("\n") || "(no tables yet)"
  })
  return [
    "You are Plinth's app builder. You help the user build a data-driven business application on PostgreSQL:",
    "tables (with the column types text, integer, bigint, numeric, currency, boolean, date, timestamp, uuid, json, email, url, choice, reference),",
    "views, sample data and custom pages. Use the tools to make changes; they run at once with the user's rights,",
    "and their results come back to you. Use select_data to look at data before changing it. Answer in plain text when done.",
    "",
    BUILDER_GUIDE,
    "",
    `The user's role: ${context.role}. App schema: ${context.app?.schemaName ?? "public"}.`,
    "Current schema:",
    relations
  ].join("\n")
}

const ownedBy = (options: TurnOptions) => ({ userId: options.context.userId, conversationId: options.conversationId })

/**
 * Runs one tool call in message `messageId`. A call that changes the app is stored before it runs,
 * so that what may have happened is on record should this process die mid-tool; one that only
 * reads or shows something has nothing to record until its result (the message is already
 * pending), and a write less on its way. Returns the message as it is to be stored, and `store`,
 * which stores it with its result (the step's last call adding the reply's next placeholder in
 * the same statement, unless the step bound ends the reply there) and then tells the client.
 */
const runToolCall = Effect.fn("ChatTurn.toolCall")(function*(
  options: TurnOptions,
  messageId: string,
  call: ToolCall,
  text: string | undefined,
  addNext: boolean,
  error: string | null
) {
  const content: MessageContent = { type: "tool_call", tool_calls: [call], ...(text === undefined ? {} : { text }) }
  const mode = toolMode(call.name)
  if (mode !== "query" && mode !== "complete") yield* saveMessage(ownedBy(options), messageId, content, "pending")
  // select_data is the model's own reading: the user sees only a passing status line.
  if (mode === "query") yield* options.emit({ event: "status", data: { text: "Looking at the data…" } })
  else yield* options.emit({ event: "tool_call", data: call })
  const outcome = yield* Effect.result(runTool(options.guard, options.pages, options.context, call.name, call.args))
  const toolResult: Readonly<Record<string, unknown>> = outcome._tag === "Success"
    ? { result: outcome.success }
    : { error: (outcome.failure as ToolFailed).message }
  const done: MessageContent = { ...content, tool_result: toolResult }
  const status = outcome._tag === "Success" ? "complete" : "error"
  const store = storeToolResult(options, { messageId, done, status, toolResult, quiet: mode === "query", addNext, error })
  // `ran` stands in the turn's history until `store` answers with the row (its created_at is the
  // database's; the model's history has no use for it).
  return { ran: { id: messageId, role: "assistant", content: done, status, created_at: "", error } satisfies Message, store }
})

/** Stores a tool call with its result (see runToolCall), then tells the client. */
// Defined once, not as a generator written inline per call (docs/performance-notes.md says why).
const storeToolResult = Effect.fnUntraced(function*(options: TurnOptions, result: {
  readonly messageId: string
  readonly done: MessageContent
  readonly status: "complete" | "error"
  readonly toolResult: Readonly<Record<string, unknown>>
  /** select_data's: the client saw only a status line, which this clears. */
  readonly quiet: boolean
  /** The step's last call, when another step may follow: the next placeholder is added with it. */
  readonly addNext: boolean
  /** Why the reply ends at this call (the step bound), or null. */
  readonly error: string | null
}) {
  const { done, messageId, status } = result
  const [saved, next] = result.addNext
    ? yield* saveMessageAndAddPending(ownedBy(options), messageId, done, status)
    : [yield* saveMessage(ownedBy(options), messageId, done, status, result.error), undefined] as const
  if (result.quiet) yield* options.emit({ event: "status", data: { text: "" } })
  else yield* options.emit({ event: "done", data: { message: shown(saved), streaming_continues: true, tool_result: result.toolResult } })
  return { saved, next }
})

/** Runs the reply to its end; failures of the model end it with an `error` event and an `error` message. */
export const runTurn = Effect.fn("ChatTurn.run")(function*(options: TurnOptions) {
  const model = yield* Model
  const introspection = yield* Introspection
  const tools = TOOLS.map((definition) => definition.tool)
  const owned = ownedBy(options)
  let placeholderId = options.placeholderId
  // From here on only this reply writes the conversation (its pending placeholder keeps others
  // out), so the history follows from what it stores.
  const history = [...options.history]
  const remember = (message: Message) => {
    const index = history.findIndex((known) => known.id === message.id)
    if (index === -1) history.push(message)
    else history[index] = message
    return message
  }
  // A step's last result is stored while the next prompt is on its way to the model: the model
  // needs only the history, already in memory. What waits for the write is what the client sees
  // next (the step's `done` comes first) and all that needs the next placeholder.
  let storing: Fiber.Fiber<void, ConversationNotFound | SqlError.SqlError> | undefined
  const stored = Effect.suspend(() => {
    const fiber = storing
    storing = undefined
    return fiber === undefined ? Effect.void : Fiber.join(fiber)
  })
  for (let step = 0; step < options.maxSteps; step++) {
    const schema = yield* Effect.option(introspection.schema(options.context))
    let text = ""
    const toolUses: Array<Extract<ModelEvent, { _tag: "ToolUse" }>> = []
    // Stopped while a tool ran: the model is not asked again.
    const failed = (yield* Deferred.isDone(options.stop)) ? Option.none<ModelError>() : yield* model.reply({
      system: systemPrompt(options.context, schema),
      messages: toModelHistory(history),
      tools
    }).pipe(
      // A stop cuts the model's request (its stream's finalizer aborts it).
      Stream.interruptWhen(Deferred.await(options.stop)),
      Stream.runForEach((event) => {
        if (event._tag === "ToolUse") {
          toolUses.push(event)
          return Effect.void
        }
        text += event.text
        return Effect.andThen(stored, options.emit({ event: "token", data: { text: event.text } }))
      }),
      Effect.as(Option.none<ModelError>()),
      Effect.catchTag("ModelError", (error) => Effect.succeed(Option.some(error)))
    )
    yield* stored
    if (yield* Deferred.isDone(options.stop)) {
      // Stopped by the user: the text so far is the reply (tool calls not run yet are dropped).
      const saved = yield* saveMessage(owned, placeholderId, { type: "text", text }, "complete")
      return yield* options.emit({ event: "done", data: { message: shown(saved), stopped: true } })
    }
    if (Option.isSome(failed)) {
      // The partial text is kept: the user saw it arrive.
      yield* saveMessage(owned, placeholderId, { type: "text", text }, "error", failed.value.message)
      return yield* options.emit({ event: "error", data: { error: failed.value.message } })
    }
    if (toolUses.length === 0) {
      const saved = yield* saveMessage(owned, placeholderId, { type: "text", text }, "complete")
      if (Option.isSome(options.titleFrom)) {
        const title = yield* model.title(options.titleFrom.value)
        yield* setTitle(owned, title)
        yield* options.emit({ event: "title", data: { title } })
      }
      return yield* options.emit({ event: "done", data: { message: shown(saved) } })
    }
    for (const [index, use] of toolUses.entries()) {
      const messageId = index === 0
        ? placeholderId
        : remember(yield* addMessage(owned, "assistant", { type: "tool_call", tool_calls: [] }, "pending")).id
      const lastOfStep = index === toolUses.length - 1
      const lastStep = step === options.maxSteps - 1
      const { ran, store } = yield* runToolCall(
        options,
        messageId,
        { id: use.id, name: use.name, args: use.input },
        index === 0 && text.trim() !== "" ? text : undefined,
        lastOfStep && !lastStep,
        // The step bound ends the reply at the last step's last call: it keeps the reason.
        lastOfStep && lastStep ? stepBound(options.maxSteps) : null
      )
      remember(ran)
      const keep = Effect.map(store, ({ next, saved }) => {
        remember(saved)
        // The next step's placeholder: while it is pending, nobody else can start a reply here.
        if (next !== undefined) placeholderId = remember(next).id
      })
      if (lastOfStep) storing = yield* Effect.forkChild(keep)
      else yield* keep
    }
  }
  // The bound ends the reply after a step's tool calls, with no placeholder after them: the
  // latest message is a tool call with its result, which is where POST /continue resumes.
  yield* stored
  yield* options.emit({ event: "error", data: { error: stepBound(options.maxSteps) } })
})

const stepBound = (maxSteps: number) => `the reply took more than ${maxSteps} steps and was stopped; continue resumes it`
