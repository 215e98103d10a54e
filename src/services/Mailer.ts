/**
 * Delivers magic links (sign-in and invite) and email-change confirmations by email through a
 * Mailgun-compatible HTTP API.
 *
 * Without a complete provider configuration nothing is sent: in development the link is printed on
 * the console so a developer can still sign in; in production only a warning without the token is
 * logged (spec §4.2); src/layers/Integrations.ts chooses. The token and the API key never appear
 * in logs or error messages.
 */
import { Cause, Console, Context, Effect, Option, type Redacted, Schedule, Schema } from "effect"
import { HttpClient, type HttpClientError, HttpClientRequest } from "effect/http"
import { maskEmail } from "./EmailMask.ts"
import type { ConfigShape } from "./PlinthConfig.ts"

export class MailError extends Schema.TaggedError<MailError>()("MailError", {
  message: Schema.String
}) {}

export interface MagicLinkMail {
  readonly to: string
  readonly token: string
  /** `email-change` goes to the new address and links to `/auth/confirm-email`. */
  readonly kind: "sign-in" | "invite" | "email-change"
  /** Multi-tenant mode: the tenant the token is good in, carried by the link as `&tenant=`. */
  readonly tenant?: string | undefined
}

export class Mailer extends Context.Service<Mailer, {
  /**
   * Sends the sign-in or invite email with `${APP_URL}/auth/callback?token=<token>`, or the
   * email-change confirmation with `${APP_URL}/auth/confirm-email?token=<token>`.
   */
  readonly sendMagicLink: (mail: MagicLinkMail) => Effect.Effect<void, MailError>
}>()("plinth/Mailer") {
  /** Through the provider's HTTP API. */
  static readonly provider = (client: HttpClient.HttpClient, provider: ConfiguredProvider, appUrl: URL) =>
    Mailer.of({ sendMagicLink: sendThroughProvider(client, provider, appUrl) })

  /** Development without a provider: the link on the console. */
  static readonly console = (appUrl: URL) => Mailer.of({ sendMagicLink: printToConsole(appUrl) })

  /** Production without a provider: a warning without the token. */
  static readonly dropping = Mailer.of({ sendMagicLink: (mail) => dropWithWarning(mail) })
}

/** `${APP_URL}/<path>?token=<token>[&tenant=<tenant>]`, keeping any path of APP_URL and never doubling the slash. */
const appLink = (appUrl: URL, path: string, token: string, tenant: string | undefined): string => {
  const url = new URL(appUrl.href)
  const base = url.pathname.endsWith("/") ? url.pathname : `${url.pathname}/`
  url.pathname = `${base}${path}`
  // The tenant too, in multi-tenant mode: the page the link opens must say which tenant verifies the token.
  url.search = `?token=${encodeURIComponent(token)}${tenant === undefined ? "" : `&tenant=${encodeURIComponent(tenant)}`}`
  url.hash = ""
  return url.href
}

/** `${APP_URL}/auth/callback?token=<token>` (and `&tenant=` in multi-tenant mode), keeping any path of APP_URL and never doubling the slash. */
export const magicLinkUrl = (appUrl: URL, token: string, tenant?: string): string => appLink(appUrl, "auth/callback", token, tenant)

/** `${APP_URL}/auth/confirm-email?token=<token>` (and `&tenant=`): the link that makes an email change take effect. */
export const confirmEmailUrl = (appUrl: URL, token: string, tenant?: string): string => appLink(appUrl, "auth/confirm-email", token, tenant)

const linkOf = (appUrl: URL, mail: MagicLinkMail): string =>
  mail.kind === "email-change" ? confirmEmailUrl(appUrl, mail.token, mail.tenant) : magicLinkUrl(appUrl, mail.token, mail.tenant)

// ---------------------------------------------------------------------------------------------
// Configuration

export const PROVIDER_VARIABLES = ["MAIL_API_KEY", "MAIL_DOMAIN", "MAIL_FROM"] as const

export type ProviderSettings =
  | {
    readonly _tag: "Configured"
    readonly apiKey: Redacted.Redacted<string>
    readonly domain: string
    readonly from: string
    readonly apiUrl: URL
  }
  | { readonly _tag: "Missing"; readonly missing: ReadonlyArray<(typeof PROVIDER_VARIABLES)[number]> }

export type ConfiguredProvider = Extract<ProviderSettings, { _tag: "Configured" }>

/** The provider when MAIL_API_KEY, MAIL_DOMAIN and MAIL_FROM are all set, else which of them are missing. */
export const providerSettings = (config: ConfigShape): ProviderSettings => {
  const { mailApiKey, mailDomain, mailFrom } = config
  if (Option.isSome(mailApiKey) && Option.isSome(mailDomain) && Option.isSome(mailFrom)) {
    return {
      _tag: "Configured",
      apiKey: mailApiKey.value,
      domain: mailDomain.value,
      from: mailFrom.value,
      apiUrl: config.mailApiUrl
    }
  }
  const present: Record<(typeof PROVIDER_VARIABLES)[number], boolean> = {
    MAIL_API_KEY: Option.isSome(mailApiKey),
    MAIL_DOMAIN: Option.isSome(mailDomain),
    MAIL_FROM: Option.isSome(mailFrom)
  }
  return { _tag: "Missing", missing: PROVIDER_VARIABLES.filter((name) => !present[name]) }
}

// ---------------------------------------------------------------------------------------------
// Message content

const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

interface MessageContent {
  readonly subject: string
  readonly text: string
  readonly html: string
}

const messageContent = (kind: MagicLinkMail["kind"], link: string): MessageContent => {
  const href = escapeHtml(link)
  const footer = "The link can be used once and expires in 15 minutes."
  if (kind === "email-change") {
    return {
      subject: "Confirm your new email address",
      text: `Follow this link to make this address the one you sign in to Plinth with:\n\n${link}\n\n${footer} ` +
        `If you did not ask for this, you can ignore this email: nothing changes.\n`,
      html: `<p><a href="${href}">Confirm your new email address</a> to sign in to Plinth with it.</p>` +
        `<p>If the link does not work, copy this address into your browser:<br>${href}</p>` +
        `<p>${footer} If you did not ask for this, you can ignore this email: nothing changes.</p>`
    }
  }
  if (kind === "invite") {
    return {
      subject: "You're invited to Plinth",
      text: `You have been invited to Plinth.\n\nFollow this link to sign in and choose your password:\n\n${link}\n\n${footer}\n`,
      html: `<p>You have been invited to Plinth.</p>` +
        `<p><a href="${href}">Accept the invitation</a> to sign in and choose your password.</p>` +
        `<p>If the button does not work, copy this address into your browser:<br>${href}</p>` +
        `<p>${footer}</p>`
    }
  }
  return {
    subject: "Your sign-in link",
    text: `Follow this link to sign in to Plinth:\n\n${link}\n\n${footer} ` +
      `If you did not ask to sign in, you can ignore this email.\n`,
    html: `<p><a href="${href}">Sign in to Plinth</a></p>` +
      `<p>If the link does not work, copy this address into your browser:<br>${href}</p>` +
      `<p>${footer} If you did not ask to sign in, you can ignore this email.</p>`
  }
}

// ---------------------------------------------------------------------------------------------
// Implementations

const ATTEMPT_TIMEOUT = "10 seconds"

/** Describes a failure by what happened (status, timeout, network) only: the request carries the key and the token. */
const failureMessage = (error: HttpClientError.HttpClientError | Cause.TimeoutError): string => {
  if (Cause.isTimeoutError(error)) return `mail provider did not answer within ${ATTEMPT_TIMEOUT}`
  switch (error.reason._tag) {
    case "StatusCodeError":
      return `mail provider answered HTTP ${error.reason.response.status}`
    case "TransportError":
      return "mail provider unreachable"
    default:
      return "mail provider request failed"
  }
}

const sendThroughProvider = (
  httpClient: HttpClient.HttpClient,
  provider: ConfiguredProvider,
  appUrl: URL
) => {
  // Order matters: the timeout is per attempt (inside the retry); `retryTransient` retries
  // transport errors, timeouts, 408/429/5xx (honouring Retry-After) and leaves other 4xx alone.
  const client = httpClient.pipe(
    HttpClient.filterStatusOk,
    HttpClient.transformResponse(Effect.timeout(ATTEMPT_TIMEOUT)),
    HttpClient.retryTransient({ schedule: Schedule.exponential("200 millis"), times: 3 })
  )
  const endpoint = `${provider.apiUrl.href.replace(/\/+$/, "")}/v3/${encodeURIComponent(provider.domain)}/messages`
  return Effect.fn("Mailer.sendMagicLink")(function*(mail: MagicLinkMail) {
    const content = messageContent(mail.kind, linkOf(appUrl, mail))
    const request = HttpClientRequest.post(endpoint).pipe(
      HttpClientRequest.basicAuth("api", provider.apiKey),
      HttpClientRequest.acceptJson,
      HttpClientRequest.bodyUrlParams({ from: provider.from, to: mail.to, ...content })
    )
    const response = yield* client.execute(request).pipe(
      Effect.mapError((error) => new MailError({ message: failureMessage(error) }))
    )
    // The message is queued once the status is 2xx; the body is drained only to free the connection.
    yield* Effect.ignore(response.text)
  })
}

const printToConsole = (appUrl: URL) =>
  Effect.fn("Mailer.sendMagicLink")(function*(mail: MagicLinkMail) {
    // Development only, and on purpose outside the logger: the link must be visible whatever LOG_LEVEL says.
    yield* Console.log(`Magic link for ${mail.to} (${mail.kind}): ${linkOf(appUrl, mail)}`)
  })

const dropWithWarning = Effect.fn("Mailer.sendMagicLink")(function*(mail: MagicLinkMail) {
  // Succeeds: the caller has no other way to deliver the link, and spec §4.2 answers the same either way.
  yield* Effect.logWarning(`no mail provider configured: magic link for ${maskEmail(mail.to)} not sent`)
})
