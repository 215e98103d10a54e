/** User administration (issue #24) for owners and admins: definitions only (handlers in UsersRoutes.ts). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { AppRole } from "../services/AppRole.ts"
import { Authentication } from "./ApiMiddleware.ts"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound, Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"

export const UserAccount = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  display_name: Schema.String,
  role: AppRole,
  is_active: Schema.Boolean,
  needs_password: Schema.Boolean,
  created_at: Schema.String,
  last_sign_in_at: Schema.NullOr(Schema.String),
  invited_by: Schema.NullOr(Schema.String)
})

const UserChange = Schema.Struct({
  role: Schema.optionalKey(AppRole),
  is_active: Schema.optionalKey(Schema.Boolean)
}).pipe(Schema.check(Schema.makeFilter((change: { readonly role?: unknown; readonly is_active?: unknown }) =>
  change.role !== undefined || change.is_active !== undefined || "give role, is_active or both"
)))

const id = { id: Schema.String }

export class UsersApi extends HttpApiGroup.make("users")
  .add(HttpApiEndpoint.get("list", "/admin/users", {
    success: Schema.Array(UserAccount),
    error: [Forbidden, Unavailable]
  }).annotateMerge(documented({
    summary: "List users",
    description: "Every user, for owners and admins. 403: the caller is not an owner or admin (or no longer is)."
  })))
  // Role first, then is_active, in one transaction: both or neither.
  .add(HttpApiEndpoint.patch("update", "/admin/users/:id", {
    params: id,
    payload: UserChange,
    success: UserAccount,
    error: [BadRequest, Forbidden, NotFound, Conflict, Unavailable]
  }).annotateMerge(documented({
    summary: "Change a user's role or deactivate them",
    description: "Owners manage everyone; admins only staff and members, and make nobody owner or admin. " +
      "403: not allowed, or the caller's own account; 404: no such user; 409: it would leave no active owner."
  })))
  // Mails a fresh invitation link to a user who has not signed in yet.
  .add(HttpApiEndpoint.post("resendInvite", "/admin/users/:id/resend-invite", {
    params: id,
    success: Schema.Struct({ ok: Schema.Literal(true) }),
    error: [Forbidden, NotFound, Conflict, BadGateway, Unavailable]
  }).annotateMerge(documented({
    summary: "Mail a fresh invitation link",
    description: "For a user who has not signed in yet. 409: they have signed in already, or are deactivated; " +
      "502: the mail was not sent (nothing is lost: send again)."
  })))
  .middleware(Authentication)
{}
