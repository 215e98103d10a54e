/** The console: its configuration, then the screen of the address for who is (or is not) signed in. */
import { useEffect, useState } from "preact/hooks"
import { type ConsoleConfig, loadConfig } from "./api.ts"
import { useRoute } from "./router.tsx"
import { Callback } from "./screens/Callback.tsx"
import { Shell } from "./screens/Shell.tsx"
import { SignIn } from "./screens/SignIn.tsx"
import { useSession } from "./session.ts"

export const App = () => {
  const route = useRoute()
  const current = useSession()
  const [config, setConfig] = useState<ConsoleConfig | null>(null)
  const [failed, setFailed] = useState(false)
  useEffect(() => {
    loadConfig().then(setConfig, () => setFailed(true))
  }, [])

  // A link's token is taken from the address at once, before anything else runs.
  if (route.path === "/auth/callback" || route.path === "/auth/confirm-email") {
    return <Callback kind={route.path === "/auth/callback" ? "sign-in" : "email"} token={route.query.get("token")} tenant={route.query.get("tenant")} />
  }
  if (failed) {
    return (
      <main class="narrow">
        <h1>Plinth Console</h1>
        <p role="alert">The console could not reach its server. Please reload the page.</p>
      </main>
    )
  }
  if (config === null) {
    return (
      <main class="narrow">
        <h1>Plinth Console</h1>
        <p role="status">Loading…</p>
      </main>
    )
  }
  if (current === null) return <SignIn config={config} />
  return <Shell config={config} session={current} route={route} />
}
