/**
 * Slow-loris clients: headers or a body trickled a byte at a time are cut off with 408 `{error}`
 * (headers after 10 s, the whole request after 30 s), while everyone else is served as usual.
 */
import { connect, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createTestDatabase, type TestDatabase } from "../support/database.ts"
import { type RunningService, startService } from "../support/services.ts"

let db: TestDatabase
let main: RunningService
beforeAll(async () => {
  db = await createTestDatabase()
  main = await startService("main", db.mainUrl)
})
afterAll(async () => {
  await main?.close()
  await db?.drop()
})

interface Trickle {
  /** Everything the server sent, once it closed the connection. */
  readonly closed: Promise<string>
  readonly stop: () => void
}

/** Sends `head`, then one more byte of `drip` every 500 ms, until the server closes the connection. */
const trickle = (head: string, drip: string): Trickle => {
  const { port, hostname } = new URL(main.url)
  const socket: Socket = connect(Number(port), hostname)
  let received = ""
  let timer: ReturnType<typeof setInterval> | undefined
  const closed = new Promise<string>((resolve) => {
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => (received += chunk))
    socket.on("close", () => {
      clearInterval(timer)
      resolve(received)
    })
    socket.on("error", () => undefined)
  })
  socket.on("connect", () => {
    socket.write(head)
    let i = 0
    timer = setInterval(() => socket.writable && socket.write(drip[i++ % drip.length]!), 500)
  })
  return { closed, stop: () => socket.destroy() }
}

const statusAndBody = (raw: string) => {
  const [head = "", body = ""] = raw.split("\r\n\r\n")
  return { status: head.split(" ")[1], body: body === "" ? undefined : JSON.parse(body) as unknown }
}

describe("slow-loris requests", () => {
  it("trickled headers and a trickled body are both cut off with 408; others are served meanwhile", async () => {
    const headers = trickle("POST /sql HTTP/1.1\r\nHost: plinth\r\n", "X-Slow: loris\r\n")
    const body = trickle(
      "POST /auth/magic-link/verify HTTP/1.1\r\nHost: plinth\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n",
      "{\"token\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    )
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_000))
      expect((await fetch(`${main.url}/health`)).status).toBe(200)

      expect(statusAndBody(await headers.closed)).toEqual({ status: "408", body: { error: "request timeout" } })
      // Still serving while the second one trickles on.
      expect((await fetch(`${main.url}/health`)).status).toBe(200)
      expect(statusAndBody(await body.closed)).toEqual({ status: "408", body: { error: "request timeout" } })
    } finally {
      headers.stop()
      body.stop()
    }
  }, 60_000)
})
