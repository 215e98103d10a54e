/**
 * Sign-in, invitations, passwords and email changes, through the `sys` functions of
 * sql/sys/01_identity.sql. Each call runs as the role spec §5.8 names (anon, or the caller's), so the
 * database's own privileges decide who may do what; this module only turns the answers into typed
 * results.
 */
import { Effect, Option, Schema } from "effect"
import type { SqlError } from "effect/sql"
import type { AppRole, Principal } from "./AccessTokens.ts"
import { executePipelined } from "./AsCaller.ts"
import { sqlState } from "./DatabaseError.ts"
import { ANONYMOUS, currentRequestId, type RequestIdentity } from "./RequestContext.ts"

/** The user of spec §2.3, as the sign-in functions return it. */
export interface SignedInUser {
  readonly id: string
  readonly email: string
  readonly display_name: string
  readonly role: AppRole
  readonly needs_password: boolean
}

export class InviteRefused extends Schema.TaggedError<InviteRefused>()("InviteRefused", { message: Schema.String }) {}
export class InvalidInvite extends Schema.TaggedError<InvalidInvite>()("InvalidInvite", { message: Schema.String }) {}
export class DuplicateEmail extends Schema.TaggedError<DuplicateEmail>()("DuplicateEmail", { message: Schema.String }) {}
export class PasswordAlreadySet extends Schema.TaggedError<PasswordAlreadySet>()("PasswordAlreadySet", {}) {}
export class InvalidPassword extends Schema.TaggedError<InvalidPassword>()("InvalidPassword", { message: Schema.String }) {}
export class UnknownUser extends Schema.TaggedError<UnknownUser>()("UnknownUser", {}) {}
export class InvalidEmailChange extends Schema.TaggedError<InvalidEmailChange>()("InvalidEmailChange", { message: Schema.String }) {}

const identityOf = (principal: Principal) => ({ role: principal.role, userId: principal.userId })

/**
 * The rows of one identity function's call as `identity`, the way every caller's statement runs
 * (AsCaller), with the HTTP request's id for the audit event it appends.
 */
const asIdentity = <A>(identity: RequestIdentity, text: string, params: ReadonlyArray<unknown>) =>
  Effect.flatMap(currentRequestId, (requestId) =>
    Effect.map(executePipelined({ ...identity, requestId }, text, params), (result) => result.rows as ReadonlyArray<A>))

const serverMessage = (error: SqlError.SqlError) =>
  (error.reason as { readonly cause?: { readonly message?: string } }).cause?.message ?? "refused"

/** A sign-in link for an active user; none for an unknown or inactive email. */
export const createMagicLink = Effect.fn("Identity.createMagicLink")(function*(email: string) {
  const [row] = yield* asIdentity<{ token: string | null }>(ANONYMOUS, "SELECT sys.create_magic_link($1) AS token", [email])
  return Option.fromNullishOr(row?.token)
})

/** Consumes a sign-in token; none when it is invalid, spent, expired or its user inactive. */
export const verifyMagicLink = Effect.fn("Identity.verifyMagicLink")(function*(token: string) {
  const [user] = yield* asIdentity<SignedInUser>(ANONYMOUS, "SELECT * FROM sys.verify_magic_link($1)", [token])
  return Option.fromNullishOr(user)
})

/** Email and password (development only); none when they do not match an active user. */
export const login = Effect.fn("Identity.login")(function*(email: string, password: string) {
  const [user] = yield* asIdentity<SignedInUser>(ANONYMOUS, "SELECT * FROM sys.login($1, $2)", [email, password])
  return Option.fromNullishOr(user)
})

const inviteError = (error: SqlError.SqlError): InviteRefused | InvalidInvite | DuplicateEmail | SqlError.SqlError => {
  switch (sqlState(error)) {
    case "42501":
      return new InviteRefused({ message: serverMessage(error) })
    case "22023":
      return new InvalidInvite({ message: serverMessage(error) })
    case "23505":
      return new DuplicateEmail({ message: serverMessage(error) })
    default:
      return error
  }
}

/** Creates the user and returns the token of their invitation link. */
export const inviteUser = Effect.fn("Identity.inviteUser")(function*(caller: Principal, email: string, role: string) {
  const rows = yield* asIdentity<{ token: string }>(identityOf(caller), "SELECT sys.invite_user($1, $2) AS token", [email, role]).pipe(
    Effect.mapError(inviteError)
  )
  return rows[0]!.token
})

const passwordError = (error: SqlError.SqlError): PasswordAlreadySet | InvalidPassword | UnknownUser | SqlError.SqlError => {
  switch (sqlState(error)) {
    case "23000":
      return new PasswordAlreadySet()
    case "22023":
      return new InvalidPassword({ message: serverMessage(error) })
    case "28000":
      return new UnknownUser()
    default:
      return error
  }
}

/** Sets the caller's first password. */
export const setInitialPassword = Effect.fn("Identity.setInitialPassword")(function*(caller: Principal, password: string) {
  yield* asIdentity<unknown>(identityOf(caller), "SELECT sys.set_initial_password($1)", [password]).pipe(Effect.mapError(passwordError))
})

const emailChangeError = (error: SqlError.SqlError): InvalidEmailChange | UnknownUser | SqlError.SqlError => {
  switch (sqlState(error)) {
    case "22023":
      return new InvalidEmailChange({ message: serverMessage(error) })
    case "28000":
      return new UnknownUser()
    default:
      return error
  }
}

/**
 * Records a pending change of the caller's address and returns the token of the link for the new
 * address; none when another user has that address (nothing is to be mailed then). Runs as anon
 * with the caller's id: the function is granted to anon alone, so no client's SQL can mint a token.
 */
export const requestEmailChange = Effect.fn("Identity.requestEmailChange")(function*(caller: Principal, email: string) {
  const [row] = yield* asIdentity<{ token: string | null }>({ role: "anon", userId: caller.userId }, "SELECT sys.request_email_change($1) AS token", [email]).pipe(
    Effect.mapError(emailChangeError)
  )
  return Option.fromNullishOr(row?.token)
})

/** Applies a pending email change; none when the token is invalid, spent, expired or its user inactive. */
export const confirmEmailChange = Effect.fn("Identity.confirmEmailChange")(function*(token: string) {
  const [user] = yield* asIdentity<SignedInUser>(ANONYMOUS, "SELECT * FROM sys.confirm_email_change($1)", [token]).pipe(
    Effect.mapError((error) => (sqlState(error) === "23505" ? new DuplicateEmail({ message: serverMessage(error) }) : error))
  )
  return Option.fromNullishOr(user)
})
