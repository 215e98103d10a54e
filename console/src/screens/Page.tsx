/**
 * A page of the app (sys.pages_v): shown with PageView, read again when a `page_change` for it
 * arrives; owners and admins edit its source beside a live preview (the same PageView), with the
 * format's problems under the editor, and make new pages.
 */
import { useEffect, useState } from "preact/hooks"
import { parsePage, SLUG_PATTERN } from "../../../src/services/PageFormat.ts"
import { describe, sql } from "../api.ts"
import { Message, useTitle } from "../components.tsx"
import { PageView } from "../pages/PageView.tsx"
import { usePageChanges } from "../pages/pageChanges.ts"
import { type App, pagePath } from "../paths.ts"
import { Link, navigate } from "../router.tsx"

interface StoredPage {
  readonly slug: string
  readonly title: string
  readonly source: string
}

export const editPagePath = (schema: string, slug: string) => `${pagePath(schema, slug)}/edit`

/** The page `slug` of `app`, read again at each change of it; null while reading, "gone" when there is none. */
const useStoredPage = (app: string, slug: string, resyncs: number) => {
  const [page, setPage] = useState<StoredPage | "gone" | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [changes, setChanges] = useState(0)
  usePageChanges((change) => {
    if (change.schema === app && change.slug === slug) setChanges((count) => count + 1)
  })
  useEffect(() => {
    let live = true
    sql("SELECT slug, title, source FROM sys.pages_v WHERE schema_name = $1 AND slug = $2", [app, slug], app).then(
      (rows) => {
        if (!live) return
        setPage((rows[0] as StoredPage | undefined) ?? "gone")
        setError(null)
      },
      (failure) => live && setError(describe(failure))
    )
    return () => {
      live = false
    }
  }, [app, slug, changes, resyncs])
  return { page, error }
}

const titleOf = (page: StoredPage) => (page.title === "" ? page.slug : page.title)

export const PageScreen = (props: { readonly app: App; readonly slug: string; readonly params: URLSearchParams; readonly canEdit: boolean; readonly resyncs: number }) => {
  const { page, error } = useStoredPage(props.app.schema_name, props.slug, props.resyncs)
  useTitle(page !== null && page !== "gone" ? titleOf(page) : props.slug)
  return (
    <main>
      {page === null || page === "gone"
        ? (
          <>
            <h1 tabIndex={-1}>{props.slug}</h1>
            {error !== null ? <Message kind="error">The page could not be read: {error}</Message> : null}
            {page === "gone" ? <p>{props.app.display_name} has no page {props.slug}.</p> : error === null ? <p role="status">Loading…</p> : null}
          </>
        )
        : (
          <>
            <div class="page-heading">
              <h1 tabIndex={-1}>{titleOf(page)}</h1>
              {props.canEdit ? <Link to={editPagePath(props.app.schema_name, page.slug)}>Edit page</Link> : null}
            </div>
            {error !== null ? <Message kind="error">The page could not be read again: {error}</Message> : null}
            <PageView source={page.source} appSchema={props.app.schema_name} params={props.params} />
          </>
        )}
    </main>
  )
}

export const PageEditor = (props: { readonly app: App; readonly slug: string; readonly params: URLSearchParams; readonly resyncs: number }) => {
  const app = props.app.schema_name
  const { page, error } = useStoredPage(app, props.slug, props.resyncs)
  const [draft, setDraft] = useState<{ readonly title: string; readonly source: string } | null>(null)
  const [preview, setPreview] = useState<string | null>(null)
  const [note, setNote] = useState<{ readonly kind: "status" | "error"; readonly text: string } | null>(null)
  const [saving, setSaving] = useState(false)
  useTitle(`Edit ${props.slug}`)

  // The stored page is the draft's start; a change by someone else later does not overwrite what is typed.
  useEffect(() => {
    if (draft === null && page !== null && page !== "gone") {
      setDraft({ title: page.title, source: page.source })
      setPreview(page.source)
    }
  }, [page])
  // The preview follows the typing after a pause, so that the queries do not run at each keystroke.
  useEffect(() => {
    if (draft === null) return
    const timer = setTimeout(() => setPreview(draft.source), 400)
    return () => clearTimeout(timer)
  }, [draft?.source])

  const problems = draft === null ? [] : parsePage(draft.source).problems
  const save = async (event: Event) => {
    event.preventDefault()
    if (draft === null) return
    setSaving(true)
    try {
      await sql("SELECT sys.update_page($1, $2, $3)", [props.slug, draft.title, draft.source], app)
      setNote({ kind: "status", text: "The page was saved." })
    } catch (failure) {
      setNote({ kind: "error", text: `The page was not saved: ${describe(failure)}` })
    } finally {
      setSaving(false)
    }
  }

  if (draft === null) {
    return (
      <main>
        <h1 tabIndex={-1}>Edit {props.slug}</h1>
        {error !== null ? <Message kind="error">The page could not be read: {error}</Message> : null}
        {page === "gone" ? <p>{props.app.display_name} has no page {props.slug}.</p> : error === null ? <p role="status">Loading…</p> : null}
      </main>
    )
  }
  return (
    <main>
      <div class="page-heading">
        <h1 tabIndex={-1}>Edit {draft.title === "" ? props.slug : draft.title}</h1>
        <Link to={pagePath(app, props.slug)}>View page</Link>
      </div>
      <div class="page-editor">
        <form onSubmit={(event) => void save(event)} aria-label="Page editor">
          <label for="page-title">Title</label>
          <input id="page-title" value={draft.title} onInput={(event) => setDraft({ ...draft, title: event.currentTarget.value })} />
          <label for="page-source">Source</label>
          <textarea id="page-source" spellcheck={false} aria-describedby="page-problems" value={draft.source}
            onInput={(event) => setDraft({ ...draft, source: event.currentTarget.value })} />
          <section id="page-problems" aria-label="Problems">
            {problems.length === 0
              ? <p class="hint">No problems.</p>
              : (
                <ul class="problems">
                  {problems.map((problem, index) => <li key={index}>Line {problem.line}: {problem.message}</li>)}
                </ul>
              )}
          </section>
          {note !== null ? <Message kind={note.kind}>{note.text}</Message> : null}
          <button type="submit" disabled={saving}>Save page</button>
        </form>
        <section class="preview" aria-label="Preview">
          <h2>Preview</h2>
          {preview === null ? null : <PageView source={preview} appSchema={app} params={props.params} />}
        </section>
      </div>
    </main>
  )
}

const STARTER = (title: string) => `# ${title}\n`

export const NewPage = (props: { readonly app: App }) => {
  const [slug, setSlug] = useState("")
  const [title, setTitle] = useState("")
  const [error, setError] = useState<string | null>(null)
  const [saving, setSaving] = useState(false)
  useTitle("New page")
  const validSlug = SLUG_PATTERN.test(slug)
  const create = async (event: Event) => {
    event.preventDefault()
    if (!validSlug) {
      setError("The slug must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit.")
      return
    }
    setSaving(true)
    try {
      await sql("SELECT sys.create_page($1, $2, $3)", [slug, title, STARTER(title === "" ? slug : title)], props.app.schema_name)
      navigate(editPagePath(props.app.schema_name, slug))
    } catch (failure) {
      setError(describe(failure))
      setSaving(false)
    }
  }
  return (
    <main>
      <h1 tabIndex={-1}>New page</h1>
      <form onSubmit={(event) => void create(event)} aria-label="New page">
        <label for="new-page-title">Title</label>
        <input id="new-page-title" value={title} onInput={(event) => setTitle(event.currentTarget.value)} />
        <label for="new-page-slug">Slug</label>
        <input id="new-page-slug" value={slug} required aria-describedby="new-page-slug-hint" aria-invalid={error !== null && !validSlug ? true : undefined}
          onInput={(event) => setSlug(event.currentTarget.value)} />
        <p id="new-page-slug-hint" class="hint">The page's name in its address: lowercase letters, digits, _ and -.</p>
        {error !== null ? <Message kind="error">The page was not created: {error}</Message> : null}
        <button type="submit" disabled={saving}>Create page</button>
      </form>
    </main>
  )
}
