/**
 * User administration (issue #24) through the `sys` functions of sql/sys/13_user_admin.sql: list
 * users, change their role or whether they are active, resend an invitation. Each call runs as
 * the caller, so the database decides who may do what (owners everyone, admins staff and members,
 * nobody themselves, never the last active owner); this module turns its answers into typed results.
 */
import { Effect, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import type { AppRole, Principal } from "./AccessTokens.ts"
import { executeAllPipelined, executePipelined } from "./AsCaller.ts"
import { databaseErrorFields, sqlState } from "./DatabaseError.ts"
import { isUuid } from "./Uuid.ts"

/** A user as `sys.list_users()` shows them; timestamps are ISO 8601 in UTC. */
export interface UserAccount {
  readonly id: string
  readonly email: string
  readonly display_name: string
  readonly role: AppRole
  readonly is_active: boolean
  readonly needs_password: boolean
  readonly created_at: string
  readonly last_sign_in_at: string | null
  readonly invited_by: string | null
}

/** What a change sets; at least one of the two. */
export interface UserChange {
  readonly role?: AppRole
  readonly is_active?: boolean
}

export class UserNotFound extends Schema.TaggedError<UserNotFound>()("UserNotFound", {}) {}
/** The caller may not (42501): a staff member or a member, an admin reaching above staff, a change of oneself. */
export class UserChangeRefused extends Schema.TaggedError<UserChangeRefused>()("UserChangeRefused", { message: Schema.String }) {}
/** The user's state forbids it (23000): the last active owner, a deactivated or already signed-in user's invitation. */
export class UserChangeConflict extends Schema.TaggedError<UserChangeConflict>()("UserChangeConflict", { message: Schema.String }) {}
/** A value the functions do not take (22023). */
export class InvalidUserChange extends Schema.TaggedError<InvalidUserChange>()("InvalidUserChange", { message: Schema.String }) {}

export type UserAdminError = UserNotFound | UserChangeRefused | UserChangeConflict | InvalidUserChange

const identityOf = (principal: Principal) => ({ role: principal.role, userId: principal.userId })

const refusal = (error: SqlError.SqlError): UserAdminError | SqlError.SqlError => {
  const { message } = databaseErrorFields(error)
  switch (sqlState(error)) {
    case "P0002":
      return new UserNotFound()
    case "42501":
      return new UserChangeRefused({ message })
    case "23000":
      return new UserChangeConflict({ message })
    case "22023":
      return new InvalidUserChange({ message })
    default:
      return error
  }
}

export const listUsers = Effect.fn("UserAdmin.listUsers")(function*(caller: Principal) {
  // Listing changes nothing, so the caller's right is the only refusal it can meet.
  const result = yield* executePipelined(identityOf(caller), "SELECT * FROM sys.list_users()").pipe(Effect.mapError((error) =>
    sqlState(error) === "42501" ? new UserChangeRefused({ message: databaseErrorFields(error).message }) : error))
  return result.rows as ReadonlyArray<unknown> as ReadonlyArray<UserAccount>
})

/** Applies `change` in one transaction (the role first): the user as it is then. */
export const updateUser = Effect.fn("UserAdmin.updateUser")(function*(caller: Principal, userId: string, change: UserChange) {
  if (!isUuid(userId)) return yield* new UserNotFound()
  const statements: Array<readonly [string, ReadonlyArray<unknown>]> = []
  if (change.role !== undefined) statements.push(["SELECT * FROM sys.set_user_role($1, $2)", [userId, change.role]])
  if (change.is_active !== undefined) statements.push(["SELECT * FROM sys.set_user_active($1, $2)", [userId, change.is_active]])
  if (statements.length === 0) return yield* new InvalidUserChange({ message: "nothing to change: give role, is_active or both" })
  const results = yield* executeAllPipelined(identityOf(caller), statements).pipe(Effect.mapError(refusal))
  return results.at(-1)!.rows[0] as unknown as UserAccount
})

/** A fresh invitation link's token for a user who has not signed in yet, and their address. */
export const resendInvite = Effect.fn("UserAdmin.resendInvite")(function*(caller: Principal, userId: string) {
  if (!isUuid(userId)) return yield* new UserNotFound()
  const result = yield* executePipelined(identityOf(caller), "SELECT * FROM sys.resend_invite($1)", [userId]).pipe(Effect.mapError(refusal))
  return result.rows[0] as unknown as { readonly email: string; readonly token: string }
})

/** A user as a database administrator lists them: with the inviter's address. */
export interface ListedUser {
  readonly email: string
  readonly display_name: string
  readonly role: AppRole
  readonly is_active: boolean
  readonly needs_password: boolean
  readonly created_at: Date
  readonly last_sign_in_at: Date | null
  readonly invited_by_email: string | null
}

/**
 * What `plinth users` does, as a database administrator (no app role: the rules of an owner,
 * and nobody is "yourself"), on the database of `SqlClient`, naming users by email.
 */
export const asAdministrator = {
  list: Effect.fn("UserAdmin.administrator.list")(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<ListedUser>`
      SELECT u.email, u.display_name, u.role, u.is_active, u.needs_password, u.created_at, u.last_sign_in_at,
        inviter.email AS invited_by_email
      FROM sys.list_users() AS u LEFT JOIN sys.users AS inviter ON inviter.id = u.invited_by`
  }),
  /** The user before and after the change. */
  update: Effect.fn("UserAdmin.administrator.update")(function*(email: string, change: UserChange) {
    const sql = yield* SqlClient.SqlClient
    return yield* sql.withTransaction(Effect.gen(function*() {
      const [before] = yield* sql<{ id: string; role: AppRole; is_active: boolean }>`
        SELECT id, role, is_active FROM sys.users WHERE lower(email) = lower(${email})`
      if (before === undefined) return yield* new UserNotFound()
      let after: UserAccount | undefined
      if (change.role !== undefined) [after] = yield* sql<UserAccount>`SELECT * FROM sys.set_user_role(${before.id}::uuid, ${change.role})`
      if (change.is_active !== undefined) [after] = yield* sql<UserAccount>`SELECT * FROM sys.set_user_active(${before.id}::uuid, ${change.is_active})`
      return { before, after: after! }
    })).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(refusal(error))))
  })
}
