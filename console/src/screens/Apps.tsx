/** An app's overview and the form that creates an app. */
import { useState } from "preact/hooks"
import { type ConsoleConfig, describe, sql } from "../api.ts"
import { Message, useTitle } from "../components.tsx"
import type { NavEntry } from "../navigation.ts"
import { Link } from "../router.tsx"
import type { User } from "../session.ts"
import { type App, tablePath } from "../paths.ts"

type Navigation = ReadonlyArray<{ readonly schema: string; readonly entries: ReadonlyArray<NavEntry> }>

export const AppHome = (props: {
  readonly app: App
  readonly navigation: Navigation
  readonly error: string | null
  readonly user: User
  readonly config: ConsoleConfig
}) => {
  useTitle(props.app.display_name)
  const own = props.navigation.find((group) => group.schema === props.app.schema_name)?.entries ?? []
  return (
    <main>
      <h1 tabIndex={-1}>{props.app.display_name}</h1>
      {props.app.description !== "" ? <p>{props.app.description}</p> : null}
      {props.error !== null ? <Message kind="error">The app's tables could not be read: {props.error}</Message> : null}
      {props.user.needs_password && props.config.passwordSignIn
        ? <p class="hint">You have no password yet. You may set one in your <Link to="/profile">profile</Link>.</p>
        : null}
      <h2>Tables</h2>
      {own.length === 0
        ? <p>This app has no tables yet.</p>
        : (
          <ul class="cards">
            {own.map((entry) => (
              <li key={entry.name}>
                <Link to={tablePath(props.app.schema_name, entry.name)}>{entry.label}</Link>
                {entry.writeTo === null ? <span class="hint"> (read only)</span> : null}
              </li>
            ))}
          </ul>
        )}
    </main>
  )
}

const SCHEMA_NAME = "^[a-z][a-z0-9_]{0,62}$"

export const NewApp = (props: { readonly onCreated: (schema: string) => void }) => {
  useTitle("New app")
  const [form, setForm] = useState({ schema: "", name: "", description: "" })
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const create = async (event: Event) => {
    event.preventDefault()
    setBusy(true)
    setError(null)
    try {
      await sql("SELECT sys.create_app($1, $2, $3)", [form.schema.trim(), form.name.trim(), form.description.trim()])
      props.onCreated(form.schema.trim())
    } catch (failure) {
      setError(describe(failure))
    } finally {
      setBusy(false)
    }
  }
  return (
    <main>
      <h1 tabIndex={-1}>New app</h1>
      <p>An app is a schema of its own, with its tables, pages and permissions.</p>
      <form onSubmit={create} aria-labelledby="new-app-heading" class="stacked">
        <h2 id="new-app-heading">Create an app</h2>
        <label for="app-name">Name</label>
        <input id="app-name" required maxLength={200} value={form.name} onInput={(event) => setForm({ ...form, name: event.currentTarget.value })} />
        <label for="app-schema">Schema name</label>
        <input
          id="app-schema"
          required
          pattern={SCHEMA_NAME}
          maxLength={63}
          aria-describedby="app-schema-hint"
          value={form.schema}
          onInput={(event) => setForm({ ...form, schema: event.currentTarget.value })}
        />
        <p id="app-schema-hint" class="hint">Lower-case letters, digits and underscores, starting with a letter (e.g. crm).</p>
        <label for="app-description">Description</label>
        <textarea id="app-description" rows={3} maxLength={2000} value={form.description} onInput={(event) => setForm({ ...form, description: event.currentTarget.value })} />
        {error !== null ? <Message kind="error">{error}</Message> : null}
        <button type="submit" disabled={busy}>Create app</button>
      </form>
    </main>
  )
}
