/**
 * One tenant's live side: a dedicated LISTEN connection on `page_change`, fanned out to every
 * subscriber (the SSE streams of GET /events). One fiber owns the connection and the subscriber
 * set; publishing hands each subscriber the events without waiting (what arrived together as one
 * publication, so a burst becomes one write per stream), and a subscriber that cannot take them
 * (its client stopped reading) is dropped (its stream ends and it reconnects) instead of slowing
 * anyone else down.
 *
 * When the LISTEN connection drops, the actor reconnects with backoff; once it listens again it
 * sends every subscriber `Resync`: events may have been missed, so clients refetch.
 *
 * Heartbeats go the same way, from one timer for all subscribers (with ten thousand streams, a
 * timer and a merge per stream was most of a stream's memory), to a hundredth of them each tick.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Queue, Schema, Scope } from "effect"

export const PAGE_CHANNEL = "page_change"

export type PageEvent =
  | { readonly _tag: "PageChange"; readonly schema: string; readonly slug: string }
  | { readonly _tag: "Resync" }
  /** Nothing happened: keeps idle connections (and the proxies on their way) open. */
  | { readonly _tag: "Heartbeat" }

/** Publications of one event each. */
const HEARTBEAT: ReadonlyArray<PageEvent> = [{ _tag: "Heartbeat" }]
const RESYNC: ReadonlyArray<PageEvent> = [{ _tag: "Resync" }]
/**
 * Heartbeats go out in this many ticks per interval, to a group of the streams each: with 10,000
 * streams a tick is ~1 ms of writes, which is all a page change arriving meanwhile waits (with
 * ten groups it was ~10 ms, in the tail of the events bench: README, Performance).
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

export const makeTenantActor = Effect.fn("TenantActor.make")(function*(options: TenantActorOptions) {
  const pg = yield* PgClient.PgClient
  const maxStreamsPerUser = options.maxStreamsPerUser ?? DEFAULT_MAX_STREAMS_PER_USER
  // The subscribers in HEARTBEAT_GROUPS groups, joined in turn: a page change goes to all of them,
  // each tick of the heartbeat timer to one group. So every stream hears one heartbeat per interval
  // (its first within one), and the event loop is never held by many of them at once: 10,000
  // writes take ~100 ms here, which a page change or a request would wait out.
  const groups = Array.from({ length: HEARTBEAT_GROUPS }, () => new Set<Subscriber>())
  let nextGroup = 0
  const streamsByUser = new Map<string, number>()

  // Never blocks: a subscriber that cannot take an event is too slow, and it alone is let go (with
  // what it took before that event).
  const publishTo = (group: Set<Subscriber>, events: ReadonlyArray<PageEvent>) => {
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
  let tick = 0
  const heartbeatTick = () => {
    publishTo(groups[tick]!, HEARTBEAT)
    tick = (tick + 1) % HEARTBEAT_GROUPS
  }

  let connectedBefore = false
  // Backoff between attempts, back to its start each time a LISTEN succeeds (a later loss
  // must not wait out the delay an earlier outage built up).
  let retryDelay = RETRY_FIRST
  const listenOnce = Effect.scoped(Effect.gen(function*() {
    const notifications = yield* pg.listen(PAGE_CHANNEL)
    retryDelay = RETRY_FIRST
    if (connectedBefore) publish(RESYNC)
    connectedBefore = true
    // Everything that has arrived, at once: a burst goes to each stream as one write.
    yield* Effect.forever(Effect.map(Queue.takeAll(notifications), (arrived) => {
      const events = arrived.flatMap((notification) => parsePageChange(notification.payload) ?? [])
      if (events.length > 0) publish(events)
    }))
  }))
  const listen = Effect.forever(
    listenOnce.pipe(
      Effect.catchCause((cause) => Effect.logWarning(`tenant ${options.name}: LISTEN ${PAGE_CHANNEL} lost; reconnecting`, cause)),
      Effect.andThen(Effect.suspend(() => {
        const delay = retryDelay
        retryDelay = Duration.min(Duration.times(retryDelay, 2), RETRY_MAX)
        return Effect.sleep(delay)
      }))
    )
  )
  yield* Effect.forkScoped(listen)
  if (options.heartbeat !== undefined) {
    const every = Duration.millis(Duration.toMillis(options.heartbeat) / HEARTBEAT_GROUPS)
    yield* Effect.forkScoped(Effect.forever(Effect.andThen(Effect.sleep(every), Effect.sync(heartbeatTick))))
  }
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      for (const group of groups) {
        for (const subscriber of group) subscriber.end()
        group.clear()
      }
    })
  )

  // Untraced: a span made here would live as long as the stream (its finalizer holds it), ~0.7 KB each.
  // Uninterruptible: interrupted between counting the stream and adding its finalizer, it would be counted for good.
  const attach = Effect.fnUntraced(function*(userId: string, subscriber: Subscriber) {
    const held = streamsByUser.get(userId) ?? 0
    if (held >= maxStreamsPerUser) return yield* new TooManyStreams({ limit: maxStreamsPerUser })
    streamsByUser.set(userId, held + 1)
    const group = groups[nextGroup]!
    nextGroup = (nextGroup + 1) % HEARTBEAT_GROUPS
    group.add(subscriber)
    // Scope.addFinalizer, not Effect.addFinalizer: that one keeps the caller's whole context (an
    // event stream's request, ~4 KB) until the finalizer runs.
    yield* Scope.addFinalizer(yield* Effect.scope, Effect.sync(() => {
      if (group.delete(subscriber)) subscriber.end()
      const left = (streamsByUser.get(userId) ?? 1) - 1
      if (left <= 0) streamsByUser.delete(userId)
      else streamsByUser.set(userId, left)
    }))
  }, Effect.uninterruptible)

  return { name: options.name, attach, subscribers: () => groups.reduce((count, group) => count + group.size, 0) } satisfies TenantActorShape
})

/** The tenant of this process (single-tenant mode), or of the current request (multi-tenant). */
export class TenantActor extends Context.Service<TenantActor, TenantActorShape>()("plinth/TenantActor") {
  static readonly layer = (options: TenantActorOptions) => Layer.effect(TenantActor, makeTenantActor(options))
}
