/**
 * The chat service as its tests need it: a database, a fake Anthropic API, the chat service and a
 * main service (for signing in and checking effects), and a reader of SSE replies.
 */
import { type AuthStack, post, startAuthStack } from "./auth.ts"
import { type FakeAnthropic, startFakeAnthropic } from "./FakeAnthropic.ts"
import { type RunningService, startService } from "./services.ts"

export interface ChatStack extends AuthStack {
  readonly chat: RunningService
  readonly model: FakeAnthropic
}

export const startChatStack = async (env: Record<string, string> = {}): Promise<ChatStack> => {
  const model = await startFakeAnthropic()
  const modelEnv = { ANTHROPIC_API_KEY: "sk-test", ANTHROPIC_BASE_URL: model.url, ANTHROPIC_MODEL: "claude-test", ...env }
  const stack = await startAuthStack(modelEnv)
  const chat = await startService("chat", stack.db.chatUrl, { ...stack.env, ...modelEnv })
  return {
    ...stack,
    chat,
    model,
    close: async () => {
      await chat.close()
      await model.close()
      await stack.close()
    }
  }
}

export interface SseEvent {
  readonly event: string
  readonly data: Record<string, unknown>
}

export interface SseReply {
  readonly status: number
  readonly contentType: string | null
  /** The events, when the answer was a stream; the JSON body otherwise. */
  readonly events: ReadonlyArray<SseEvent>
  readonly body: unknown
}

/** POSTs and reads the whole answer: SSE frames when it streams, JSON when it does not. */
export const postSse = async (
  base: string,
  path: string,
  body: unknown,
  options: { readonly token?: string; readonly headers?: Record<string, string> } = {}
): Promise<SseReply> => {
  const response = await fetch(`${base}${path}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...options.headers
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  const contentType = response.headers.get("content-type")
  if (!contentType?.includes("text/event-stream")) {
    return { status: response.status, contentType, events: [], body: text === "" ? undefined : JSON.parse(text) }
  }
  const events = text.split("\n\n").filter((frame) => frame.startsWith("event: ")).map((frame) => {
    const event = /^event: (.*)$/m.exec(frame)![1]!
    const data = /^data: (.*)$/m.exec(frame)?.[1] ?? "{}"
    return { event, data: JSON.parse(data) as Record<string, unknown> }
  })
  return { status: response.status, contentType, events, body: undefined }
}

export const newConversation = async (stack: ChatStack, token: string, title = "Test") => {
  const response = await post<{ id: string }>(stack.chat.url, "/conversations", { title }, { token })
  if (response.status !== 201) throw new Error(`create conversation: ${response.status} ${JSON.stringify(response.body)}`)
  return response.body.id
}
