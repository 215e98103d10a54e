/** The authentication endpoints of spec §4.2 and the email change: definitions only (handlers in AuthRoutes.ts). */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup } from "effect/http-api"
import { AppRole } from "../services/AppRole.ts"
import { MAX_TOKEN_LENGTH } from "../services/ChallengeToken.ts"
import { Authentication } from "./ApiMiddleware.ts"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound, RateLimited, Unauthorized, Unavailable } from "./Errors.ts"
import { documented } from "./OperationDocs.ts"

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
    error: [Forbidden, RateLimited, Unavailable]
  }).annotateMerge(documented({
    summary: "Mail a sign-in link",
    description: "Answers `{sent: true}` whether or not the address has an account; the link is mailed after the answer. " +
      "403: the bot check failed; 429: too many requests for the mailbox or the client address."
  })))
  .add(HttpApiEndpoint.post("verifyMagicLink", "/auth/magic-link/verify", {
    payload: Schema.Struct({ token: LinkToken }),
    success: SignIn,
    error: [Unauthorized, Unavailable]
  }).annotateMerge(documented({
    summary: "Sign in with a link's token",
    description: "The token of a sign-in or invitation link, for a JWT. 401: invalid, spent or expired."
  })))
  // The link mailed by POST /auth/change-email: applies the change; a fresh JWT, since its email claim changed.
  .add(HttpApiEndpoint.post("verifyEmailChange", "/auth/change-email/verify", {
    payload: Schema.Struct({ token: LinkToken }),
    success: SignIn,
    error: [Unauthorized, Conflict, Unavailable]
  }).annotateMerge(documented({
    summary: "Confirm an email change",
    description: "The token of the link mailed to the new address: the address changes, and a fresh JWT carries it. " +
      "401: invalid, spent or expired; 409: the address got an account meanwhile."
  })))
  .add(HttpApiEndpoint.post("login", "/auth/login", {
    payload: Schema.Struct({
      email: Schema.String.pipe(Schema.check(Schema.isMaxLength(320))),
      password: Schema.String.pipe(Schema.check(Schema.isMaxLength(1024))),
      challenge_token: ChallengeToken
    }),
    success: SignIn,
    error: [Unauthorized, Forbidden, NotFound, RateLimited, Unavailable]
  }).annotateMerge(documented({
    summary: "Sign in with a password (not in production)",
    description: "401: wrong email or password; 403: the bot check failed; 404: in production; 429: too many attempts."
  })))
{}

export class AccountApi extends HttpApiGroup.make("account")
  .add(HttpApiEndpoint.post("setPassword", "/auth/set-password", {
    payload: Schema.Struct({ password: Schema.String.pipe(Schema.check(Schema.isBetweenLength(8, 128))) }),
    success: Schema.Struct({ ok: Schema.Literal(true), token: Schema.String }),
    error: [BadRequest, Conflict, Unavailable]
  }).annotateMerge(documented({
    summary: "Set the first password",
    description: "Once per user (409 after); 8–128 characters. Answers a fresh JWT."
  })))
  // Mails a confirmation link to the new address; the address changes only once it is verified.
  .add(HttpApiEndpoint.post("requestEmailChange", "/auth/change-email", {
    payload: Schema.Struct({ email: Email }),
    success: Schema.Struct({ sent: Schema.Literal(true) }),
    error: [BadRequest, RateLimited, Unavailable]
  }).annotateMerge(documented({
    summary: "Change the caller's email",
    description: "Mails a confirmation link to the new address; the address changes once it is confirmed. " +
      "400: malformed or unchanged; 429: too many requests."
  })))
  .add(HttpApiEndpoint.post("invite", "/admin/invite", {
    payload: Schema.Struct({ email: Email, role: AppRole }),
    success: Schema.Struct({ ok: Schema.Literal(true) }),
    error: [BadRequest, Forbidden, Conflict, BadGateway, Unavailable]
  }).annotateMerge(documented({
    summary: "Invite a user (owner, admin)",
    description: "Creates the user and mails them a sign-in link. 403: the caller may not invite this role; " +
      "409: the address has an account; 502: the user exists but the mail could not be sent."
  })))
  .middleware(Authentication)
{}
