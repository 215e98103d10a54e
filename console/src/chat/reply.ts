/**
 * A conversation as the chat shows it: entries (a text, a tool call with its result) from the
 * stored messages, and the running reply's events folded into entries as they arrive.
 */
import type { ChatEvent, MessageContent } from "../../../src/http/ChatEvents.ts"

/** A stored message as GET /conversations/:id gives it. */
export interface ChatMessage {
  readonly id: string
  readonly role: "user" | "assistant"
  readonly content: typeof MessageContent.Type
  readonly status: string
  readonly error: string | null
}

export interface ToolCallShown {
  readonly id: string
  readonly name: string
  readonly args: Readonly<Record<string, unknown>>
}

export type Entry =
  | { readonly kind: "text"; readonly key: string; readonly role: "user" | "assistant"; readonly text: string; readonly error: string | null }
  | { readonly kind: "tool"; readonly key: string; readonly call: ToolCallShown; readonly result: Readonly<Record<string, unknown>> | null; readonly error: string | null }

/** The entries of stored messages; a message's `error` (why the reply ended there) goes with it. */
export const entriesOf = (messages: ReadonlyArray<ChatMessage>): Array<Entry> =>
  messages.flatMap((message): Array<Entry> => {
    const content = message.content
    if (content.type === "text") {
      if (content.text.trim() === "" && message.error === null) return []
      return [{ kind: "text", key: message.id, role: message.role, text: content.text, error: message.error }]
    }
    const before: Array<Entry> = content.text !== undefined && content.text.trim() !== ""
      ? [{ kind: "text", key: `${message.id}-text`, role: "assistant", text: content.text, error: null }]
      : []
    return [
      ...before,
      ...content.tool_calls.map((call, index): Entry => ({
        kind: "tool",
        key: `${message.id}-${call.id}`,
        call,
        result: content.tool_result ?? null,
        error: index === content.tool_calls.length - 1 ? message.error : null
      }))
    ]
  })

/** Whether the conversation can be continued (POST /continue): its latest message is a completed or failed tool call. */
export const canContinue = (messages: ReadonlyArray<ChatMessage>) => {
  const latest = messages.at(-1)
  return latest !== undefined && latest.role === "assistant" && latest.content.type === "tool_call" &&
    (latest.status === "complete" || latest.status === "error")
}

/** Whether a reply is running (its placeholder is pending). */
export const isRunning = (messages: ReadonlyArray<ChatMessage>) => messages.some((message) => message.status === "pending")

/** The messages from before the running reply: up to the latest user message (the reply's are given again by the stream). */
export const beforeRunningReply = <Stored extends ChatMessage>(messages: ReadonlyArray<Stored>): Array<Stored> => {
  let end = messages.length
  while (end > 0 && messages[end - 1]!.role === "assistant") end--
  return messages.slice(0, end)
}

export interface LiveReply {
  readonly entries: ReadonlyArray<Entry>
  /** The transient status line (select_data), or "". */
  readonly status: string
  /** The `error` event's reason, once the reply ended with one. */
  readonly error: string | null
  readonly stopped: boolean
  readonly ended: boolean
  /** Tool calls whose result came with the last event (the console refreshes for those that change the app). */
  readonly completed: ReadonlyArray<ToolCallShown>
}

export const emptyReply = (entries: ReadonlyArray<Entry> = []): LiveReply => ({ entries, status: "", error: null, stopped: false, ended: false, completed: [] })

/** The reply after one more event. */
export const applyEvent = (reply: LiveReply, event: ChatEvent): LiveReply => {
  const next = { ...reply, completed: [] as ReadonlyArray<ToolCallShown> }
  switch (event.event) {
    case "token": {
      const last = reply.entries.at(-1)
      if (last !== undefined && last.kind === "text" && last.role === "assistant" && last.key.startsWith("live-")) {
        return { ...next, entries: [...reply.entries.slice(0, -1), { ...last, text: last.text + event.data.text }] }
      }
      return { ...next, entries: [...reply.entries, { kind: "text", key: `live-${reply.entries.length}`, role: "assistant", text: event.data.text, error: null }] }
    }
    case "tool_call":
      return { ...next, entries: [...reply.entries, { kind: "tool", key: `live-${event.data.id}`, call: event.data, result: null, error: null }] }
    case "status":
      return { ...next, status: event.data.text }
    case "title":
      return next
    case "done": {
      const content = event.data.message.content
      const toolResult = event.data.tool_result
      if (content.type === "tool_call" && toolResult !== undefined) {
        const ids = new Set(content.tool_calls.map((call) => call.id))
        return {
          ...next,
          entries: reply.entries.map((entry) => (entry.kind === "tool" && ids.has(entry.call.id) ? { ...entry, result: toolResult } : entry)),
          completed: toolResult["error"] === undefined ? content.tool_calls : [],
          ended: event.data.streaming_continues !== true
        }
      }
      return { ...next, status: "", stopped: event.data.stopped === true, ended: event.data.streaming_continues !== true }
    }
    case "error":
      return { ...next, status: "", error: event.data.error, ended: true }
  }
}
