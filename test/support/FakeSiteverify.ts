/**
 * A local stand-in for Cloudflare Turnstile's siteverify endpoint: form fields `secret`, `response`,
 * `remoteip` in, `{ success, error-codes }` out. The token decides the answer, so tests pick the
 * behaviour by naming tokens: `pass…` succeeds, `slow…` answers after the client's timeout,
 * `broken…` gets a 500, `garbled…` a 200 that is not JSON, anything else is rejected.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface SiteverifyCall {
  readonly secret: string
  readonly response: string
  readonly remoteip: string | undefined
}

export interface FakeSiteverifyOptions {
  /** How long a `slow…` token waits before its answer; 6 s (past the 5 s timeout) unless told. */
  readonly slowMillis?: number
}

export interface FakeSiteverify {
  readonly url: string
  readonly calls: Array<SiteverifyCall>
  readonly close: () => Promise<void>
}

const readForm = async (request: IncomingMessage): Promise<Map<string, string>> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  const contentType = request.headers["content-type"] ?? ""
  const body = Buffer.concat(chunks)
  const fields = new Map<string, string>()
  // Turnstile takes JSON as well as forms.
  if (/^application\/json/i.test(contentType)) {
    const parsed: unknown = JSON.parse(body.toString("utf8"))
    if (typeof parsed === "object" && parsed !== null) {
      for (const [name, value] of Object.entries(parsed)) if (typeof value === "string") fields.set(name, value)
    }
    return fields
  }
  const form = await new Response(new Uint8Array(body), { headers: { "content-type": contentType } }).formData()
  for (const [name, value] of form) if (typeof value === "string") fields.set(name, value)
  return fields
}

const json = (response: ServerResponse, status: number, body: unknown) => {
  if (response.destroyed) return
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify(body))
}

export const startFakeSiteverify = async (options: FakeSiteverifyOptions = {}): Promise<FakeSiteverify> => {
  const slowMillis = options.slowMillis ?? 6_000
  const calls: Array<SiteverifyCall> = []
  const timers = new Set<NodeJS.Timeout>()

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    if (request.method !== "POST") return json(response, 405, { success: false, "error-codes": ["bad-request"] })
    const fields = await readForm(request)
    const secret = fields.get("secret")
    const token = fields.get("response")
    calls.push({ secret: secret ?? "", response: token ?? "", remoteip: fields.get("remoteip") })
    if (!secret) return json(response, 200, { success: false, "error-codes": ["missing-input-secret"] })
    if (!token) return json(response, 200, { success: false, "error-codes": ["missing-input-response"] })
    if (token.startsWith("broken")) return json(response, 500, { error: "internal error" })
    if (token.startsWith("garbled")) {
      response.writeHead(200, { "content-type": "text/html" })
      return response.end("<html>captive portal</html>")
    }
    if (token.startsWith("slow")) {
      const timer = setTimeout(() => {
        timers.delete(timer)
        json(response, 200, { success: true, "error-codes": [] })
      }, slowMillis)
      timers.add(timer)
      return
    }
    if (token.startsWith("pass")) {
      return json(response, 200, { success: true, "error-codes": [], challenge_ts: new Date().toISOString(), hostname: "localhost" })
    }
    return json(response, 200, { success: false, "error-codes": ["invalid-input-response"] })
  }

  const server = createServer((request, response) => {
    handle(request, response).catch(() => json(response, 400, { success: false, "error-codes": ["bad-request"] }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}/turnstile/v0/siteverify`,
    calls,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of timers) clearTimeout(timer)
        timers.clear()
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      })
  }
}
