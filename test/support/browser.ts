/**
 * A headless Chromium for browser tests: the one `@sparticuz/chromium` installs from npm, driven by
 * playwright-core. Its own argument list turns web security off (for serverless scraping); that
 * flag is left out, so pages pass CORS like any browser's.
 */
import chromiumBinary from "@sparticuz/chromium"
import { type Browser, chromium } from "playwright-core"

export const launchBrowser = async (): Promise<Browser> =>
  chromium.launch({
    executablePath: await chromiumBinary.executablePath(),
    args: chromiumBinary.args.filter((arg) => arg !== "--disable-web-security"),
    headless: true
  })
