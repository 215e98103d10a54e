/**
 * The chat with the AI model that builds the app (owners and admins), beside the open screen: the
 * conversations (newest first; new, delete after a yes), the open one's messages, its reply streaming token by
 * token with each tool call as a card completed by its result, Stop (ends the reply on the server),
 * Continue, and on opening a conversation whose reply is running, that reply attached from its
 * first event. A tool that changes the app makes the shell refresh at once. Everything is text.
 */
import type { ChatEvent } from "plinth/client"
import { useEffect, useRef, useState } from "preact/hooks"
import {
  type Conversation,
  type ConversationSummary,
  createConversation,
  deleteConversation,
  describe,
  getConversation,
  listConversations,
  replyEvents,
  stopReply
} from "../api.ts"
import { announceChange } from "../changes.ts"
import { applyEvent, beforeRunningReply, canContinue, type ChatMessage, emptyReply, type Entry, entriesOf, isRunning, type LiveReply } from "../chat/reply.ts"
import { changesApp, describeCall, describeResult, toolLabel } from "../chat/tools.ts"
import { Message } from "../components.tsx"
import { PageView } from "../pages/PageView.tsx"

const OPEN_KEY = "plinth.chat"

const titleOf = (conversation: { readonly title: string }) => (conversation.title.trim() === "" ? "Untitled conversation" : conversation.title)

const Plan = (props: { readonly steps: ReadonlyArray<unknown> }) => (
  <ul class="checklist">
    {props.steps.map((step, index) => (
      <li key={index}>
        <label><input type="checkbox" /> {typeof step === "string" ? step : JSON.stringify(step)}</label>
      </li>
    ))}
  </ul>
)

const ToolCard = (props: { readonly entry: Extract<Entry, { kind: "tool" }>; readonly app: string }) => {
  const { call, result } = props.entry
  const name = call.name.replace(/^propose_/, "")
  const failed = result !== null && result["error"] !== undefined
  return (
    <article class={`tool-card${failed ? " failed" : ""}`} aria-label={`${toolLabel(call.name)}: ${describeCall(call.name, call.args)}`}>
      <h4>{toolLabel(call.name)}</h4>
      <p>{describeCall(call.name, call.args)}</p>
      {name === "plan" && Array.isArray(call.args["steps"]) ? <Plan steps={call.args["steps"]} /> : null}
      {name === "preview_page" && typeof call.args["source"] === "string"
        ? <div class="page-preview" aria-label="Page preview" role="region"><PageView source={call.args["source"]} appSchema={props.app} /></div>
        : null}
      {result === null
        ? (props.entry.error === null ? <p class="tool-running">Running…</p> : null)
        : <p class={failed ? "tool-result error" : "tool-result"}>{describeResult(call.name, call.args, result)}</p>}
      {props.entry.error !== null ? <p role="alert" class="tool-result error">{props.entry.error}</p> : null}
    </article>
  )
}

const EntryView = (props: { readonly entry: Entry; readonly app: string }) => {
  const entry = props.entry
  if (entry.kind === "tool") return <li class="chat-entry tool"><ToolCard entry={entry} app={props.app} /></li>
  return (
    <li class={`chat-entry ${entry.role}`}>
      <span class="speaker">{entry.role === "user" ? "You" : "Plinth"}</span>
      {entry.text === "" ? null : <p class="chat-text">{entry.text}</p>}
      {entry.error !== null ? <p role="alert" class="message error">{entry.error}</p> : null}
    </li>
  )
}

export const ChatPanel = (props: { readonly app: string }) => {
  const [conversations, setConversations] = useState<ReadonlyArray<ConversationSummary> | null>(null)
  const [openId, setOpenId] = useState<string | null>(() => sessionStorage.getItem(OPEN_KEY))
  const [conversation, setConversation] = useState<Conversation | null>(null)
  const [reply, setReply] = useState<LiveReply | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const [draft, setDraft] = useState("")
  const [stopping, setStopping] = useState(false)
  /** The conversation whose deletion waits for a yes. */
  const [deleting, setDeleting] = useState<string | null>(null)
  // The conversation shown now: a reply of one left behind stops updating the screen.
  const shown = useRef<string | null>(openId)
  const app = useRef(props.app)
  app.current = props.app

  const refreshList = () =>
    listConversations().then(setConversations, (failure) => setError(describe(failure)))

  const load = async (id: string) => {
    const found = await getConversation(id)
    if (shown.current !== id) return null
    setConversation(found)
    return found
  }

  /** Shows a reply's events as they come, then the conversation as stored. */
  const follow = async (id: string, events: AsyncIterable<ChatEvent>, start: ReadonlyArray<Entry>) => {
    setReply(emptyReply(start))
    setError(null)
    setNotice(null)
    let last = emptyReply(start)
    let first = true
    try {
      for await (const event of events) {
        if (shown.current !== id) return
        // The reply has started: the conversation may have been named after its first message.
        if (first) void refreshList()
        first = false
        last = applyEvent(last, event)
        setReply(last)
        if (event.event === "title") setConversation((current) => (current === null ? current : { ...current, title: event.data.title }))
        if (last.completed.some((call) => changesApp(call.name))) announceChange()
      }
    } catch (failure) {
      if (shown.current === id) setError(describe(failure))
    }
    if (shown.current !== id) return
    if (last.stopped) setNotice("The reply was stopped.")
    setStopping(false)
    try {
      await load(id)
    } catch (failure) {
      setError(describe(failure))
    }
    if (shown.current === id) setReply(null)
    void refreshList()
  }

  const open = async (id: string | null) => {
    shown.current = id
    setOpenId(id)
    setConversation(null)
    setReply(null)
    setError(null)
    setNotice(null)
    if (id === null) {
      sessionStorage.removeItem(OPEN_KEY)
      return
    }
    sessionStorage.setItem(OPEN_KEY, id)
    try {
      const found = await load(id)
      // A reply running (from another tab, or before a reload): attach to it from its first event.
      if (found !== null && isRunning(found.messages)) {
        const before = beforeRunningReply(found.messages)
        setConversation({ ...found, messages: before })
        await follow(id, replyEvents((client) => client.stream(id), app.current), [])
      }
    } catch (failure) {
      if (shown.current !== id) return
      setError(describe(failure))
      if (failure !== null && typeof failure === "object" && (failure as { _tag?: unknown })._tag === "NotFound") {
        sessionStorage.removeItem(OPEN_KEY)
        shown.current = null
        setOpenId(null)
      }
    }
  }

  useEffect(() => {
    void refreshList()
    void open(openId)
    return () => {
      shown.current = null
    }
  }, [])

  const newConversation = async () => {
    try {
      const created = await createConversation()
      await refreshList()
      await open(created.id)
      document.getElementById("chat-message")?.focus()
    } catch (failure) {
      setError(describe(failure))
    }
  }

  const remove = async (target: ConversationSummary) => {
    setDeleting(null)
    try {
      await deleteConversation(target.id)
      if (shown.current === target.id) await open(null)
      await refreshList()
    } catch (failure) {
      setError(describe(failure))
    }
  }

  const send = async (event: Event) => {
    event.preventDefault()
    const content = draft.trim()
    if (content === "" || reply !== null) return
    let id = openId
    try {
      if (id === null) {
        id = (await createConversation()).id
        await open(id)
      }
    } catch (failure) {
      setError(describe(failure))
      return
    }
    const target = id
    setDraft("")
    await follow(target, replyEvents((client) => client.chat(target, content), app.current), [
      { kind: "text", key: "live-user", role: "user", text: content, error: null }
    ])
  }

  const resume = () => {
    const id = openId
    if (id === null) return
    void follow(id, replyEvents((client) => client.continue(id), app.current), [])
  }

  const stop = async () => {
    if (openId === null) return
    setStopping(true)
    try {
      await stopReply(openId)
    } catch (failure) {
      setError(describe(failure))
      setStopping(false)
    }
  }

  const messages: ReadonlyArray<ChatMessage> = conversation?.messages ?? []
  const entries = [...entriesOf(messages), ...(reply?.entries ?? [])]
  const running = reply !== null
  const current = conversations?.find((known) => known.id === openId)
  const heading = titleOf({ title: [conversation?.title ?? "", current?.title ?? ""].find((title) => title.trim() !== "") ?? "" })

  return (
    <aside class="chat" aria-labelledby="chat-heading">
      <h2 id="chat-heading">Chat</h2>
      <section aria-label="Conversations" class="chat-conversations">
        <button type="button" onClick={() => void newConversation()}>New conversation</button>
        {conversations === null ? <p role="status" class="hint">Loading conversations…</p> : null}
        {conversations !== null && conversations.length === 0 ? <p class="hint">No conversations yet.</p> : null}
        <ul>
          {(conversations ?? []).map((known) => (
            <li key={known.id}>
              <button type="button" class="link" aria-current={known.id === openId ? "true" : undefined} onClick={() => void open(known.id)}>
                {titleOf(known)}
              </button>
              <button type="button" class="secondary small" aria-label={`Delete ${titleOf(known)}`} onClick={() => setDeleting(known.id)}>Delete</button>
              {deleting === known.id
                ? (
                  <div role="alertdialog" aria-labelledby={`delete-${known.id}`} class="row-form">
                    <p id={`delete-${known.id}`}>Delete “{titleOf(known)}” and its messages? This cannot be undone.</p>
                    <div class="actions">
                      <button type="button" onClick={() => void remove(known)}>Yes, delete it</button>
                      <button type="button" class="secondary" onClick={() => setDeleting(null)}>Keep it</button>
                    </div>
                  </div>
                )
                : null}
            </li>
          ))}
        </ul>
      </section>
      <section aria-label="Conversation" class="chat-conversation">
        {openId !== null ? <h3>{heading}</h3> : null}
        <ol class="chat-log" aria-label="Messages">
          {entries.map((entry) => <EntryView key={entry.key} entry={entry} app={props.app} />)}
        </ol>
        {reply !== null && reply.status !== "" ? <p role="status" class="chat-status">{reply.status}</p> : null}
        {running && reply.status === "" ? <p role="status" class="chat-status">{stopping ? "Stopping…" : "Replying…"}</p> : null}
        {reply !== null && reply.error !== null ? <Message kind="error">{reply.error}</Message> : null}
        {error !== null ? <Message kind="error">{error}</Message> : null}
        {notice !== null ? <Message kind="status">{notice}</Message> : null}
        <div class="actions">
          {running ? <button type="button" onClick={() => void stop()} disabled={stopping}>Stop</button> : null}
          {!running && canContinue(messages) ? <button type="button" class="secondary" onClick={resume}>Continue</button> : null}
        </div>
        <form class="chat-form" aria-label="Send a message" onSubmit={(event) => void send(event)}>
          <label for="chat-message">Message</label>
          <textarea
            id="chat-message"
            rows={3}
            value={draft}
            onInput={(event) => setDraft(event.currentTarget.value)}
            onKeyDown={(event) => {
              if (event.key === "Enter" && !event.shiftKey) {
                event.preventDefault()
                event.currentTarget.form?.requestSubmit()
              }
            }}
          />
          <button type="submit" disabled={running || draft.trim() === ""}>Send</button>
        </form>
      </section>
    </aside>
  )
}
