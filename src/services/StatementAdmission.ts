/**
 * How many of one user's statements run at once in this process (SQL_MAX_CONCURRENT_PER_USER).
 * A statement past the bound waits briefly for one of the same user's to end, then is refused
 * (`StatementsBusy`, answered 429 with Retry-After), so one user flooding POST /sql cannot take
 * every connection of the statement pool while everyone else waits.
 *
 * Per-process state with synchronous bookkeeping: a count is checked and changed within one step
 * of one fiber, so no mailbox is needed. A caller that is admitted at once costs a map lookup and
 * a finalizer, no fiber and no timer.
 */
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { PlinthConfig } from "./PlinthConfig.ts"

/** The user already runs as many statements as they may, and none ended within the wait. */
export class StatementsBusy extends Schema.TaggedError<StatementsBusy>()("StatementsBusy", {
  limit: Schema.Int,
  retryAfterSeconds: Schema.Int
}) {}

export interface StatementAdmissionShape {
  /**
   * Runs `effect` holding one of `key`'s permits, released however it ends (success, failure,
   * interruption). Without a free permit, waits for one up to the admission's wait, in arrival
   * order; then fails with StatementsBusy.
   */
  readonly admit: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | StatementsBusy, R>
  /** `key`'s permits held and callers waiting (both 0, and nothing kept, once they are done). */
  readonly usage: (key: string) => { readonly running: number; readonly waiting: number }
}

/** How long a statement over the bound waits for one of its user's to end before it is refused. */
export const ADMISSION_WAIT = Duration.seconds(1)
/** Callers waiting per key beyond which a new one is refused at once (each waits ADMISSION_WAIT at most anyway). */
export const MAX_WAITING_PER_KEY = 100
const RETRY_AFTER_SECONDS = 1

interface Waiter {
  /** performance.now() past which it is refused. */
  readonly deadline: number
  /** Set while it waits for a permit; taken by whoever wakes it. */
  wake: ((effect: Effect.Effect<void>) => void) | undefined
  timer: ReturnType<typeof setTimeout> | undefined
}

type Restore = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

export const makeStatementAdmission = (options: {
  readonly maxPerKey: number
  readonly maxWait: Duration.Duration
  readonly maxWaiting?: number | undefined
}): StatementAdmissionShape => {
  const { maxPerKey } = options
  const maxWaitMs = Duration.toMillis(options.maxWait)
  const maxWaiting = options.maxWaiting ?? MAX_WAITING_PER_KEY
  /** Permits held per key; a key holding none is not kept. */
  const running = new Map<string, number>()
  /** Callers waiting per key, in arrival order; an empty queue is not kept. */
  const queues = new Map<string, Set<Waiter>>()

  const hasPermit = (key: string) => (running.get(key) ?? 0) < maxPerKey
  const take = (key: string) => {
    running.set(key, (running.get(key) ?? 0) + 1)
  }
  const busy = () => new StatementsBusy({ limit: maxPerKey, retryAfterSeconds: RETRY_AFTER_SECONDS })

  /** Wakes the longest-waiting caller not woken yet; it takes the permit if it is still free when it runs. */
  const wakeOne = (key: string) => {
    const queue = queues.get(key)
    if (queue === undefined) return
    for (const waiter of queue) {
      const wake = waiter.wake
      if (wake === undefined) continue
      waiter.wake = undefined
      // Not inside the releasing fiber's own step: the woken fiber runs on its own turn.
      queueMicrotask(() => wake(Effect.void))
      return
    }
  }

  const release = (key: string) => {
    const held = running.get(key)! - 1
    if (held === 0) running.delete(key)
    else running.set(key, held)
    wakeOne(key)
  }

  const leave = (key: string, waiter: Waiter) => {
    clearTimeout(waiter.timer)
    const queue = queues.get(key)!
    queue.delete(waiter)
    if (queue.size === 0) queues.delete(key)
  }

  /** Waits (interruptibly) until `waiter` holds a permit of `key`, or fails once its deadline passed. */
  const waitTurn = (key: string, waiter: Waiter, restore: Restore): Effect.Effect<void, StatementsBusy> =>
    Effect.flatMap(
      restore(Effect.callback<void>((resume) => {
        // A permit freed since the last look (the fiber may have yielded in between).
        if (hasPermit(key)) return resume(Effect.void)
        waiter.wake = resume
        waiter.timer = setTimeout(() => {
          waiter.wake = undefined
          resume(Effect.void)
        }, Math.max(0, waiter.deadline - performance.now()))
        // Interrupted while waiting: gone from the queue, and a wake it was given goes to the next.
        return Effect.sync(() => {
          waiter.wake = undefined
          leave(key, waiter)
          if (hasPermit(key)) wakeOne(key)
        })
      })),
      () => {
        clearTimeout(waiter.timer)
        if (hasPermit(key)) {
          leave(key, waiter)
          take(key)
          return Effect.void
        }
        if (performance.now() >= waiter.deadline) {
          leave(key, waiter)
          return Effect.fail(busy())
        }
        return waitTurn(key, waiter, restore)
      }
    )

  const admit = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StatementsBusy, R> =>
    // Uninterruptible from taking the permit until its release is registered; the effect itself
    // and the wait stay interruptible.
    Effect.uninterruptibleMask((restore) => {
      const run = () => Effect.onExit(restore(effect), () => Effect.sync(() => release(key)))
      if (hasPermit(key)) {
        take(key)
        return run()
      }
      let queue = queues.get(key)
      if (queue !== undefined && queue.size >= maxWaiting) return Effect.fail(busy())
      if (queue === undefined) queues.set(key, queue = new Set())
      const waiter: Waiter = { deadline: performance.now() + maxWaitMs, wake: undefined, timer: undefined }
      queue.add(waiter)
      return Effect.flatMap(waitTurn(key, waiter, restore), run)
    })

  return {
    admit,
    usage: (key) => ({ running: running.get(key) ?? 0, waiting: queues.get(key)?.size ?? 0 })
  }
}

export class StatementAdmission extends Context.Service<StatementAdmission, StatementAdmissionShape>()("plinth/StatementAdmission") {
  static readonly layer: Layer.Layer<StatementAdmission, never, PlinthConfig> = Layer.effect(
    StatementAdmission,
    Effect.map(Effect.service(PlinthConfig), (config) =>
      makeStatementAdmission({ maxPerKey: config.sqlMaxConcurrentPerUser, maxWait: ADMISSION_WAIT }))
  )
}
