/**
 * The sign-in screen says a refused sign-in in words (issue #25, screen 1) with the bot check
 * configured (CHALLENGE_SECRET and CHALLENGE_SITE_KEY, verified by the fake siteverify of
 * test/support): a token the check refuses (403), and a wrong password (401). The rate limit's 429
 * with its wait is Console.test.ts's. The Turnstile script is served to the browser by the test: a
 * widget that hands over the token the test names.
 */
import type { Browser, Page } from "playwright-core"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { type AuthStack, inviteAsDatabaseAdmin, startAuthStack } from "../support/auth.ts"
import { launchBrowser } from "../support/browser.ts"
import { ensureConsoleBuilt } from "../support/build.ts"
import { consoleTabs } from "../support/consoleTabs.ts"
import { type FakeSiteverify, startFakeSiteverify } from "../support/FakeSiteverify.ts"

let siteverify: FakeSiteverify
let stack: AuthStack
let browser: Browser

beforeAll(async () => {
  await ensureConsoleBuilt()
  siteverify = await startFakeSiteverify()
  stack = await startAuthStack({
    CHALLENGE_SECRET: "turnstile-secret-for-the-console",
    CHALLENGE_SITE_KEY: "0x4AAAAAAA-console-site-key",
    CHALLENGE_VERIFY_URL: siteverify.url
  })
  browser = await launchBrowser()
}, 120_000)
afterAll(async () => {
  await browser?.close()
  await stack?.close()
  await siteverify?.close()
})

const { newPage, recycle } = consoleTabs(() => browser, () => `${stack.main.url}/console`)
afterEach(recycle)

/** The sign-in screen, its bot check a stand-in widget that passes `token` on (again after each reset). */
const signInScreen = async (token: string): Promise<Page> => {
  const page = await newPage()
  await page.route("https://challenges.cloudflare.com/**", (route) =>
    route.fulfill({
      contentType: "text/javascript",
      body: `window.turnstile = {
        render: (element, options) => { window.__widget = options; setTimeout(() => options.callback(${JSON.stringify(token)})); return "widget" },
        reset: () => setTimeout(() => window.__widget.callback(${JSON.stringify(token)})),
        remove: () => {}
      }`
    }))
  await page.goto(`${stack.main.url}/console/`)
  return page
}

describe("sign-in errors in words, with the bot check configured", () => {
  it("a token the bot check refuses (403) is said in a sentence", async () => {
    const email = "refused-check@plinth.test"
    await inviteAsDatabaseAdmin(stack.db, email, "member")
    const page = await signInScreen("refused-token")
    const form = page.getByRole("form", { name: "Get a sign-in link" })
    await form.getByLabel("Email").fill(email)
    const send = form.getByRole("button", { name: "Email me a sign-in link" })
    await send.click()
    expect(await form.getByRole("alert").textContent()).toBe("The bot check failed. Please complete it again and retry.")
    // The server asked the check about the widget's token, and mailed nothing.
    expect(siteverify.calls.map((call) => call.response)).toContain("refused-token")
    expect(stack.mail.messages.filter((message) => message.to === email)).toEqual([])
  })

  it("a wrong password (401) is said in a sentence; a token the check passes gets that far", async () => {
    const email = "wrong-password@plinth.test"
    await inviteAsDatabaseAdmin(stack.db, email, "member")
    const page = await signInScreen("pass-token")
    const form = page.getByRole("form", { name: "Or sign in with a password" })
    await form.getByLabel("Email").fill(email)
    await form.getByLabel("Password").fill("not the password")
    await form.getByRole("button", { name: "Sign in" }).click()
    expect(await form.getByRole("alert").textContent()).toBe("Wrong email or password.")
  })
})
