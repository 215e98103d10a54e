/**
 * A local stand-in for Mailgun's send endpoint (`POST /v3/:domain/messages`, basic auth `api:<key>`,
 * urlencoded or multipart form). It records what it accepted and can be told to fail, so the
 * Mailer is tested with its production HTTP client against the real protocol.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

export interface FakeMail {
  readonly domain: string
  /** The decoded basic-auth credentials, `user:password`. */
  readonly auth: string
  readonly from: string
  readonly to: string
  readonly subject: string
  readonly text: string
  readonly html: string
}

export interface FakeMailApi {
  readonly url: string
  readonly messages: Array<FakeMail>
  /** Makes the next `count` requests fail with `status` (503 unless told). */
  readonly failNext: (count: number, status?: number) => void
  /** Every request that reached the messages endpoint, accepted or failed. */
  readonly requestCount: () => number
  readonly close: () => Promise<void>
}

const MESSAGES_PATH = /^\/v3\/([^/]+)\/messages$/

const readBody = async (request: IncomingMessage): Promise<Buffer> => {
  const chunks: Array<Buffer> = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Both encodings Mailgun accepts; the WHATWG Response parses either from the content type. */
const parseForm = async (body: Buffer, contentType: string): Promise<Map<string, string>> => {
  const form = await new Response(new Uint8Array(body), { headers: { "content-type": contentType } }).formData()
  const fields = new Map<string, string>()
  for (const [name, value] of form) if (typeof value === "string") fields.set(name, value)
  return fields
}

const basicAuth = (header: string | undefined): string | undefined => {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? "")
  if (!match) return undefined
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8")
  return decoded.includes(":") ? decoded : undefined
}

const json = (response: ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify(body))
}

export const startFakeMailApi = async (): Promise<FakeMailApi> => {
  const messages: Array<FakeMail> = []
  let failures = 0
  let failureStatus = 503
  let requests = 0
  let nextId = 1

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const match = MESSAGES_PATH.exec(new URL(request.url ?? "/", "http://fake").pathname)
    if (request.method !== "POST" || !match) return json(response, 404, { message: "not found" })
    requests += 1
    const body = await readBody(request)
    if (failures > 0) {
      failures -= 1
      return json(response, failureStatus, { message: `fake failure ${failureStatus}` })
    }
    const auth = basicAuth(request.headers.authorization)
    if (auth === undefined) {
      response.writeHead(401, { "content-type": "text/plain", "www-authenticate": 'Basic realm="MG API"' })
      return response.end("Forbidden")
    }
    const contentType = request.headers["content-type"] ?? ""
    if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(contentType)) {
      return json(response, 400, { message: "unsupported content type" })
    }
    const fields = await parseForm(body, contentType)
    const field = (name: string) => fields.get(name) ?? ""
    if (!fields.has("from") || !fields.has("to") || !fields.has("subject")) {
      return json(response, 400, { message: "'from', 'to' and 'subject' are required" })
    }
    if (!fields.has("text") && !fields.has("html")) {
      return json(response, 400, { message: "Need at least one of 'text' or 'html' parameters specified" })
    }
    messages.push({
      domain: decodeURIComponent(match[1]!),
      auth,
      from: field("from"),
      to: field("to"),
      subject: field("subject"),
      text: field("text"),
      html: field("html")
    })
    const id = `<fake.${nextId++}@${decodeURIComponent(match[1]!)}>`
    return json(response, 200, { id, message: "Queued. Thank you." })
  }

  const server = createServer((request, response) => {
    handle(request, response).catch(() => json(response, 500, { message: "fake mail api crashed" }))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    messages,
    failNext: (count, status = 503) => {
      failures = count
      failureStatus = status
    },
    requestCount: () => requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()))
        server.closeAllConnections()
      })
  }
}
