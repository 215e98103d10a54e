/**
 * The console's routes are paths under /console/ (the server answers index.html for each): moving
 * between screens changes the address without a page load, and the browser's back button works.
 */
import type { ComponentChildren, TargetedMouseEvent } from "preact"
import { useEffect, useState } from "preact/hooks"

export const BASE = "/console"

export interface Route {
  /** The path below /console, starting with `/`. */
  readonly path: string
  readonly query: URLSearchParams
}

const current = (): Route => {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : location.pathname
  return { path: path === "" ? "/" : path, query: new URLSearchParams(location.search) }
}

const listeners = new Set<() => void>()
const emit = () => listeners.forEach((listener) => listener())
addEventListener("popstate", emit)

/** Goes to `to` (a path below /console); `replace` keeps it out of the history (and drops what the address had). */
export const navigate = (to: string, replace = false) => {
  const url = `${BASE}${to}`
  if (replace) history.replaceState(null, "", url)
  else history.pushState(null, "", url)
  emit()
}

export const useRoute = (): Route => {
  const [route, setRoute] = useState(current)
  useEffect(() => {
    const update = () => setRoute(current())
    listeners.add(update)
    return () => {
      listeners.delete(update)
    }
  }, [])
  return route
}

/** A link to a screen of the console: an ordinary link, followed without a page load. */
export const Link = (props: { readonly to: string; readonly children: ComponentChildren; readonly current?: boolean; readonly class?: string }) => {
  const onClick = (event: TargetedMouseEvent<HTMLAnchorElement>) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
    event.preventDefault()
    navigate(props.to)
  }
  return (
    <a href={`${BASE}${props.to}`} onClick={onClick} aria-current={props.current === true ? "page" : undefined} class={props.class}>
      {props.children}
    </a>
  )
}
