/**
 * Page changes announced by the tab's one event stream (GET /events, `page_change`), for the
 * navigation and the open page to read their page again.
 */
import { useEffect, useRef } from "preact/hooks"

export interface PageChange {
  readonly schema: string
  readonly slug: string
}

const listeners = new Set<(change: PageChange) => void>()

/** The data of a `page_change` event, or null when it is not one. */
export const pageChangeOf = (data: string): PageChange | null => {
  try {
    const parsed: unknown = JSON.parse(data)
    if (typeof parsed !== "object" || parsed === null) return null
    const { schema, slug } = parsed as { schema?: unknown; slug?: unknown }
    return typeof schema === "string" && typeof slug === "string" ? { schema, slug } : null
  } catch {
    return null
  }
}

export const announcePageChange = (change: PageChange) => listeners.forEach((listener) => listener(change))

/** Calls `listener` (its latest version) for each page change while the component is shown. */
export const usePageChanges = (listener: (change: PageChange) => void) => {
  const latest = useRef(listener)
  latest.current = listener
  useEffect(() => {
    const call = (change: PageChange) => latest.current(change)
    listeners.add(call)
    return () => {
      listeners.delete(call)
    }
  }, [])
}
