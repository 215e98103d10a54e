/**
 * The signed-in console: the app switcher (sys.list_apps; the app is the X-App-Schema of every
 * call), the navigation drawn from introspection, the user's name and role, sign out, and the
 * screen of the address. One event stream per tab: `resync` refetches introspection, as does every
 * move to another screen (so a schema changed by someone else shows up).
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { type ConsoleConfig, describe, type Introspection, introspect, SESSION_ENDED, sql } from "../api.ts"
import { Message, roleLabel } from "../components.tsx"
import { useChanges } from "../changes.ts"
import { navigationOf } from "../navigation.ts"
import { announcePageChange, pageChangeOf, usePageChanges } from "../pages/pageChanges.ts"
import { type App, appPath, pagePath, tablePath } from "../paths.ts"
import { Link, navigate, type Route } from "../router.tsx"
import { isExpired, type Session, session } from "../session.ts"
import { Audit } from "./Audit.tsx"
import { ChatPanel } from "./Chat.tsx"
import { AppHome, NewApp } from "./Apps.tsx"
import { NewPage, PageEditor, PageScreen } from "./Page.tsx"
import { Permissions } from "./Permissions.tsx"
import { Profile } from "./Profile.tsx"
import { TableScreen } from "./Table.tsx"
import { Users } from "./Users.tsx"

const PUBLIC_APP: App = { schema_name: "public", display_name: "Public", description: "Tables outside any app." }
const APP_KEY = "plinth.app"
const CHAT_OPEN_KEY = "plinth.chat.open"

type Screen =
  | { readonly kind: "home"; readonly app: string | null }
  | { readonly kind: "table"; readonly app: string; readonly table: string }
  | { readonly kind: "page" | "edit-page"; readonly app: string; readonly slug: string }
  | { readonly kind: "new-page"; readonly app: string }
  | { readonly kind: "users" | "permissions" | "audit" | "profile" | "new-app" | "unknown" }

const decode = (part: string) => {
  try {
    return decodeURIComponent(part)
  } catch {
    return part
  }
}

const screenOf = (path: string): Screen => {
  const parts = path.split("/").filter((part) => part !== "").map(decode)
  if (parts.length === 0) return { kind: "home", app: null }
  if (parts[0] === "apps" && parts.length === 2) return { kind: "home", app: parts[1]! }
  if (parts[0] === "apps" && parts.length === 4 && parts[2] === "tables") return { kind: "table", app: parts[1]!, table: parts[3]! }
  if (parts[0] === "apps" && parts.length === 4 && parts[2] === "pages") return { kind: "page", app: parts[1]!, slug: parts[3]! }
  if (parts[0] === "apps" && parts.length === 5 && parts[2] === "pages" && parts[4] === "edit") return { kind: "edit-page", app: parts[1]!, slug: parts[3]! }
  if (parts[0] === "apps" && parts.length === 3 && parts[2] === "new-page") return { kind: "new-page", app: parts[1]! }
  const only = parts.length === 1 ? parts[0] : undefined
  if (only === "users" || only === "permissions" || only === "audit" || only === "profile" || only === "new-app") return { kind: only }
  return { kind: "unknown" }
}

const isManager = (role: string) => role === "owner" || role === "admin"

/** The tab's one event stream; `onResync` when the server says events may have been missed. */
const useEvents = (token: string, onResync: () => void) => {
  const resync = useRef(onResync)
  resync.current = onResync
  useEffect(() => {
    // EventSource sets no headers: the token and the tenant go in the address.
    const tenant = session.tenant()
    const events = new EventSource(`/events?token=${encodeURIComponent(token)}${tenant === null ? "" : `&tenant=${encodeURIComponent(tenant)}`}`)
    events.addEventListener("resync", () => resync.current())
    events.addEventListener("page_change", (event) => {
      const change = pageChangeOf(event.data)
      if (change !== null) announcePageChange(change)
    })
    // A stream refused for good (a 401: the token expired) ends the session; others reconnect by themselves.
    events.onerror = () => {
      if (events.readyState === EventSource.CLOSED && isExpired(token)) session.signOut(SESSION_ENDED)
    }
    return () => events.close()
  }, [token])
}

export const Shell = (props: { readonly config: ConsoleConfig; readonly session: Session; readonly route: Route }) => {
  const { user, token } = props.session
  const screen = screenOf(props.route.path)
  const [apps, setApps] = useState<ReadonlyArray<App> | null>(null)
  const [appsError, setAppsError] = useState<string | null>(null)
  const [schema, setSchema] = useState<Introspection | null>(null)
  const [schemaError, setSchemaError] = useState<string | null>(null)
  // The app the introspection shown is of (its home pages are that app's).
  const [schemaApp, setSchemaApp] = useState<string | null>(null)
  const [resyncs, setResyncs] = useState(0)
  const [appsVersion, setAppsVersion] = useState(0)
  // Rows changed on a table screen: its count (introspection's stats) is read again.
  const [rowChanges, setRowChanges] = useState(0)
  useEvents(token, () => setResyncs((count) => count + 1))
  // A change the chat made (a table, rows, a page): introspection and the pages are read again (`resyncs`), and an open table screen redrawn.
  const [changes, setChanges] = useState(0)
  useChanges(() => {
    setResyncs((count) => count + 1)
    setChanges((count) => count + 1)
  })
  const [chatOpen, setChatOpen] = useState(() => sessionStorage.getItem(CHAT_OPEN_KEY) === "true")
  const toggleChat = () => {
    sessionStorage.setItem(CHAT_OPEN_KEY, String(!chatOpen))
    setChatOpen(!chatOpen)
  }

  const routeApp = "app" in screen ? screen.app : null
  // The app last chosen in this tab, unless it is gone since.
  const stored = sessionStorage.getItem(APP_KEY)
  const storedApp = stored !== null && (apps === null || stored === "public" || apps.some((known) => known.schema_name === stored)) ? stored : "public"
  const app = routeApp ?? storedApp
  useEffect(() => {
    sessionStorage.setItem(APP_KEY, app)
  }, [app])

  // The app's pages, read again when one of them changes.
  const [pages, setPages] = useState<{ readonly app: string; readonly list: ReadonlyArray<{ readonly slug: string; readonly title: string }> } | null>(null)
  const [pageChanges, setPageChanges] = useState(0)
  usePageChanges((change) => {
    if (change.schema === app) setPageChanges((count) => count + 1)
  })
  useEffect(() => {
    let live = true
    sql("SELECT slug, title FROM sys.pages_v WHERE schema_name = $1 ORDER BY lower(coalesce(nullif(title, ''), slug)), slug", [app], app).then(
      (rows) => live && setPages({ app, list: rows as unknown as ReadonlyArray<{ slug: string; title: string }> }),
      () => live && setPages({ app, list: [] })
    )
    return () => {
      live = false
    }
  }, [app, pageChanges, resyncs])

  useEffect(() => {
    sql("SELECT schema_name, display_name, description FROM sys.list_apps()").then(
      (rows) => {
        setApps(rows as unknown as ReadonlyArray<App>)
        setAppsError(null)
      },
      (error) => setAppsError(describe(error))
    )
  }, [appsVersion, resyncs])

  // Every move between screens asks again: introspection is cached by the server, and a schema
  // changed by someone else shows up.
  useEffect(() => {
    let live = true
    introspect(app).then(
      (answer) => {
        if (!live) return
        setSchema(answer)
        setSchemaApp(app)
        setSchemaError(null)
      },
      (error) => live && setSchemaError(describe(error))
    )
    return () => {
      live = false
    }
  }, [app, props.route, resyncs, rowChanges])

  // Entering an app (the first screen, or the switcher) opens its home page for the user's role, if it has one.
  const entering = useRef<string | null>(null)
  const lastApp = useRef<string | null>(null)
  useEffect(() => {
    entering.current = screen.kind === "home" && lastApp.current !== app ? app : null
    lastApp.current = app
  }, [props.route])
  useEffect(() => {
    if (entering.current !== app || screen.kind !== "home" || schema === null || schemaApp !== app || pages?.app !== app) return
    entering.current = null
    const home = schema.app_metadata.home_page[user.role]
    if (home !== undefined && pages.list.some((page) => page.slug === home)) navigate(pagePath(app, home), true)
  }, [props.route, schema, schemaApp, pages])

  // A new screen: its heading gets the focus, so that a screen reader starts there.
  useEffect(() => {
    document.querySelector<HTMLElement>("main h1")?.focus()
  }, [props.route.path])

  const knownApps = [PUBLIC_APP, ...(apps ?? [])]
  const currentApp = knownApps.find((known) => known.schema_name === app) ?? { ...PUBLIC_APP, schema_name: app, display_name: app }
  const navigation = schema === null ? [] : navigationOf(schema.relations, app)
  const manager = isManager(user.role)
  const path = props.route.path

  const content = (() => {
    switch (screen.kind) {
      case "home":
        return <AppHome app={currentApp} navigation={navigation} error={schemaError} user={user} config={props.config} />
      case "table":
        // A change the chat made shows at once: the table screen reads its rows again.
        return <TableScreen key={`${app}/${screen.table}/${changes}`} app={currentApp} table={screen.table} navigation={navigation} schema={schema} onRowsChanged={() => setRowChanges((count) => count + 1)} />
      case "users":
        return manager ? <Users me={user} /> : <NotAllowed />
      case "permissions":
        return manager ? <Permissions key={app} app={currentApp} /> : <NotAllowed />
      case "audit":
        return manager ? <Audit /> : <NotAllowed />
      case "new-app":
        return manager ? <NewApp onCreated={(created) => {
          setAppsVersion((version) => version + 1)
          navigate(appPath(created))
        }} /> : <NotAllowed />
      case "page":
        return <PageScreen key={`${app}/${screen.slug}`} app={currentApp} slug={screen.slug} params={props.route.query} canEdit={manager} resyncs={resyncs} />
      case "edit-page":
        return manager ? <PageEditor key={`${app}/${screen.slug}`} app={currentApp} slug={screen.slug} params={props.route.query} resyncs={resyncs} /> : <NotAllowed />
      case "new-page":
        return manager ? <NewPage key={app} app={currentApp} /> : <NotAllowed />
      case "profile":
        return <Profile user={user} config={props.config} />
      case "unknown":
        return (
          <main>
            <h1 tabIndex={-1}>Page not found</h1>
            <p>There is no such page in the console. <Link to="/">Go to the start</Link>.</p>
          </main>
        )
    }
  })()

  return (
    <div class="shell">
      <header class="topbar">
        <Link to="/" class="brand">Plinth Console</Link>
        <div class="switcher">
          <label for="app-switcher">App</label>
          <select id="app-switcher" value={app} onChange={(event) => navigate(appPath(event.currentTarget.value))}>
            {knownApps.map((known) => <option key={known.schema_name} value={known.schema_name}>{known.display_name}</option>)}
          </select>
        </div>
        <p class="who">
          <span>{user.display_name === "" ? user.email : user.display_name}</span> <span class="role">({roleLabel(user.role)})</span>
        </p>
        {manager
          ? <button type="button" class="secondary" aria-expanded={chatOpen} aria-controls="chat-panel" onClick={toggleChat}>Chat</button>
          : null}
        <Link to="/profile" current={path === "/profile"}>Profile</Link>
        <button type="button" class="secondary" onClick={() => session.signOut()}>Sign out</button>
      </header>
      {appsError !== null ? <Message kind="error">The apps could not be listed: {appsError}</Message> : null}
      <div class="layout">
        <nav aria-label="Main">
          <h2>{currentApp.display_name}</h2>
          <ul>
            <li><Link to={appPath(app)} current={screen.kind === "home"}>Overview</Link></li>
          </ul>
          {pages !== null && pages.app === app && (pages.list.length > 0 || manager)
            ? (
              <section aria-label="Pages">
                <h3>Pages</h3>
                <ul>
                  {pages.list.map((page) => (
                    <li key={page.slug}>
                      <Link to={pagePath(app, page.slug)} current={(screen.kind === "page" || screen.kind === "edit-page") && screen.slug === page.slug}>
                        {page.title === "" ? page.slug : page.title}
                      </Link>
                    </li>
                  ))}
                  {manager ? <li><Link to={`${appPath(app)}/new-page`} current={screen.kind === "new-page"}>New page</Link></li> : null}
                </ul>
              </section>
            )
            : null}
          {schema === null && schemaError === null ? <p role="status" class="hint">Loading tables…</p> : null}
          {navigation.map((group) => (
            <section key={group.schema} aria-label={group.schema === app ? "Tables" : `Tables of ${group.schema}`}>
              <h3>{group.schema === app ? "Tables" : group.schema === "public" ? "Shared tables" : group.schema}</h3>
              <ul>
                {group.entries.map((entry) => (
                  <li key={`${entry.schema}.${entry.name}`}>
                    <Link to={tablePath(app, entry.name)} current={screen.kind === "table" && screen.table === entry.name}>{entry.label}</Link>
                  </li>
                ))}
              </ul>
            </section>
          ))}
          {manager
            ? (
              <section aria-label="Administration">
                <h3>Administration</h3>
                <ul>
                  <li><Link to="/new-app" current={path === "/new-app"}>New app</Link></li>
                  <li><Link to="/users" current={path === "/users"}>Users</Link></li>
                  <li><Link to="/permissions" current={path === "/permissions"}>Permissions</Link></li>
                  <li><Link to="/audit" current={path === "/audit"}>Audit</Link></li>
                </ul>
              </section>
            )
            : null}
        </nav>
        {content}
        {manager && chatOpen ? <div id="chat-panel" class="chat-panel"><ChatPanel app={app} /></div> : null}
      </div>
    </div>
  )
}

const NotAllowed = () => (
  <main>
    <h1 tabIndex={-1}>Not allowed</h1>
    <p>Only owners and admins may see this page. <Link to="/">Go to the start</Link>.</p>
  </main>
)
