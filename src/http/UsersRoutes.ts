/** Handlers of the user administration endpoints (UsersApi.ts); the rules are the database's (UserAdmin.ts). */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import type { SqlError } from "effect/sql"
import { Mailer } from "../services/Mailer.ts"
import * as UserAdmin from "../services/UserAdmin.ts"
import { requireRole } from "./Authentication.ts"
import { BadRequest, Conflict, databaseUnavailable, Forbidden, NotFound } from "./Errors.ts"
import { mailInvitation } from "./Invitations.ts"
import { ServedApi } from "./MainApi.ts"

/** The status of each refusal: 404, 403, 409, 400. */
const answered = <A, R>(effect: Effect.Effect<A, UserAdmin.UserAdminError | SqlError.SqlError, R>) =>
  Effect.catchTags(effect, {
    UserNotFound: () => Effect.fail(new NotFound({ error: "no such user" })),
    UserChangeRefused: (error) => Effect.fail(new Forbidden({ error: error.message })),
    UserChangeConflict: (error) => Effect.fail(new Conflict({ error: error.message })),
    InvalidUserChange: (error) => Effect.fail(new BadRequest({ error: error.message }))
  })

const managers = ["owner", "admin"] as const

export const UsersHandlers = HttpApiBuilder.group(ServedApi, "users", Effect.fn(function*(handlers) {
  const mailer = yield* Mailer

  return handlers
    .handle("list", () =>
      Effect.flatMap(requireRole(managers), (principal) => UserAdmin.listUsers(principal)).pipe(
        Effect.catchTag("UserChangeRefused", (error) => Effect.fail(new Forbidden({ error: error.message }))),
        databaseUnavailable
      ))
    .handle("update", ({ params, payload }) =>
      Effect.flatMap(requireRole(managers), (principal) => answered(UserAdmin.updateUser(principal, params.id, payload))).pipe(databaseUnavailable))
    .handle("resendInvite", ({ params }) =>
      Effect.gen(function*() {
        const principal = yield* requireRole(managers)
        const { email, token } = yield* answered(UserAdmin.resendInvite(principal, params.id))
        yield* mailInvitation(mailer, email, token, "the invitation email could not be sent; the link is kept, so resend it again")
        return { ok: true as const }
      }).pipe(databaseUnavailable))
}))
