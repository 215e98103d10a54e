/**
 * Signing in: an email address gets a sign-in link (POST /auth/magic-link), with the bot check when
 * the deployment has one; outside production, a password form too (POST /auth/login).
 */
import { useState } from "preact/hooks"
import { type ConsoleConfig, clientFor, describe, errorTag } from "../api.ts"
import { useChallenge } from "../Challenge.tsx"
import { Message, useTitle } from "../components.tsx"
import { session } from "../session.ts"

/** The words for a failed sign-in request, by what the server answered. */
const signInFailure = (error: unknown, what: "link" | "password"): string => {
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

  const challengeToken = challenge.token === undefined ? {} : { challenge_token: challenge.token }

  const requestLink = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setOutcome(null)
    try {
      await clientFor().run((client) => client.mainApi.auth.requestMagicLink({ payload: { email: email.trim(), ...challengeToken } }))
      setOutcome({ kind: "sent", to: email.trim() })
    } catch (error) {
      setOutcome({ kind: "error", text: signInFailure(error, "link") })
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
      const signedIn = await clientFor().run((client) =>
        client.mainApi.auth.login({ payload: { email: password.email.trim(), password: password.password, ...challengeToken } })
      )
      session.signIn(signedIn.token, signedIn.user)
    } catch (error) {
      setPasswordError(signInFailure(error, "password"))
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
