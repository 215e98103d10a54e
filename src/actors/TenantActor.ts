/**
 * One tenant's live side, and the owner of its connections. Its layer opens the tenant's pools
 * (the caller pool and the statement connections) in the actor's scope, so they close with it
 * (multi-tenant mode: when the tenant is released as idle), and the actor holds the tenant's one
 * LISTEN connection, on both channels: `page_change`, fanned out to every subscriber (the SSE
 * streams of GET /events), and `plinth_catalog`, which ends the catalog caches (CatalogWatch).
 *
 * The actor's state (its subscribers, whether it listens, the catalog changes it heard) belongs to
 * one fiber, which takes messages from its mailbox: attach and detach, what the LISTEN connection
 * heard or that it was lost, the heartbeat's ticks. Publishing hands each subscriber the events
 * without waiting (what arrived together as one publication, so a burst becomes one write per
 * stream), and a subscriber that cannot take them (its client stopped reading) is dropped (its
 * stream ends and it reconnects) instead of slowing anyone else down.
 *
 * When the LISTEN connection drops, it is opened again with backoff; while it is down no cached
 * catalog answer is trusted, and once it listens again every subscriber gets `Resync`: events may
 * have been missed, so clients refetch.
 *
 * Heartbeats go the same way, from one timer for all subscribers (with ten thousand streams, a
 * timer and a merge per stream was most of a stream's memory), to a hundredth of them each tick.
 */
import { PgClient, PgConnection } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, Exit, Layer, Queue, Redacted, Schema, Scope } from "effect"
import { CATALOG_CHANNEL, CatalogWatch } from "../services/CatalogWatch.ts"
import { makeJsonColumnTypes } from "../services/JsonColumnTypes.ts"
import { StatementConnections } from "../services/StatementConnections.ts"

export const PAGE_CHANNEL = "page_change"
/** The LISTEN connection's name in pg_stat_activity (the pools' connections are `plinth`). */
export const LISTEN_APPLICATION_NAME = "plinth listen"

export type PageEvent =
  | { readonly _tag: "PageChange"; readonly schema: string; readonly slug: string }
  | { readonly _tag: "Resync" }
  /** Nothing happened: keeps idle connections (and the proxies on their way) open. */
  | { readonly _tag: "Heartbeat" }

/** Publications of one event each. */
const HEARTBEAT: ReadonlyArray<PageEvent> = [{ _tag: "Heartbeat" }]
const RESYNC: ReadonlyArray<PageEvent> = [{ _tag: "Resync" }]
/**
 * Heartbeats go out in this many ticks per interval, to a group of the streams each, so that a page
 * change arriving during a tick waits for a small share of the streams' writes (docs/performance-notes.md).
 */
const HEARTBEAT_GROUPS = 100

/**
 * Where one subscriber's events go. `offer` must not block: false means the subscriber cannot take
 * more (it is too far behind), and it is then let go with `end`.
 */
export interface Subscriber {
  readonly offer: (event: PageEvent) => boolean
  /**
   * Called after each publication, one event or a burst of them (changes committed together
   * arrive together): a subscriber may hold what it took until then and send it at once.
   */
  readonly flush?: () => void
  readonly end: () => void
}

export interface TenantActorShape {
  readonly name: string
  /**
   * Adds `subscriber` until the scope closes (or it is let go, or the tenant stops): everything
   * published after this call reaches it. A user may hold at most `maxStreamsPerUser` at once.
   */
  readonly attach: (userId: string, subscriber: Subscriber) => Effect.Effect<void, TooManyStreams, Scope.Scope>
  /** How many subscribers are connected (for limits and tests). */
  readonly subscribers: () => number
  /** The catalog changes heard on the LISTEN connection (provided as the tenant's CatalogWatch). */
  readonly catalog: CatalogWatch["Service"]
  /**
   * The tenant now lives elsewhere (it moved to another cluster): every subscriber gets `Resync`
   * and ends, so that it reconnects to the tenant's new services and refetches.
   */
  readonly retire: () => void
}

export interface TenantActorOptions {
  readonly name: string
  readonly maxStreamsPerUser?: number
  /** How often every subscriber gets a `Heartbeat`; none when absent. */
  readonly heartbeat?: Duration.Duration | undefined
}

export class TooManyStreams extends Schema.TaggedError<TooManyStreams>()("TooManyStreams", { limit: Schema.Int }) {}

const RETRY_FIRST = Duration.millis(100)
const RETRY_MAX = Duration.seconds(5)
const DEFAULT_MAX_STREAMS_PER_USER = 10

/** `<schema>:<slug>` → the event; anything else is not ours and is ignored. */
export const parsePageChange = (payload: string): PageEvent | undefined => {
  const separator = payload.indexOf(":")
  if (separator <= 0 || separator === payload.length - 1) return undefined
  return { _tag: "PageChange", schema: payload.slice(0, separator), slug: payload.slice(separator + 1) }
}

type Group = Set<Subscriber>

/** What the actor's fiber is asked to do, one message at a time. */
type Message =
  /** Replies with the subscriber's group, or nothing when the tenant has stopped. */
  | { readonly _tag: "Attach"; readonly userId: string; readonly subscriber: Subscriber; readonly reply: Deferred.Deferred<Group | undefined, TooManyStreams> }
  | { readonly _tag: "Detach"; readonly userId: string; readonly subscriber: Subscriber; readonly group: Group; readonly reply: Deferred.Deferred<void> }
  /** The LISTEN connection listens on both channels (again). */
  | { readonly _tag: "Listening" }
  | { readonly _tag: "Lost" }
  | { readonly _tag: "PageChanges"; readonly events: ReadonlyArray<PageEvent> }
  | { readonly _tag: "CatalogChanged" }
  | { readonly _tag: "Tick" }
  | { readonly _tag: "Retire" }

const LISTENING: Message = { _tag: "Listening" }
const LOST: Message = { _tag: "Lost" }
const CATALOG_CHANGED: Message = { _tag: "CatalogChanged" }
const TICK: Message = { _tag: "Tick" }
const RETIRE: Message = { _tag: "Retire" }

/**
 * The actor; its LISTEN connection is opened with the settings of the tenant's caller pool (the
 * PgClient in context), as a connection of its own.
 */
export const makeTenantActor = Effect.fn("TenantActor.make")(function*(options: TenantActorOptions) {
  const pg = yield* PgClient.PgClient
  const maxStreamsPerUser = options.maxStreamsPerUser ?? DEFAULT_MAX_STREAMS_PER_USER
  // Unbounded, and offered to without waiting: messages come from the actor's own fibers and one
  // attach and one detach per event stream, and the actor never blocks while handling one.
  const mailbox = yield* Queue.unbounded<Message>()
  let stopped = false
  const send = (message: Message) => !stopped && Queue.offerUnsafe(mailbox, message)

  // State of the actor's fiber only (`subscribers()` and the catalog's `generation()` read it).
  // The subscribers in HEARTBEAT_GROUPS groups, joined in turn: a page change goes to all of them,
  // each tick of the heartbeat timer to one group. So every stream hears one heartbeat per interval
  // (its first within one), and the event loop is never held by many of their writes at once,
  // which a page change or a request would wait out.
  const groups = Array.from({ length: HEARTBEAT_GROUPS }, (): Group => new Set())
  let nextGroup = 0
  let tick = 0
  const streamsByUser = new Map<string, number>()
  let listening = false
  let listenedBefore = false
  /** Catalog changes heard, and LISTEN connections made and lost. */
  let heard = 0
  /** This process's own catalog changes (`changed`), counted by the caller: a number only ever raised. */
  let ownChanges = 0

  // Never blocks: a subscriber that cannot take an event is too slow, and it alone is let go (with
  // what it took before that event).
  const publishTo = (group: Group, events: ReadonlyArray<PageEvent>) => {
    for (const subscriber of group) {
      let tookAll = true
      for (const event of events) {
        if (!subscriber.offer(event)) {
          tookAll = false
          break
        }
      }
      subscriber.flush?.()
      if (!tookAll) {
        group.delete(subscriber)
        subscriber.end()
      }
    }
  }
  const publish = (events: ReadonlyArray<PageEvent>) => {
    for (const group of groups) publishTo(group, events)
  }

  const handle = (message: Message) => {
    switch (message._tag) {
      case "Attach": {
        const held = streamsByUser.get(message.userId) ?? 0
        if (held >= maxStreamsPerUser) {
          Deferred.doneUnsafe(message.reply, Exit.fail(new TooManyStreams({ limit: maxStreamsPerUser })))
          return
        }
        streamsByUser.set(message.userId, held + 1)
        const group = groups[nextGroup]!
        nextGroup = (nextGroup + 1) % HEARTBEAT_GROUPS
        group.add(message.subscriber)
        Deferred.doneUnsafe(message.reply, Exit.succeed(group))
        return
      }
      case "Detach": {
        if (message.group.delete(message.subscriber)) message.subscriber.end()
        const left = (streamsByUser.get(message.userId) ?? 1) - 1
        if (left <= 0) streamsByUser.delete(message.userId)
        else streamsByUser.set(message.userId, left)
        Deferred.doneUnsafe(message.reply, Exit.void)
        return
      }
      case "Listening":
        heard++
        listening = true
        if (listenedBefore) publish(RESYNC)
        listenedBefore = true
        return
      case "Lost":
        if (listening) heard++
        listening = false
        return
      case "PageChanges":
        publish(message.events)
        return
      case "CatalogChanged":
        heard++
        return
      case "Tick":
        publishTo(groups[tick]!, HEARTBEAT)
        tick = (tick + 1) % HEARTBEAT_GROUPS
        return
      case "Retire":
        publish(RESYNC)
        for (const group of groups) {
          for (const subscriber of group) subscriber.end()
          group.clear()
        }
        return
    }
  }

  // When the tenant stops: nothing more is taken in, whoever waits for a reply gets one, and every
  // subscriber ends. Added before the fibers start, so it runs after they have been interrupted.
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      stopped = true
    }).pipe(
      Effect.andThen(Queue.clear(mailbox)),
      Effect.map((left) => {
        for (const message of left) {
          if (message._tag === "Attach") Deferred.doneUnsafe(message.reply, Exit.succeed(undefined))
          else if (message._tag === "Detach") handle(message)
        }
        for (const group of groups) {
          for (const subscriber of group) subscriber.end()
          group.clear()
        }
      })
    )
  )
  // A message taken is handled, even by a fiber being interrupted: only the wait is interruptible.
  yield* Effect.forkScoped(Effect.forever(Effect.uninterruptibleMask((restore) =>
    Effect.map(restore(Queue.takeAll(mailbox)), (messages) => {
      for (const message of messages) handle(message)
    })
  )))

  // The LISTEN connection: one for both channels, opened again with backoff whenever it is lost,
  // the backoff back to its start each time it listens (a later loss must not wait out the delay
  // an earlier outage built up).
  const connect = PgConnection.make({ ...pg.config, types: undefined, multiplex: false, applicationName: LISTEN_APPLICATION_NAME })
  let retryDelay = RETRY_FIRST
  const listenOnce = Effect.scoped(Effect.gen(function*() {
    // Pinned once for both: a second pin of the same session would wait for the first to end.
    const connection = yield* Effect.flatMap(connect, (connection) => connection.pin)
    const pages = yield* connection.listen(PAGE_CHANNEL)
    const catalog = yield* connection.listen(CATALOG_CHANNEL)
    retryDelay = RETRY_FIRST
    send(LISTENING)
    // Everything that has arrived, at once: a burst goes to each stream as one write.
    const pageChanges = Effect.forever(Effect.map(Queue.takeAll(pages), (arrived) => {
      const events = arrived.flatMap((notification) => parsePageChange(notification.payload) ?? [])
      if (events.length > 0) send({ _tag: "PageChanges", events })
    }))
    const catalogChanges = Effect.forever(Effect.map(Queue.takeAll(catalog), () => send(CATALOG_CHANGED)))
    // Both queues fail with the connection: the first failure ends both.
    yield* Effect.all([pageChanges, catalogChanges], { concurrency: 2, discard: true })
  }))
  const listen = Effect.forever(
    listenOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning(`tenant ${options.name}: LISTEN connection lost; reconnecting`, cause)),
      Effect.andThen(Effect.suspend(() => {
        send(LOST)
        const delay = retryDelay
        retryDelay = Duration.min(Duration.times(retryDelay, 2), RETRY_MAX)
        return Effect.sleep(delay)
      }))
    )
  )
  yield* Effect.forkScoped(listen)
  if (options.heartbeat !== undefined) {
    const every = Duration.millis(Duration.toMillis(options.heartbeat) / HEARTBEAT_GROUPS)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(every), Effect.sync(() => send(TICK)))))
  }

  // Untraced: a span made here would live as long as the stream (its finalizer holds it).
  // Uninterruptible: interrupted between being counted by the actor and adding its finalizer, a
  // stream would be counted for good (a reply is certain: the actor answers, or its finalizer does).
  const attach = Effect.fnUntraced(function*(userId: string, subscriber: Subscriber) {
    const reply = Deferred.makeUnsafe<Group | undefined, TooManyStreams>()
    const group = send({ _tag: "Attach", userId, subscriber, reply }) ? yield* Deferred.await(reply) : undefined
    if (group === undefined) return subscriber.end() // the tenant is stopping
    // Scope.addFinalizer, not Effect.addFinalizer: that one keeps the caller's whole context (an
    // event stream's request) until the finalizer runs.
    yield* Scope.addFinalizer(yield* Effect.scope, detach(userId, subscriber, group))
  }, Effect.uninterruptible)
  // Waited for, so that once the scope is closed the subscriber has ended and its slot is free.
  const detach = (userId: string, subscriber: Subscriber, group: Group) =>
    Effect.suspend(() => {
      const reply = Deferred.makeUnsafe<void>()
      return send({ _tag: "Detach", userId, subscriber, group, reply }) ? Deferred.await(reply) : Effect.void
    })

  return {
    name: options.name,
    attach,
    subscribers: () => groups.reduce((count, group) => count + group.size, 0),
    catalog: CatalogWatch.of({
      generation: () => (listening ? heard + ownChanges : undefined),
      changed: () => {
        ownChanges++
      }
    }),
    retire: () => {
      send(RETIRE)
    }
  } satisfies TenantActorShape
})

export interface TenantOptions extends TenantActorOptions {
  /** The tenant's database, as the service's login role. */
  readonly url: string
  /** Connections of each pool: the caller pool's, and the statement connections'. */
  readonly poolSize: number
  /** The largest result a statement may send (SQL_MAX_RESPONSE_BYTES). */
  readonly maxResponseBytes: number
}

/** The tenant of this process (single-tenant mode), or of the current request (multi-tenant). */
export class TenantActor extends Context.Service<TenantActor, TenantActorShape>()("plinth/TenantActor") {
  /**
   * The tenant: its actor and the connections it owns, built in one scope and closed with it
   * (statement connections first, then the LISTEN connection, then the caller pool).
   */
  static readonly layer = (options: TenantOptions) => {
    const callerPool = PgClient.layer({
      url: Redacted.make(options.url),
      maxConnections: options.poolSize,
      applicationName: "plinth",
      types: makeJsonColumnTypes()
    })
    const actor = Layer.effectContext(Effect.map(makeTenantActor(options), (actor) =>
      Context.make(TenantActor, actor).pipe(Context.add(CatalogWatch, actor.catalog))))
    return StatementConnections.layer(options.url, options.poolSize, options.maxResponseBytes).pipe(
      // The statement connections open lazily: a service that runs no caller statements (chat) never connects them.
      Layer.provideMerge(actor),
      Layer.provideMerge(callerPool)
    )
  }
}
