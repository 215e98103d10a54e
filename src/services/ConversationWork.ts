/**
 * What a conversation's work is made of, as its actor (src/actors/ConversationActor.ts) runs it:
 * starting a reply (sys.begin_turn decides whose turn it is, across every instance), running it
 * (ChatTurn), deciding a legacy `pending_approval` tool call and running an approved one, and
 * closing what an interrupted piece of work left pending. The actor decides when each runs and on
 * which fiber; this module decides what each does.
 */
import { Deferred, Duration, Effect, Option } from "effect"
import type { SqlError } from "effect/sql"
import { runTool, type ToolFailed } from "./ChatTools.ts"
import { type ChatEvent, runTurn } from "./ChatTurn.ts"
import * as Conversations from "./Conversations.ts"
import type { RequestContext } from "./RequestContext.ts"
import type { SqlGuard } from "./SqlGuard.ts"
import type { PageChecker } from "./PageChecker.ts"

/** chat or continue, as the caller asked for it. */
export interface ReplyRequest {
  /** The caller (owner or admin), their user id and app: tools run as them. */
  readonly context: RequestContext
  readonly conversationId: string
  readonly start: Conversations.TurnStart
}

/** execute-tool, as the caller asked for it (spec §4.8). */
export interface ToolDecision {
  readonly context: RequestContext
  readonly conversationId: string
  readonly messageId: string
  /** false rejects the call. */
  readonly approved: boolean
  /** Arguments the user edited, used instead of the model's. */
  readonly args: Option.Option<Readonly<Record<string, unknown>>>
}

/** execute-tool's answer: the outcome, or that the message had been decided before. */
export type ToolAnswer =
  | { readonly status: "complete" | "rejected" | "error"; readonly result: unknown; readonly error: string | null }
  | { readonly status: "complete" | "rejected" | "error"; readonly already_processed: true }

export type Emit = (event: ChatEvent) => Effect.Effect<void>

export type ReplyRefused = Conversations.ConversationNotFound | Conversations.TurnRefused | SqlError.SqlError
export type ToolRefused = Conversations.ConversationNotFound | Conversations.MessageNotFound | Conversations.TurnRefused | SqlError.SqlError
export type ToolRunFailed = Conversations.ConversationNotFound | SqlError.SqlError

/** A decided tool call: answered at once (already decided, or rejected), or a run still to do. */
export type ToolDecided<R> =
  | { readonly _tag: "Answered"; readonly answer: ToolAnswer }
  | { readonly _tag: "Run"; readonly run: Effect.Effect<ToolAnswer, ToolRunFailed, R> }

export interface ConversationWork<R> {
  /**
   * Starts a reply in the database; answers the reply to run (it tells `emit` what the client should
   * see, and ends early, keeping its text so far, once `stop` is done).
   */
  readonly begin: (request: ReplyRequest) => Effect.Effect<(emit: Emit, stop: Deferred.Deferred<void>) => Effect.Effect<void, unknown, R>, ReplyRefused, R>
  /** Claims a `pending_approval` message for execute-tool. */
  readonly decide: (decision: ToolDecision) => Effect.Effect<ToolDecided<R>, ToolRefused, R>
  /** After work that failed or was interrupted: nothing of the conversation may stay `pending`; each keeps `reason`. */
  readonly failPending: (owned: Conversations.OwnedConversation, reason: string) => Effect.Effect<void, unknown, R>
}

const ownedBy = (request: { readonly context: RequestContext; readonly conversationId: string }): Conversations.OwnedConversation => ({
  userId: request.context.userId,
  conversationId: request.conversationId
})

/** How often a running reply looks for a stop recorded by another instance of the chat service. */
export const STOP_WATCH_INTERVAL = Duration.seconds(1)

/** While a reply runs (this fiber is its child): a stop recorded in the database since `since` stops it. */
const watchStop = Effect.fnUntraced(function*(owned: Conversations.OwnedConversation, since: string, stop: Deferred.Deferred<void>) {
  for (;;) {
    yield* Effect.sleep(STOP_WATCH_INTERVAL)
    if (yield* Effect.orElseSucceed(Conversations.stopAskedSince(owned, since), () => false)) return yield* Deferred.succeed(stop, undefined)
  }
})

// Defined once, not as a generator written inline per call (docs/performance-notes.md).
const begin = Effect.fnUntraced(function*(guard: SqlGuard["Service"], pages: PageChecker["Service"], maxSteps: number, request: ReplyRequest) {
  const { context, conversationId, start } = request
  const started = yield* Conversations.beginTurn(context.userId, conversationId, start)
  const titleFrom = started.firstMessage && start.kind === "chat" ? Option.some(start.content) : Option.none<string>()
  // An untitled conversation is named after its first message at once; the model's title replaces it when the reply ends.
  if (Option.isSome(titleFrom)) yield* Conversations.titleIfUntitled(ownedBy(request), Conversations.titleOf(titleFrom.value))
  const since = started.history.at(-1)?.created_at ?? ""
  return (emit: Emit, stop: Deferred.Deferred<void>) =>
    Effect.andThen(
      Effect.forkChild(watchStop(ownedBy(request), since, stop)),
      runTurn({ context, conversationId, placeholderId: started.placeholderId, history: started.history, titleFrom, maxSteps, guard, pages, emit, stop })
    )
})

/** Runs an approved call as the caller and stores it with its result (the message is `pending` until then). */
const runApproved = Effect.fnUntraced(function*(
  guard: SqlGuard["Service"],
  pages: PageChecker["Service"],
  decision: ToolDecision,
  claimed: Extract<Conversations.Approval, { _tag: "Claimed" }>
) {
  const args = Option.getOrElse(decision.args, () => claimed.call.args)
  const call = { ...claimed.call, args }
  const outcome = yield* Effect.result(runTool(guard, pages, decision.context, call.name, args))
  const toolResult = outcome._tag === "Success" ? { result: outcome.success } : { error: (outcome.failure as ToolFailed).message }
  yield* Conversations.saveMessage(
    ownedBy(decision),
    claimed.message.id,
    { ...claimed.content, tool_calls: [call], tool_result: toolResult },
    outcome._tag === "Success" ? "complete" : "error"
  )
  return outcome._tag === "Success"
    ? { status: "complete" as const, result: outcome.success, error: null }
    : { status: "error" as const, result: null, error: (outcome.failure as ToolFailed).message }
})

const decide = Effect.fnUntraced(function*(guard: SqlGuard["Service"], pages: PageChecker["Service"], decision: ToolDecision) {
  // Claimed in one transaction: a second call finds the message no longer pending_approval.
  const claimed = yield* Conversations.claimApproval(decision.context.userId, decision.conversationId, decision.messageId)
  if (claimed._tag === "AlreadyProcessed") {
    return { _tag: "Answered", answer: { status: claimed.status, already_processed: true } } as const
  }
  if (!decision.approved) {
    yield* Conversations.saveMessage(
      ownedBy(decision),
      claimed.message.id,
      { ...claimed.content, tool_result: { result: "rejected by the user" } },
      "rejected"
    )
    return { _tag: "Answered", answer: { status: "rejected", result: null, error: null } } as const
  }
  return { _tag: "Run", run: runApproved(guard, pages, decision, claimed) } as const
})

/** The chat service's work: replies with the model and tools, tool calls run as the caller. */
export const chatWork = (options: { readonly guard: SqlGuard["Service"]; readonly pages: PageChecker["Service"]; readonly maxSteps: number }) => ({
  begin: (request: ReplyRequest) => begin(options.guard, options.pages, options.maxSteps, request),
  decide: (decision: ToolDecision) => decide(options.guard, options.pages, decision),
  failPending: Conversations.failPending
})

/** What the chat service's work needs from the caller's context (the tenant's database, the model). */
export type ChatWorkServices =
  | Effect.Services<ReturnType<ReturnType<typeof chatWork>["begin"]>>
  | Effect.Services<ReturnType<typeof runTurn>>
  | Effect.Services<ReturnType<ReturnType<typeof chatWork>["decide"]>>
  | Effect.Services<ReturnType<typeof runApproved>>
