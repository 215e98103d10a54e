/**
 * The database side of "who is asking": every request runs in one transaction whose first
 * statement switches to the caller's role and sets `app.user_id`, `app.app_id`, `app.request_id`
 * (what the audit trail records), `search_path` and `statement_timeout`, all with `set_config(..., true)` in one round trip, so that they end
 * with the transaction and never leak to the next user of the pooled connection. The values are
 * bound parameters: nothing here is concatenated from the request. `AsCaller` runs the transactions.
 */
import { Duration, Effect, References } from "effect"
import type { AppRole } from "./AccessTokens.ts"
import { quoteIdentifier } from "./SqlIdentifier.ts"

export type DatabaseRole = AppRole | "anon"

export interface RequestIdentity {
  readonly role: DatabaseRole
  /** Empty for anonymous requests. */
  readonly userId: string
  /** The HTTP request's id (`x-request-id`), which audit events carry; absent outside a request. */
  readonly requestId?: string | undefined
}

/** An app of sys.apps, as X-App-Schema selects it. */
export interface AppRef {
  readonly id: string
  readonly schemaName: string
}

export interface RequestContext extends RequestIdentity {
  /** Absent: the public schema only. */
  readonly app?: AppRef | undefined
  readonly statementTimeout?: Duration.Duration | undefined
  /** A read-only transaction: even a data-modifying CTE fails (the AI's select_data). */
  readonly readOnly?: boolean | undefined
}

/** The log annotation that carries the id of the HTTP request a fiber serves (HttpServerLive sets it). */
export const REQUEST_ID_ANNOTATION = "requestId"

/** The id of the HTTP request this fiber serves, from its log annotations; `""` outside a request. */
export const currentRequestId: Effect.Effect<string> = Effect.map(References.CurrentLogAnnotations, (annotations) => {
  const id = annotations[REQUEST_ID_ANNOTATION]
  return typeof id === "string" ? id : ""
})

export const ANONYMOUS: RequestIdentity = { role: "anon", userId: "" }

/** What a statement may run for when the caller does not say (SQL_TIMEOUT's default). */
export const DEFAULT_STATEMENT_TIMEOUT = Duration.seconds(15)

export const searchPathFor = (app: AppRef | undefined): string =>
  app === undefined ? "public, pg_catalog" : `${quoteIdentifier(app.schemaName)}, public, pg_catalog`

/**
 * The statement that makes a transaction the caller's (see the top of this file); its parameters
 * come from `settingsOf`.
 */
export const SETTINGS_STATEMENT = `SELECT
  set_config('role', $1, true),
  set_config('app.user_id', $2, true),
  set_config('app.app_id', $3, true),
  set_config('search_path', $4, true),
  set_config('statement_timeout', $5, true),
  set_config('transaction_read_only', $6, true),
  set_config('app.request_id', $7, true)`

/** The statement timeout of `context` in ms (converted once per Duration: every request has one, from the configuration). */
export const statementTimeoutMillis = (context: RequestContext): number => {
  const timeout = context.statementTimeout ?? DEFAULT_STATEMENT_TIMEOUT
  let millis = timeoutMillis.get(timeout)
  if (millis === undefined) timeoutMillis.set(timeout, millis = Math.round(Duration.toMillis(timeout)))
  return millis
}
const timeoutMillis = new WeakMap<Duration.Duration, number>()

export const settingsOf = (context: RequestContext): ReadonlyArray<string> => [
  context.role,
  context.userId,
  context.app?.id ?? "",
  searchPathFor(context.app),
  `${statementTimeoutMillis(context)}ms`,
  context.readOnly === true ? "on" : "off",
  context.requestId ?? ""
]
