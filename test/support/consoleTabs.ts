/**
 * Tabs of the console for browser tests. Each tab is a browser context of its own (its own
 * sessionStorage: one person), left for `about:blank` after each test: a tab holds an event stream,
 * a browser opens few connections to one server, and closing the last context would take this
 * single-process Chromium with it.
 */
import type { Browser, BrowserContextOptions, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll } from "vitest"
import { type AuthStack, startAuthStack } from "./auth.ts"
import { launchBrowser } from "./browser.ts"
import { ensureConsoleBuilt } from "./build.ts"

/** Who a tab is signed in as: what the console's sign-in keeps. */
export interface SignedInPerson {
  readonly token: string
  readonly user: unknown
}

/** Signs `page` in as `who` the way the console's callback does (the session in sessionStorage), then opens `path` of the console at `consoleUrl`. */
export const signInTab = async (page: Page, consoleUrl: string, who: SignedInPerson, path: string): Promise<void> => {
  await page.goto(`${consoleUrl}/`)
  await page.evaluate(([token, user]) => {
    sessionStorage.setItem("plinth.token", token)
    sessionStorage.setItem("plinth.user", JSON.stringify(user))
  }, [who.token, who.user] as const)
  await page.goto(`${consoleUrl}${path}`)
}

/** Tabs opened in `browser()` (read when a tab opens: it is launched in beforeAll); `recycle` in afterEach. */
export const consoleTabs = (browser: () => Browser, consoleUrl: () => string) => {
  const opened: Array<Page> = []
  const newPage = async (options: BrowserContextOptions = {}): Promise<Page> => {
    const page = await (await browser().newContext(options)).newPage()
    opened.push(page)
    page.setDefaultTimeout(10_000)
    return page
  }
  return {
    newPage,
    /** A tab signed in as `who` (as the link would), on `path` of the console, dates in en-US and UTC. */
    openAs: async (who: SignedInPerson, path: string): Promise<Page> => {
      const page = await newPage({ locale: "en-US", timezoneId: "UTC" })
      await signInTab(page, consoleUrl(), who, path)
      return page
    },
    recycle: async () => {
      for (const page of opened.splice(0)) await page.goto("about:blank")
    }
  }
}

/**
 * A console test file's usual set-up, registered where it is called (before the file's own
 * `beforeAll`): the console built, an auth stack and a browser started, tabs recycled after each
 * test, and both closed after the file.
 */
export const consoleSuite = () => {
  const started = { stack: undefined as unknown as AuthStack, browser: undefined as unknown as Browser }
  beforeAll(async () => {
    await ensureConsoleBuilt()
    started.stack = await startAuthStack()
    started.browser = await launchBrowser()
  }, 120_000)
  afterAll(async () => {
    await started.browser?.close()
    await started.stack?.close()
  })
  const tabs = consoleTabs(() => started.browser, () => `${started.stack.main.url}/console`)
  afterEach(tabs.recycle)
  return Object.assign(started, { newPage: tabs.newPage, openAs: tabs.openAs })
}
