/**
 * Where a link of an email lands: `/console/auth/callback?token=` (sign-in, invitation) or
 * `/console/auth/confirm-email?token=` (an email change), with `&tenant=` in a multi-tenant
 * deployment. The token and the tenant leave the address at once (replaced in the history), the
 * tenant is kept for the tab, the token is verified in it, and the user is signed in.
 */
import { useEffect, useRef } from "preact/hooks"
import { clientFor, describe, errorTag } from "../api.ts"
import { navigate } from "../router.tsx"
import { session } from "../session.ts"

const linkFailure = (error: unknown, kind: "sign-in" | "email"): string => {
  if (errorTag(error) === "Unauthorized") {
    return kind === "email"
      ? "This confirmation link is invalid, already used or expired. Please ask for the change again from your profile."
      : "This sign-in link is invalid, already used or expired. Please ask for a new one below."
  }
  if (errorTag(error) === "Conflict") return "Another account has this email address now, so it was not changed."
  return describe(error)
}

/** Back to the start, where the sign-in screen (or, signed in, the console) says what happened. */
const failed = (text: string) => {
  session.say(text)
  navigate("/", true)
}

export const Callback = (props: { readonly kind: "sign-in" | "email"; readonly token: string | null; readonly tenant: string | null }) => {
  const started = useRef(false)
  useEffect(() => {
    if (started.current) return
    started.current = true
    const token = props.token
    if (token === null) return failed("This link has no token. Please ask for a new one below.")
    // The token is spent once verified: it has no place in the address bar or the history.
    history.replaceState(null, "", location.pathname)
    // The link's tenant is the one its token was issued in: every call from now on names it.
    if (props.tenant !== null && props.tenant !== "") session.setTenant(props.tenant)
    const verify = props.kind === "email"
      ? clientFor().run((client) => client.mainApi.auth.verifyEmailChange({ payload: { token } }))
      : clientFor().run((client) => client.mainApi.auth.verifyMagicLink({ payload: { token } }))
    verify.then(
      (signedIn) => {
        session.signIn(signedIn.token, signedIn.user)
        navigate(props.kind === "email" ? "/profile" : "/", true)
      },
      (error) => failed(linkFailure(error, props.kind))
    )
  }, [])
  return (
    <main class="narrow">
      <h1>Signing you in…</h1>
      <p role="status">Checking your link.</p>
    </main>
  )
}
