/**
 * Signing in: an email address gets a sign-in link (POST /auth/magic-link), with the bot check when
 * the deployment has one; outside production, a password form too (POST /auth/login). In a
 * multi-tenant deployment the user names their organization (the tenant, sent as X-Tenant).
 */
import { useState } from "preact/hooks"
import { type ConsoleConfig, clientFor, describe, errorTag, statusOf } from "../api.ts"
import { useChallenge } from "../Challenge.tsx"
import { Message, useTitle } from "../components.tsx"
import { session } from "../session.ts"

/** A tenant's name as the server takes it (X-Tenant). */
const TENANT_PATTERN = "[a-z][a-z0-9_]{0,62}"

/** The words for a failed sign-in request, by what the server answered. */
const signInFailure = (error: unknown, what: "link" | "password", organization: string | null): string => {
  // A tenant the server does not know: a 404 before any route (or the body saying so, where the route declares 404s).
  if (organization !== null && (statusOf(error) === 404 || /unknown tenant/i.test(describe(error)))) {
    return `There is no organization named ${organization}. Please check its name.`
  }
  switch (errorTag(error)) {
    case "Forbidden":
      return "The bot check failed. Please complete it again and retry."
    case "Unauthorized":
      return what === "password" ? "Wrong email or password." : describe(error)
    case "NotFound":
      return "Password sign-in is not available here: ask for a sign-in link instead."
    default:
      return describe(error)
  }
}

type Outcome = { readonly kind: "sent"; readonly to: string } | { readonly kind: "error"; readonly text: string } | null

export const SignIn = (props: { readonly config: ConsoleConfig }) => {
  useTitle("Sign in")
  // Why the user is here again (a session that ended, a link that did not work), said once.
  const [notice] = useState(session.takeEndReason)
  const challenge = useChallenge(props.config.challengeSiteKey)
  const [email, setEmail] = useState("")
  const [busy, setBusy] = useState(false)
  const [outcome, setOutcome] = useState<Outcome>(null)
  const [password, setPassword] = useState({ email: "", password: "" })
  const [passwordError, setPasswordError] = useState<string | null>(null)
  const [organization, setOrganization] = useState(session.tenant() ?? "")
  const tenant = props.config.multiTenant ? organization.trim() : null
  /** Multi-tenant mode: the organization named, kept for the tab before the call that needs it. */
  const keepTenant = () => {
    if (tenant !== null) session.setTenant(tenant)
  }
  const organizationField = (id: string) =>
    props.config.multiTenant
      ? (
        <>
          <label for={id}>Organization</label>
          <input
            id={id}
            type="text"
            autocomplete="organization"
            required
            pattern={TENANT_PATTERN}
            maxLength={63}
            aria-describedby={`${id}-hint`}
            value={organization}
            onInput={(event) => setOrganization(event.currentTarget.value)}
          />
          <p id={`${id}-hint`} class="hint">Your organization's name in Plinth: lower-case letters, digits and underscores.</p>
        </>
      )
      : null

  const challengeToken = challenge.token === undefined ? {} : { challenge_token: challenge.token }

  const requestLink = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setOutcome(null)
    try {
      keepTenant()
      await clientFor().run((client) => client.mainApi.auth.requestMagicLink({ payload: { email: email.trim(), ...challengeToken } }))
      setOutcome({ kind: "sent", to: email.trim() })
    } catch (error) {
      setOutcome({ kind: "error", text: signInFailure(error, "link", tenant) })
    } finally {
      setBusy(false)
      if (props.config.challengeSiteKey !== null) challenge.reset()
    }
  }

  const signInWithPassword = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setPasswordError(null)
    try {
      keepTenant()
      const signedIn = await clientFor().run((client) =>
        client.mainApi.auth.login({ payload: { email: password.email.trim(), password: password.password, ...challengeToken } })
      )
      session.signIn(signedIn.token, signedIn.user)
    } catch (error) {
      setPasswordError(signInFailure(error, "password", tenant))
    } finally {
      setBusy(false)
      if (props.config.challengeSiteKey !== null) challenge.reset()
    }
  }

  return (
    <main class="narrow">
      <h1>Sign in to Plinth</h1>
      {notice !== null ? <Message kind="error">{notice}</Message> : null}
      {outcome?.kind === "sent"
        ? (
          <Message kind="status">
            Check your email: if {outcome.to} has an account, a sign-in link is on its way. It works once, for 15 minutes.
          </Message>
        )
        : null}
      <form onSubmit={requestLink} aria-labelledby="link-heading">
        <h2 id="link-heading">Get a sign-in link</h2>
        {organizationField("link-organization")}
        <label for="link-email">Email</label>
        <input id="link-email" type="email" autocomplete="email" required maxLength={320} value={email} onInput={(event) => setEmail(event.currentTarget.value)} />
        {challenge.widget}
        {challenge.failure !== null ? <Message kind="error">{challenge.failure}</Message> : null}
        {outcome?.kind === "error" ? <Message kind="error">{outcome.text}</Message> : null}
        <button type="submit" disabled={busy || !challenge.ready}>Email me a sign-in link</button>
      </form>
      {props.config.passwordSignIn
        ? (
          <form onSubmit={signInWithPassword} aria-labelledby="password-heading">
            <h2 id="password-heading">Or sign in with a password</h2>
            <p class="hint">Password sign-in is available outside production only.</p>
            {organizationField("password-organization")}
            <label for="password-email">Email</label>
            <input
              id="password-email"
              type="email"
              autocomplete="username"
              required
              maxLength={320}
              value={password.email}
              onInput={(event) => setPassword({ ...password, email: event.currentTarget.value })}
            />
            <label for="password-password">Password</label>
            <input
              id="password-password"
              type="password"
              autocomplete="current-password"
              required
              maxLength={1024}
              value={password.password}
              onInput={(event) => setPassword({ ...password, password: event.currentTarget.value })}
            />
            {passwordError !== null ? <Message kind="error">{passwordError}</Message> : null}
            <button type="submit" disabled={busy || !challenge.ready}>Sign in</button>
          </form>
        )
        : null}
    </main>
  )
}
