/**
 * GET /events (spec §6.1) against a real database: page changes reach real EventSource clients
 * and raw HTTP readers, heartbeats keep time, limits hold, a thousand streams all hear one change,
 * and a killed LISTEN connection is survived with a `resync`.
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Exit, Redacted, Scope } from "effect"
import { EventSource } from "eventsource"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTenantActor, type PageEvent, type TenantActorShape } from "../../src/actors/TenantActor.ts"
import { EventStream } from "../../src/http/EventsRoutes.ts"
import { type AuthStack, post, type SignIn, signedIn, startAuthStack } from "../support/auth.ts"
import { query } from "../support/database.ts"
import { eventually } from "../support/eventually.ts"
import { rawClient } from "../support/rawClient.ts"

const HEARTBEAT_MS = 300
let stack: AuthStack
let owner: SignIn
let member: SignIn

beforeAll(async () => {
  stack = await startAuthStack({ EVENTS_HEARTBEAT: `${HEARTBEAT_MS} millis`, EVENTS_MAX_STREAMS_PER_USER: "3" })
  owner = await signedIn(stack, "events-owner@plinth.test", "owner")
  member = await signedIn(stack, "events-member@plinth.test", "member")
})
afterAll(() => stack?.close())

let pages = 0
const freshSlug = () => `page-${++pages}-${Date.now()}`

const callSys = (sql: string, params: ReadonlyArray<unknown>) =>
  post(stack.main.url, "/sql", { sql, params }, { token: owner.token }).then((response) => {
    if (response.status !== 200) throw new Error(`${sql}: ${response.status} ${JSON.stringify(response.body)}`)
    return response
  })

/** A raw SSE reader over node:http: collects the text and lets a test wait for a pattern. */
const openRawStream = (path: string, headers: Record<string, string> = {}, base: string = stack.main.url) => {
  let text = ""
  let statusCode = 0
  const url = new URL(path, base)
  const listeners: Array<() => void> = []
  const request = http.get(url, { headers, agent: false }, (response) => {
    statusCode = response.statusCode ?? 0
    response.setEncoding("utf8")
    response.on("data", (chunk: string) => {
      text += chunk
      for (const listener of listeners) listener()
    })
    response.on("end", () => {
      for (const listener of listeners) listener()
    })
  })
  request.on("error", () => undefined)
  const ended = new Promise<void>((resolve) => request.on("close", resolve))
  const waitFor = (pattern: RegExp, timeoutMs = 10_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (pattern.test(text)) resolve()
      }
      listeners.push(check)
      check()
      setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; got: ${text}`)), timeoutMs)
    })
  return { text: () => text, status: () => statusCode, waitFor, ended, close: () => request.destroy() }
}

/** A bare socket to the main service that sends `request` as is and collects what comes back. */
const openRawSocket = (request: string) => {
  const { socket, received, closed } = rawClient(Number(new URL(stack.main.url).port), request)
  /** Waits until what came back matches `pattern` (and fails if it does not in time). */
  const until = async (pattern: RegExp) => {
    await eventually(async () => pattern.test(received()), 10_000)
    expect(received()).toMatch(pattern)
  }
  return { bytes: received, until, closed, destroy: () => socket.destroy() }
}

describe("GET /events", () => {
  it("a page insert, update and delete reach an EventSource client (token in the query) as page_change", async () => {
    const source = new EventSource(`${stack.main.url}/events?token=${encodeURIComponent(member.token)}`)
    const received: Array<{ schema: string; slug: string }> = []
    source.addEventListener("page_change", (event) => received.push(JSON.parse(event.data) as { schema: string; slug: string }))
    await new Promise<void>((resolve, reject) => {
      source.onopen = () => resolve()
      source.onerror = () => reject(new Error("EventSource failed to open"))
    })
    try {
      const slug = freshSlug()
      await callSys("SELECT sys.create_page($1, $2, $3)", [slug, "Title", "<p>1</p>"])
      await callSys("SELECT sys.update_page($1, NULL, $2)", [slug, "<p>2</p>"])
      await callSys("SELECT sys.delete_page($1)", [slug])
      await eventually(async () => received.length >= 3, 10_000)
      expect(received).toEqual([{ schema: "public", slug }, { schema: "public", slug }, { schema: "public", slug }])
    } finally {
      source.close()
    }
  })

  it("a raw HTTP reader with the Authorization header sees `: connected`, heartbeats at the configured interval, and events", async () => {
    const stream = openRawStream("/events", { authorization: `Bearer ${member.token}` })
    try {
      await stream.waitFor(/^: connected\n\n/)
      const connected = Date.now()
      expect(stream.status()).toBe(200)
      const slug = freshSlug()
      await callSys("SELECT sys.create_page($1, $2, $3)", [slug, "T", ""])
      await stream.waitFor(new RegExp(`event: page_change\\ndata: \\{"schema":"public","slug":"${slug}"\\}\\n\\n`))
      // Waits for the heartbeats rather than a fixed time, so a busy machine cannot fail it.
      await stream.waitFor(/(: heartbeat\n\n[^]*){2}/, HEARTBEAT_MS * 20)
      const heartbeats = stream.text().match(/: heartbeat\n\n/g) ?? []
      // No more often than the interval: at most one per interval since the stream opened, plus the one in flight.
      expect(heartbeats.length).toBeLessThanOrEqual(Math.floor((Date.now() - connected) / HEARTBEAT_MS) + 1)
    } finally {
      stream.close()
    }
  })

  it("on the wire: the head, then the frames as they are until the connection closes, alike for HTTP/1.1 and HTTP/1.0", async () => {
    const wire = async (version: "1.1" | "1.0") => {
      const socket = openRawSocket(`GET /events HTTP/${version}\r\nhost: localhost\r\nx-request-id: wire-${version}\r\nauthorization: Bearer ${member.token}\r\n\r\n`)
      try {
        await socket.until(/: connected\n\n/)
        const slug = freshSlug()
        await callSys("SELECT sys.create_page($1, $2, $3)", [slug, "T", ""])
        // Until the frame after it (a heartbeat), so whatever was written with the event's frame is in.
        await socket.until(new RegExp(`"slug":"${slug}"\}\n\n[^]*: heartbeat\n\n`))
        return { bytes: socket.bytes(), slug }
      } finally {
        socket.destroy()
      }
    }
    const frameOf = (slug: string) => `event: page_change\ndata: \\{"schema":"public","slug":"${slug}"\\}\n\n`
    for (const version of ["1.1", "1.0"] as const) {
      const { bytes, slug } = await wire(version)
      const head = bytes.slice(0, bytes.indexOf("\r\n\r\n")).toLowerCase().split("\r\n")
      expect(head[0]).toMatch(/^http\/1.1 200 /)
      expect(head).toEqual(expect.arrayContaining(["content-type: text/event-stream", "cache-control: no-cache", `x-request-id: wire-${version}`, "connection: close"]))
      expect(head.filter((line) => /^(transfer-encoding|content-length):/.test(line))).toEqual([])
      expect(bytes.slice(bytes.indexOf("\r\n\r\n") + 4)).toMatch(new RegExp(`^: connected\n\n(: heartbeat\n\n)*${frameOf(slug)}(: heartbeat\n\n)*$`))
    }
  })

  it("a stream pipelined behind another request opens once that one is answered", async () => {
    const auth = `authorization: Bearer ${member.token}`
    const socket = openRawSocket(`GET /health HTTP/1.1\r\nhost: localhost\r\n\r\nGET /events HTTP/1.1\r\nhost: localhost\r\n${auth}\r\n\r\n`)
    try {
      await socket.until(/: connected\n\n/)
      const [health, events] = socket.bytes().split(/(?=HTTP\/1.1 )/) as [string, string]
      expect(health).toMatch(/^HTTP\/1.1 200 [^]*\r\n\r\n\{"status":"ok"/)
      expect(events).toMatch(/^HTTP\/1.1 200 [^]*content-type: text\/event-stream[^]*\r\n\r\n: connected\n\n(: heartbeat\n\n)*$/)
    } finally {
      socket.destroy()
    }
  })

  it("a stream with another request pipelined behind it is not opened: the connection closes, and no slot is kept", async () => {
    const user = await signedIn(stack, `ahead-${Date.now()}@plinth.test`, "member")
    const socket = openRawSocket(
      `GET /events HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${user.token}\r\n\r\nGET /health HTTP/1.1\r\nhost: localhost\r\n\r\n`
    )
    await socket.closed
    expect(socket.bytes()).not.toContain(": connected")
    // All three of the user's slots are free.
    const streams = [0, 1, 2].map(() => openRawStream("/events", { authorization: `Bearer ${user.token}` }))
    try {
      await Promise.all(streams.map((stream) => stream.waitFor(/: connected/)))
    } finally {
      for (const stream of streams) stream.close()
    }
  })

  it("is 401 without a token or with a bad one, and answers text/event-stream with one", async () => {
    expect((await fetch(`${stack.main.url}/events`)).status).toBe(401)
    const bad = await fetch(`${stack.main.url}/events?token=not-a-jwt`)
    expect(bad.status).toBe(401)
    expect(await bad.json()).toEqual({ error: expect.any(String) })
    const controller = new AbortController()
    const good = await fetch(`${stack.main.url}/events?token=${member.token}`, { signal: controller.signal })
    expect(good.status).toBe(200)
    expect(good.headers.get("content-type")).toContain("text/event-stream")
    controller.abort()
  })

  it("limits the streams of one user (429), and frees a slot when a stream closes", async () => {
    const user = await signedIn(stack, `limit-${Date.now()}@plinth.test`, "staff")
    const open = [0, 1, 2].map(() => openRawStream("/events", { authorization: `Bearer ${user.token}` }))
    await Promise.all(open.map((stream) => stream.waitFor(/: connected/)))
    const fourth = await fetch(`${stack.main.url}/events`, { headers: { authorization: `Bearer ${user.token}` } })
    expect(fourth.status).toBe(429)
    expect(await fourth.json()).toEqual({ error: expect.stringContaining("3") })
    open[0]!.close()
    // The slot is free once the server has seen the stream close: until then a new one is 429.
    let again = openRawStream("/events", { authorization: `Bearer ${user.token}` })
    const connected = await eventually(async () => {
      if (again.status() === 0) return false
      if (again.status() === 200) return true
      again.close()
      again = openRawStream("/events", { authorization: `Bearer ${user.token}` })
      return false
    }, 10_000)
    try {
      expect(connected).toBe(true)
      await again.waitFor(/: connected/)
    } finally {
      for (const stream of [...open, again]) stream.close()
    }
  })

  it("survives a killed LISTEN connection: clients get `resync`, and later changes flow again", async () => {
    const stream = openRawStream("/events", { authorization: `Bearer ${member.token}` })
    try {
      await stream.waitFor(/: connected/)
      const killed = await query(stack.db.adminUrl, (sql) =>
        sql<{ n: number }>`SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'plinth listen'`)
      expect(killed[0]!.n).toBeGreaterThanOrEqual(1)
      await stream.waitFor(/event: resync\ndata: \{\}\n\n/, 10_000)
      const slug = freshSlug()
      await callSys("SELECT sys.create_page($1, $2, $3)", [slug, "after", ""])
      await stream.waitFor(new RegExp(`"slug":"${slug}"`))
    } finally {
      stream.close()
    }
  }, 30_000)
})

describe("a crowd", () => {
  let crowd: AuthStack
  beforeAll(async () => {
    crowd = await startAuthStack({ EVENTS_MAX_STREAMS_PER_USER: "2000" })
  })
  afterAll(() => crowd?.close())

  it("1,000 concurrent streams all receive one change", async () => {
    const user = await signedIn(crowd, "crowd@plinth.test", "member")
    const manager = await signedIn(crowd, "crowd-owner@plinth.test", "owner")
    const streams: Array<ReturnType<typeof openRawStream>> = []
    try {
      for (let i = 0; i < 1_000; i++) streams.push(openRawStream("/events", { authorization: `Bearer ${user.token}` }, crowd.main.url))
      await Promise.all(streams.map((stream) => stream.waitFor(/: connected/, 30_000)))
      const slug = freshSlug()
      const created = await post(crowd.main.url, "/sql", { sql: "SELECT sys.create_page($1, $2, $3)", params: [slug, "T", ""] }, {
        token: manager.token
      })
      expect(created.status).toBe(200)
      // How fast is bench/'s question; here only that every stream hears it.
      await Promise.all(streams.map((stream) => stream.waitFor(new RegExp(`"slug":"${slug}"`), 30_000)))
    } finally {
      for (const stream of streams) stream.close()
    }
  }, 120_000)
})

describe("TenantActor", () => {
  /**
   * Until the actor's LISTEN is in place: a subscriber of its own hears a change, then a last one,
   * after every change sent before it (notifications arrive in commit order), so none of them
   * reaches a subscriber attached after this.
   */
  const listening = (actor: TenantActorShape, pg: PgClient.PgClient) =>
    Effect.scoped(Effect.gen(function*() {
      const heard: Array<string> = []
      yield* actor.attach("warm-up", { offer: (event) => (event._tag === "PageChange" && heard.push(event.slug), true), end: () => {} })
      const notify = (slug: string) => Effect.runPromise(pg.notify("page_change", `public:${slug}`))
      const warm = yield* Effect.promise(() =>
        eventually(async () => {
          if (heard.length > 0) return true
          await notify("warm-up")
          return false
        }, 10_000)
      )
      expect(warm).toBe(true)
      yield* Effect.promise(() => notify("fence"))
      expect(yield* Effect.promise(() => eventually(async () => heard.includes("fence"), 10_000))).toBe(true)
    }))

  it("drops a subscriber that falls behind without holding up the others", async () => {
    /** A subscriber that takes `room` events, then no more. */
    const subscriber = (room: number) => {
      const events: Array<PageEvent> = []
      let ended = false
      return { events, ended: () => ended, offer: (event: PageEvent) => events.length < room && events.push(event) > 0, end: () => (ended = true) }
    }
    const slow = subscriber(2)
    const fast = subscriber(100)
    const subscribers = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const actor = yield* makeTenantActor({ name: "test" })
      const pg = yield* PgClient.PgClient
      yield* listening(actor, pg)
      yield* actor.attach("slow-user", slow)
      yield* actor.attach("fast-user", fast)
      for (let i = 0; i < 5; i++) yield* pg.notify("page_change", `public:p${i}`)
      yield* Effect.promise(() => eventually(async () => fast.events.length === 5 && slow.ended(), 10_000))
      return actor.subscribers()
    })).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack.db.mainUrl) }))))
    expect(fast.events.map((event) => event._tag === "PageChange" && event.slug)).toEqual(["p0", "p1", "p2", "p3", "p4"])
    expect(fast.ended()).toBe(true) // when the actor stopped
    // The slow one took its 2 events, refused the third, and was let go at once.
    expect(slow.events).toHaveLength(2)
    expect(slow.ended()).toBe(true)
    expect(subscribers).toBe(1)
  })

  it("heartbeats reach every subscriber once an interval, a hundredth of them at a time, however many come and go", async () => {
    // Each subscriber: when it attached, and when it heard a heartbeat.
    type Heard = { readonly attached: number; readonly times: Array<number> }
    const all: Array<Heard> = []
    const leaving: Array<Scope.Closeable> = []
    /** The first fifty, five of the forty late ones, and the thirty that come mid-interval. */
    const staying = () => all.filter((_, index) => index < 55 || index >= 90)
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const actor = yield* makeTenantActor({ name: "test", maxStreamsPerUser: 200, heartbeat: Duration.millis(500) })
      const attach = (scope?: Scope.Scope) => {
        const heard: Heard = { attached: performance.now(), times: [] }
        all.push(heard)
        const attaching = actor.attach("user", { offer: (event) => event._tag === "Heartbeat" && heard.times.push(performance.now()) > 0, end: () => undefined })
        return scope === undefined ? attaching : Scope.provide(scope)(attaching)
      }
      for (let i = 0; i < 50; i++) yield* attach()
      for (let i = 0; i < 40; i++) {
        const scope = yield* Scope.make()
        leaving.push(scope)
        yield* attach(scope)
      }
      // Mid-interval: most of the late ones leave, and new ones come.
      yield* Effect.sleep("230 millis")
      for (const scope of leaving.slice(5)) yield* Scope.close(scope, Exit.void)
      for (let i = 0; i < 30; i++) yield* attach()
      // Until everyone staying has heard three (about two seconds when the machine is idle).
      yield* Effect.promise(() => eventually(async () => staying().every(({ times }) => times.length >= 3), 10_000))
    })).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack.db.mainUrl) }))))
    for (const { attached, times } of staying()) {
      expect(times.length).toBeGreaterThanOrEqual(2)
      // The first within an interval of attaching, then one an interval: never two in one interval, and
      // none skipped (a skip would be a gap of two intervals; late timers on a busy machine stay short of it).
      expect(times[0]! - attached).toBeLessThan(950)
      for (let i = 1; i < times.length; i++) {
        expect(times[i]! - times[i - 1]!).toBeGreaterThan(350)
        expect(times[i]! - times[i - 1]!).toBeLessThan(950)
      }
    }
    // All at once, every first heartbeat of the first fifty would come within a millisecond or two of the others.
    const firsts = all.slice(0, 50).map(({ times }) => times[0]!)
    expect(Math.max(...firsts) - Math.min(...firsts)).toBeGreaterThan(200)
  })

  it("changes committed together reach each subscriber as one publication: every event offered, then one flush", async () => {
    const slugs: Array<string> = []
    let flushes = 0
    const subscriber = {
      offer: (event: PageEvent) => (event._tag === "PageChange" && slugs.push(event.slug), true),
      flush: () => void flushes++,
      end: () => {}
    }
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const actor = yield* makeTenantActor({ name: "burst" })
      const pg = yield* PgClient.PgClient
      yield* listening(actor, pg)
      yield* actor.attach("burst-user", subscriber)
      yield* pg`SELECT pg_notify('page_change', 'public:b' || n) FROM generate_series(1, 5) AS n`
      yield* Effect.promise(() => eventually(async () => slugs.length >= 5, 10_000))
    })).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack.db.mainUrl) }))))
    expect(slugs).toEqual(["b1", "b2", "b3", "b4", "b5"])
    expect(flushes).toBe(1)
  })
})

describe("an event stream", () => {
  const change = (slug: string): PageEvent => ({ _tag: "PageChange", schema: "public", slug })
  const frameOf = (slug: string) => `event: page_change\ndata: {"schema":"public","slug":"${slug}"}\n\n`
  const text = (chunks: ReadonlyArray<Uint8Array>) => Buffer.concat(chunks).toString("utf8")
  const HEAD = Buffer.from("HEAD\n")
  /** A connection that records what is written to it. */
  const recording = () => {
    const connection = {
      written: [] as Array<Uint8Array>,
      destroyed: false,
      writableLength: 0,
      write: (bytes: Uint8Array) => connection.written.push(bytes) > 0,
      destroy: () => void (connection.destroyed = true)
    }
    return connection
  }

  it("holds what it is offered until it starts; then writes the head, and what it holds in one write", () => {
    const stream = new EventStream()
    const connection = recording()
    expect(stream.offer(change("a"))).toBe(true)
    stream.flush()
    expect(stream.offer(change("b"))).toBe(true)
    stream.start(connection, HEAD)
    expect(connection.written.map((bytes) => Buffer.from(bytes).toString("utf8"))).toEqual(["HEAD\n", frameOf("a") + frameOf("b")])
    expect(stream.offer(change("c"))).toBe(true)
    stream.flush()
    expect(text(connection.written.slice(2))).toBe(frameOf("c"))
  })

  it("what the actor hands over between two flushes goes out in one write, in order; ending sends what is held, then closes the connection", () => {
    const stream = new EventStream()
    const connection = recording()
    stream.start(connection, HEAD)
    for (const slug of ["a", "b", "c"]) expect(stream.offer(change(slug))).toBe(true)
    expect(connection.written).toHaveLength(1)
    stream.flush()
    expect(connection.written).toHaveLength(2)
    expect(text(connection.written.slice(1))).toBe(frameOf("a") + frameOf("b") + frameOf("c"))
    stream.flush()
    expect(connection.written).toHaveLength(2)
    expect(stream.offer(change("d"))).toBe(true)
    stream.end()
    expect(text(connection.written.slice(2))).toBe(frameOf("d"))
    expect(connection.destroyed).toBe(true)
    expect(stream.offer(change("e"))).toBe(false)
  })

  it("ended before it starts (its tenant stopped), it writes the head and what it held, then closes the connection", () => {
    const stream = new EventStream()
    const connection = recording()
    expect(stream.offer(change("a"))).toBe(true)
    stream.end()
    stream.start(connection, HEAD)
    expect(text(connection.written)).toBe(`HEAD\n${frameOf("a")}`)
    expect(connection.destroyed).toBe(true)
  })

  it("is let go once 32 KiB would wait unsent: held before it starts, held for a flush, or unsent at its connection", () => {
    const big = change("p".repeat(1000))
    const fill = (stream: EventStream) => {
      let taken = 0
      while (taken < 1000 && stream.offer(big)) taken++
      return taken
    }
    // Never started (nobody reads): what it holds counts.
    const unstarted = new EventStream()
    const taken = fill(unstarted)
    expect(taken).toBeGreaterThan(20)
    expect(taken).toBeLessThan(40)
    // Started: what it holds for the flush and what its connection has not sent count together.
    const stream = new EventStream()
    const connection = recording()
    stream.start(connection, HEAD)
    connection.writableLength = 16 * 1024
    expect(fill(stream)).toBe(Math.floor((16 * 1024) / frameOf("p".repeat(1000)).length))
    stream.flush()
    connection.writableLength = 32 * 1024 + 1
    expect(stream.offer(change("a"))).toBe(false)
    // A connection that is gone takes nothing.
    const gone = new EventStream()
    const closed = recording()
    gone.start(closed, HEAD)
    closed.destroyed = true
    expect(gone.offer(change("a"))).toBe(false)
  })
})

describe("sys.pages_v", () => {
  it("every signed-in role reads pages through it; nobody but owners and admins writes them", async () => {
    const slug = freshSlug()
    await callSys("SELECT sys.create_page($1, $2, $3)", [slug, "Readable", "<p>x</p>"])
    const read = await post<{ rows: Array<Record<string, unknown>> }>(stack.main.url, "/sql", {
      sql: "SELECT slug, title, source FROM sys.pages_v WHERE schema_name = 'public' AND slug = $1",
      params: [slug]
    }, { token: member.token })
    expect(read.body.rows).toEqual([{ slug, title: "Readable", source: "<p>x</p>" }])
    for (const sql of ["UPDATE sys.pages_v SET title = 'x'", "SELECT * FROM sys.pages", "SELECT sys.create_page('nope', 'x', 'y')"]) {
      expect((await post(stack.main.url, "/sql", { sql }, { token: member.token })).status).toBe(403)
    }
  })
})
