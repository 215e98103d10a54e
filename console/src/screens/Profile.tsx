/**
 * The signed-in user's profile: their display name (sys.update_profile), their email address (a
 * confirmation link goes to the new one: POST /auth/change-email), and, while they have none and
 * password sign-in exists, a first password (POST /auth/set-password).
 */
import { useState } from "preact/hooks"
import { call, type ConsoleConfig, describe, sql } from "../api.ts"
import { Message, roleLabel, useTitle } from "../components.tsx"
import { session, type User } from "../session.ts"

type Note = { readonly kind: "status" | "error"; readonly text: string } | null

const useForm = () => {
  const [busy, setBusy] = useState(false)
  const [note, setNote] = useState<Note>(null)
  const submit = async (run: () => Promise<string>) => {
    setBusy(true)
    setNote(null)
    try {
      setNote({ kind: "status", text: await run() })
    } catch (error) {
      setNote({ kind: "error", text: describe(error) })
    } finally {
      setBusy(false)
    }
  }
  return { busy, note, submit }
}

export const Profile = (props: { readonly user: User; readonly config: ConsoleConfig }) => {
  useTitle("Profile")
  const [name, setName] = useState(props.user.display_name)
  const [email, setEmail] = useState("")
  const [password, setPassword] = useState("")
  const nameForm = useForm()
  const emailForm = useForm()
  const passwordForm = useForm()

  const saveName = (event: Event) => {
    event.preventDefault()
    void nameForm.submit(async () => {
      const rows = await sql("SELECT id, email, display_name, role, needs_password FROM sys.update_profile(NULL, $1)", [name.trim()])
      const updated = rows[0] as unknown as User | undefined
      if (updated !== undefined) session.updateUser({ ...props.user, display_name: updated.display_name })
      return "Your name is saved."
    })
  }
  const changeEmail = (event: Event) => {
    event.preventDefault()
    const address = email.trim()
    void emailForm.submit(async () => {
      await call((client) => client.run((c) => c.mainApi.account.requestEmailChange({ payload: { email: address } })))
      setEmail("")
      return `A confirmation link was sent to ${address}. Your address changes once you follow it.`
    })
  }
  const setFirstPassword = (event: Event) => {
    event.preventDefault()
    void passwordForm.submit(async () => {
      const answer = await call((client) => client.run((c) => c.mainApi.account.setPassword({ payload: { password } })))
      setPassword("")
      session.signIn(answer.token, { ...props.user, needs_password: false })
      return "Your password is set."
    })
  }

  return (
    <main>
      <h1 tabIndex={-1}>Profile</h1>
      <p>Signed in as {props.user.email}, {roleLabel(props.user.role).toLowerCase()}.</p>
      <form onSubmit={saveName} aria-labelledby="name-heading" class="stacked">
        <h2 id="name-heading">Your name</h2>
        <label for="profile-name">Display name</label>
        <input id="profile-name" autocomplete="name" maxLength={200} value={name} onInput={(event) => setName(event.currentTarget.value)} />
        {nameForm.note !== null ? <Message kind={nameForm.note.kind}>{nameForm.note.text}</Message> : null}
        <button type="submit" disabled={nameForm.busy}>Save name</button>
      </form>
      <form onSubmit={changeEmail} aria-labelledby="email-heading" class="stacked">
        <h2 id="email-heading">Your email address</h2>
        <label for="profile-email">New email address</label>
        <input id="profile-email" type="email" autocomplete="email" required maxLength={320} value={email} onInput={(event) => setEmail(event.currentTarget.value)} />
        {emailForm.note !== null ? <Message kind={emailForm.note.kind}>{emailForm.note.text}</Message> : null}
        <button type="submit" disabled={emailForm.busy}>Send confirmation link</button>
      </form>
      {props.user.needs_password && props.config.passwordSignIn
        ? (
          <form onSubmit={setFirstPassword} aria-labelledby="password-heading" class="stacked">
            <h2 id="password-heading">Set a password</h2>
            <p class="hint">Optional: sign in with it instead of a link. 8 to 128 characters.</p>
            <label for="profile-password">New password</label>
            <input
              id="profile-password"
              type="password"
              autocomplete="new-password"
              required
              minLength={8}
              maxLength={128}
              value={password}
              onInput={(event) => setPassword(event.currentTarget.value)}
            />
            <button type="submit" disabled={passwordForm.busy}>Set password</button>
          </form>
        )
        : null}
      {/* Outside the form, which goes once the password is set. */}
      {passwordForm.note !== null ? <Message kind={passwordForm.note.kind}>{passwordForm.note.text}</Message> : null}
    </main>
  )
}
