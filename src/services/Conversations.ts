/**
 * Conversations and messages (spec §2.8, §3.1) as the chat service stores them: as
 * chat_authenticator, every statement scoped by `user_id = <caller>`. The database is the source
 * of truth for whose turn it is: a turn starts in one transaction that locks the conversation
 * row, checks the latest message and inserts the pending placeholder, so two service instances
 * can never both start a reply in one conversation. Timestamps are read as timestamptz columns: the
 * pool's column types (JsonColumnTypes) give them in /sql's form, ISO 8601 in UTC with `Z`.
 */
import { Effect, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { isUuid } from "./Uuid.ts"

export type MessageStatus = "pending" | "pending_approval" | "complete" | "rejected" | "error"

export interface ToolCall {
  readonly id: string
  readonly name: string
  readonly args: Readonly<Record<string, unknown>>
}

/** Spec §2.8's two content shapes. */
export type MessageContent =
  | { readonly type: "text"; readonly text: string }
  | {
    readonly type: "tool_call"
    readonly tool_calls: ReadonlyArray<ToolCall>
    readonly text?: string
    readonly tool_result?: Readonly<Record<string, unknown>>
  }

export interface Message {
  readonly id: string
  readonly role: "user" | "assistant"
  readonly content: MessageContent
  readonly status: MessageStatus
  readonly created_at: string
  /** What the `error` event that ended a reply at this message said; null otherwise. */
  readonly error: string | null
}

export interface Conversation {
  readonly id: string
  readonly title: string
  readonly created_at: string
  readonly updated_at: string
}

export class ConversationNotFound extends Schema.TaggedError<ConversationNotFound>()("ConversationNotFound", {}) {}
/** The conversation is not in a state that allows this (spec §4.8's 400 cases). */
export class TurnRefused extends Schema.TaggedError<TurnRefused>()("TurnRefused", { message: Schema.String }) {}


export const listConversations = Effect.fn("Conversations.list")(function*(userId: string) {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<Conversation>`
    SELECT id::text, title, created_at, updated_at FROM sys.conversations
    WHERE user_id = ${userId} ORDER BY updated_at DESC, created_at DESC`
})

export const createConversation = Effect.fn("Conversations.create")(function*(userId: string, title: string) {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<Conversation>`
    INSERT INTO sys.conversations (user_id, title) VALUES (${userId}, ${title})
    RETURNING id::text, title, created_at, updated_at`
  return row!
})

const messagesOf = (sql: SqlClient.SqlClient, conversationId: string) =>
  sql<Message>`
    SELECT id::text, role, content, status, created_at, error FROM sys.messages
    WHERE conversation_id = ${conversationId} ORDER BY position`

export const getConversation = Effect.fn("Conversations.get")(function*(userId: string, id: string) {
  if (!isUuid(id)) return Option.none()
  const sql = yield* SqlClient.SqlClient
  const [conversation] = yield* sql<Conversation>`
    SELECT id::text, title, created_at, updated_at FROM sys.conversations WHERE id = ${id} AND user_id = ${userId}`
  if (conversation === undefined) return Option.none()
  return Option.some({ ...conversation, messages: yield* messagesOf(sql, id) })
})

export const deleteConversation = Effect.fn("Conversations.delete")(function*(userId: string, id: string) {
  if (!isUuid(id)) return false
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`DELETE FROM sys.conversations WHERE id = ${id} AND user_id = ${userId} RETURNING id`
  return rows.length > 0
})

/** A conversation as its owner reaches it: every statement below carries both ids. */
export interface OwnedConversation {
  readonly userId: string
  readonly conversationId: string
}

export type TurnStart =
  | { readonly kind: "chat"; readonly content: string }
  | { readonly kind: "continue" }

/** What sys.begin_turn answers (sql/sys/09_chat.sql). */
type BeganTurn =
  | { readonly not_found: true }
  | { readonly refused: string }
  | { readonly placeholder_id: string; readonly first_message: boolean; readonly messages: ReadonlyArray<Message> }

/**
 * Starts a reply in one round trip (sys.begin_turn): locks the conversation, checks whose turn it
 * is, stores the user's message (chat) and the pending placeholder the reply will fill. Returns
 * the placeholder's id, whether this is the conversation's first message (it then gets a title),
 * and the conversation's messages as the reply starts.
 */
export const beginTurn = Effect.fn("Conversations.beginTurn")(function*(userId: string, id: string, start: TurnStart) {
  if (!isUuid(id)) return yield* new ConversationNotFound()
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ turn: BeganTurn }>`
    SELECT sys.begin_turn(${userId}, ${id}, ${start.kind === "chat" ? JSON.stringify({ type: "text", text: start.content }) : null}::jsonb) AS turn`
  const turn = row!.turn
  if ("not_found" in turn) return yield* new ConversationNotFound()
  if ("refused" in turn) return yield* new TurnRefused({ message: turn.refused })
  return { placeholderId: turn.placeholder_id, firstMessage: turn.first_message, history: turn.messages }
})

/** Replaces a message's content and status (the placeholder as the reply ends, a tool call as it runs). */
export const saveMessage = Effect.fn("Conversations.save")(
  function*(owned: OwnedConversation, id: string, content: MessageContent, status: MessageStatus, error: string | null = null) {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<Message>`
      UPDATE sys.messages m SET content = ${JSON.stringify(content)}::jsonb, status = ${status}, error = ${error}, updated_at = now()
      FROM sys.conversations c
      WHERE m.id = ${id} AND m.conversation_id = ${owned.conversationId} AND c.id = m.conversation_id AND c.user_id = ${owned.userId}
      RETURNING m.id::text, m.role, m.content, m.status, m.created_at, m.error`
    if (row === undefined) return yield* new ConversationNotFound()
    return row
  }
)

/**
 * Stores a message's final content and adds the reply's next placeholder (pending, no text yet)
 * after it, in one statement: between two steps of a reply, one round trip instead of two.
 */
export const saveMessageAndAddPending = Effect.fn("Conversations.saveAndAddPending")(
  function*(owned: OwnedConversation, id: string, content: MessageContent, status: MessageStatus) {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<Message & { readonly added: boolean }>`
      WITH saved AS (
        UPDATE sys.messages m SET content = ${JSON.stringify(content)}::jsonb, status = ${status}, updated_at = now()
        FROM sys.conversations c
        WHERE m.id = ${id} AND m.conversation_id = ${owned.conversationId} AND c.id = m.conversation_id AND c.user_id = ${owned.userId}
        RETURNING m.id, m.conversation_id, m.role, m.content, m.status, m.created_at, m.error
      ), added AS (
        INSERT INTO sys.messages (conversation_id, role, content, status)
        SELECT conversation_id, 'assistant', '{"type": "text", "text": ""}', 'pending' FROM saved
        RETURNING id, role, content, status, created_at, error
      )
      SELECT id::text, role, content, status, created_at, error, false AS added FROM saved
      UNION ALL
      SELECT id::text, role, content, status, created_at, error, true AS added FROM added`
    const saved = rows.find((row) => !row.added)
    const added = rows.find((row) => row.added)
    if (saved === undefined || added === undefined) return yield* new ConversationNotFound()
    const message = ({ added: _, ...row }: Message & { readonly added: boolean }): Message => row
    return [message(saved), message(added)] as const
  }
)

export const addMessage = Effect.fn("Conversations.add")(
  function*(owned: OwnedConversation, role: "user" | "assistant", content: MessageContent, status: MessageStatus) {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<Message>`
      INSERT INTO sys.messages (conversation_id, role, content, status)
      SELECT c.id, ${role}, ${JSON.stringify(content)}::jsonb, ${status} FROM sys.conversations c
      WHERE c.id = ${owned.conversationId} AND c.user_id = ${owned.userId}
      RETURNING id::text, role, content, status, created_at, error`
    if (row === undefined) return yield* new ConversationNotFound()
    return row
  }
)

export const setTitle = Effect.fn("Conversations.setTitle")(function*(owned: OwnedConversation, title: string) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE sys.conversations SET title = ${title.slice(0, 200)} WHERE id = ${owned.conversationId} AND user_id = ${owned.userId}`
})

/** Where a conversation's replies stand, as the database has them: its latest message, and whether a reply runs (one is pending). */
export interface ReplyState {
  readonly latest: Message | undefined
  readonly running: boolean
}

export const replyState = Effect.fn("Conversations.replyState")(function*(userId: string, id: string) {
  if (!isUuid(id)) return Option.none<ReplyState>()
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ latest: Message | null; running: boolean }>`
    SELECT (SELECT jsonb_build_object('id', m.id, 'role', m.role, 'content', m.content, 'status', m.status,
                                      'created_at', sys.iso_utc(m.created_at), 'error', m.error)
            FROM sys.messages m WHERE m.conversation_id = c.id ORDER BY m.position DESC LIMIT 1) AS latest,
           EXISTS (SELECT FROM sys.messages m WHERE m.conversation_id = c.id AND m.status = 'pending') AS running
    FROM sys.conversations c WHERE c.id = ${id} AND c.user_id = ${userId}`
  if (row === undefined) return Option.none<ReplyState>()
  return Option.some<ReplyState>({ latest: row.latest ?? undefined, running: row.running })
})

/** Records a stop for the reply that runs on another instance (it watches for one: stopAskedSince). */
export const askStop = Effect.fn("Conversations.askStop")(function*(owned: OwnedConversation) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE sys.conversations SET stop_requested_at = clock_timestamp()
    WHERE id = ${owned.conversationId} AND user_id = ${owned.userId}`
})

/** Whether a stop was recorded for the conversation since `since` (its reply's start, ISO 8601). */
export const stopAskedSince = Effect.fn("Conversations.stopAskedSince")(function*(owned: OwnedConversation, since: string) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`SELECT 1 FROM sys.conversations
    WHERE id = ${owned.conversationId} AND user_id = ${owned.userId} AND stop_requested_at >= ${since}::timestamptz`
  return rows.length > 0
})

/** The longest title taken from a first message. */
export const FIRST_MESSAGE_TITLE_LENGTH = 60

/** A conversation's title from its first message: its first line, at most FIRST_MESSAGE_TITLE_LENGTH characters. */
export const titleOf = (text: string) => {
  const line = text.trim().split("\n")[0]!.trim()
  return line.length > FIRST_MESSAGE_TITLE_LENGTH ? `${line.slice(0, FIRST_MESSAGE_TITLE_LENGTH - 1)}…` : line || "New conversation"
}

/** Sets the title of a conversation that has none (blank). */
export const titleIfUntitled = Effect.fn("Conversations.titleIfUntitled")(function*(owned: OwnedConversation, title: string) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE sys.conversations SET title = ${title}
    WHERE id = ${owned.conversationId} AND user_id = ${owned.userId} AND btrim(title) = ''`
})

/** A message of the caller's conversation, locked for the rest of the transaction. */
export const lockMessage = Effect.fn("Conversations.lockMessage")(function*(userId: string, conversationId: string, messageId: string) {
  if (!isUuid(conversationId)) return yield* new ConversationNotFound()
  const sql = yield* SqlClient.SqlClient
  const [conversation] = yield* sql`SELECT id FROM sys.conversations WHERE id = ${conversationId} AND user_id = ${userId}`
  if (conversation === undefined) return yield* new ConversationNotFound()
  if (!isUuid(messageId)) return Option.none<Message>()
  const [message] = yield* sql<Message>`
    SELECT id::text, role, content, status, created_at, error FROM sys.messages
    WHERE id = ${messageId} AND conversation_id = ${conversationId} FOR UPDATE`
  return Option.fromNullishOr(message)
})

/** After an unexpected failure of a reply: nothing of it may stay pending; each keeps `reason`. */
export const failPending = Effect.fn("Conversations.failPending")(function*(owned: OwnedConversation, reason: string) {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE sys.messages m SET status = 'error', error = ${reason}, updated_at = now() FROM sys.conversations c
    WHERE m.conversation_id = ${owned.conversationId} AND m.status = 'pending' AND c.id = m.conversation_id AND c.user_id = ${owned.userId}`
})

export class MessageNotFound extends Schema.TaggedError<MessageNotFound>()("MessageNotFound", {}) {}

export type Approval =
  | { readonly _tag: "AlreadyProcessed"; readonly status: "complete" | "rejected" | "error" }
  | {
    readonly _tag: "Claimed"
    readonly message: Message
    readonly content: Extract<MessageContent, { type: "tool_call" }>
    readonly call: ToolCall
  }

/**
 * execute-tool on a legacy `pending_approval` message: claims it (status `pending` while the tool
 * runs) in one transaction, so that of two calls only one runs the tool. A message already
 * decided is reported as such (the call is idempotent).
 */
export const claimApproval = Effect.fn("Conversations.claimApproval")(function*(userId: string, conversationId: string, messageId: string) {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(Effect.gen(function*() {
    const found = yield* lockMessage(userId, conversationId, messageId)
    if (Option.isNone(found)) return yield* new MessageNotFound()
    const message = found.value
    if (message.content.type !== "tool_call" || message.content.tool_calls.length === 0) {
      return yield* new TurnRefused({ message: "the message is not a tool call" })
    }
    if (message.status === "complete" || message.status === "rejected" || message.status === "error") {
      return { _tag: "AlreadyProcessed", status: message.status } satisfies Approval
    }
    if (message.status !== "pending_approval") return yield* new TurnRefused({ message: "the message is not waiting for approval" })
    yield* sql`UPDATE sys.messages SET status = 'pending', updated_at = now() WHERE id = ${message.id}`
    return { _tag: "Claimed", message, content: message.content, call: message.content.tool_calls[0]! } satisfies Approval
  }))
})

/** The reason a reply left by a process that died is stored with. */
export const ABANDONED = "the reply was cut off: the chat service writing it stopped"

/**
 * Crash recovery, as a chat service starts: replies left `pending` longer than `olderThan` were
 * being written by a process that is gone (a live reply touches its messages at every step), so
 * they become `error` and the conversation can go on.
 */
export const failAbandoned = Effect.fn("Conversations.failAbandoned")(function*(olderThanSeconds: number) {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql`UPDATE sys.messages SET status = 'error', error = ${ABANDONED}, updated_at = now()
    WHERE status = 'pending' AND updated_at < now() - make_interval(secs => ${olderThanSeconds}) RETURNING id`
  return rows.length
})
