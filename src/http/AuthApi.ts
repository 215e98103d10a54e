/** The authentication endpoints of spec §4.2 and the email change: definitions only (handlers in AuthRoutes.ts). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { AppRole } from "../services/AppRole.ts"
import { MAX_TOKEN_LENGTH } from "../services/ChallengeToken.ts"
import { Authentication } from "./ApiMiddleware.ts"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound, Unauthorized, Unavailable } from "./Errors.ts"

/** Bounded like the column that stores it. */
const Email = Schema.String.pipe(Schema.check(Schema.isMaxLength(320), Schema.isPattern(/^[^@\s]+@[^@\s]+$/)))
/** Bounded like a Turnstile token; optional because no challenge may be configured. */
const ChallengeToken = Schema.optionalKey(Schema.String.pipe(Schema.check(Schema.isMaxLength(MAX_TOKEN_LENGTH))))

export const SignedInUser = Schema.Struct({
  id: Schema.String,
  email: Schema.String,
  display_name: Schema.String,
  role: AppRole,
  needs_password: Schema.Boolean
})
const SignIn = Schema.Struct({ token: Schema.String, user: SignedInUser })
const LinkToken = Schema.String.pipe(Schema.check(Schema.isMaxLength(256)))

export class AuthApi extends HttpApiGroup.make("auth")
  .add(HttpApiEndpoint.post("requestMagicLink", "/auth/magic-link", {
    payload: Schema.Struct({ email: Email, challenge_token: ChallengeToken }),
    success: Schema.Struct({ sent: Schema.Literal(true) }),
    // 429 (with Retry-After) is answered by the error itself, so it is not declared here.
    error: [Forbidden, Unavailable]
  }))
  .add(HttpApiEndpoint.post("verifyMagicLink", "/auth/magic-link/verify", {
    payload: Schema.Struct({ token: LinkToken }),
    success: SignIn,
    error: [Unauthorized, Unavailable]
  }))
  // The link mailed by POST /auth/change-email: applies the change; a fresh JWT, since its email claim changed.
  .add(HttpApiEndpoint.post("verifyEmailChange", "/auth/change-email/verify", {
    payload: Schema.Struct({ token: LinkToken }),
    success: SignIn,
    error: [Unauthorized, Conflict, Unavailable]
  }))
  .add(HttpApiEndpoint.post("login", "/auth/login", {
    payload: Schema.Struct({
      email: Schema.String.pipe(Schema.check(Schema.isMaxLength(320))),
      password: Schema.String.pipe(Schema.check(Schema.isMaxLength(1024))),
      challenge_token: ChallengeToken
    }),
    success: SignIn,
    error: [Unauthorized, Forbidden, NotFound, Unavailable]
  }))
{}

export class AccountApi extends HttpApiGroup.make("account")
  .add(HttpApiEndpoint.post("setPassword", "/auth/set-password", {
    payload: Schema.Struct({ password: Schema.String.pipe(Schema.check(Schema.isBetweenLength(8, 128))) }),
    success: Schema.Struct({ ok: Schema.Literal(true), token: Schema.String }),
    error: [BadRequest, Conflict, Unavailable]
  }))
  // Mails a confirmation link to the new address; the address changes only once it is verified.
  .add(HttpApiEndpoint.post("requestEmailChange", "/auth/change-email", {
    payload: Schema.Struct({ email: Email }),
    success: Schema.Struct({ sent: Schema.Literal(true) }),
    // 429 (with Retry-After) is answered by the error itself, so it is not declared here.
    error: [BadRequest, Unavailable]
  }))
  .add(HttpApiEndpoint.post("invite", "/admin/invite", {
    payload: Schema.Struct({ email: Email, role: AppRole }),
    success: Schema.Struct({ ok: Schema.Literal(true) }),
    error: [BadRequest, Forbidden, Conflict, BadGateway, Unavailable]
  }))
  .middleware(Authentication)
{}
