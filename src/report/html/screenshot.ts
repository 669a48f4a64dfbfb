/**
 * report.png: a full-page screenshot of report.html in Debian's chromium through
 * playwright-core (no downloaded browser), for a look at the charts without a browser.
 *
 * Chromium always ends with the call: closed in a finally block. On Ctrl-C / SIGTERM it is
 * closed by the orchestrator's own shutdown (onShutdown, awaited before the exit) where
 * memlane's signal handlers are installed, else by playwright's handlers (handleSIGINT &
 * co.); on any other exit an 'exit' hook SIGKILLs chromium's processes and waits for them
 * before removing the profile. The profile and chromium's own TMPDIR live in one fresh
 * temporary directory (inside the run's scratch directory for `memlane run`, when its path
 * is short enough for chromium's socket), removed afterwards, on exit too.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { BrowserContext, Page } from "playwright-core";
import { onShutdown, shutdownHandlersInstalled } from "../../workers/cleanup.ts";
import { killChromiumSync } from "./chromium-procs.ts";

export const CHROMIUM = "/usr/bin/chromium";
export const CHROMIUM_ARGS = Object.freeze([
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
]);
export const VIEWPORT = Object.freeze({ width: 1280, height: 900 });

/** Why no screenshot can be taken here, or null when chromium is there. */
export function screenshotUnavailable(executablePath = CHROMIUM): string | null {
  return existsSync(executablePath) ? null : `${executablePath} is missing (scripts/bootstrap.sh installs the chromium package as root)`;
}

/** Options of {@link openBrowser}. */
export interface BrowserOptions {
  executablePath?: string;
  /**
   * Where the profile goes and chromium's TMPDIR (default: os.tmpdir()); a run passes its
   * scratch directory, so that even a SIGKILLed orchestrator leaves nothing outside the run.
   * A directory too deep for chromium's socket gives way to the OS temp dir (chromiumTmpBase).
   */
  tmpDir?: string;
}

/**
 * Chromium places a Unix socket at $TMPDIR/.org.chromium.Chromium.XXXXXX/SingletonSocket, and
 * a socket path has at most 107 bytes: under a deeper TMPDIR chromium does not start. Our
 * directory adds "/memlane-chromium-XXXXXX" to the base; 24 + 46 bytes in all.
 */
const SOCKET_PATH_MAX = 107;
const ADDED_BY_US_AND_CHROMIUM = 24 + 46;

/** `preferred` when chromium's socket fits under it, else the OS temp dir (else /tmp). */
export function chromiumTmpBase(preferred: string): string {
  for (const base of [preferred, tmpdir(), "/tmp"]) {
    if (Buffer.byteLength(base) + ADDED_BY_US_AND_CHROMIUM <= SOCKET_PATH_MAX) return base;
  }
  return "/tmp";
}

/**
 * A headless chromium context with a fresh profile; `close()` closes chromium and removes
 * the profile and chromium's temporary files (safe to call twice).
 */
export async function openBrowser(options: BrowserOptions | string = {}): Promise<{ context: BrowserContext; close(): Promise<void> }> {
  const { executablePath = CHROMIUM, tmpDir = tmpdir() } = typeof options === "string" ? { executablePath: options } : options;
  const { chromium } = await import("playwright-core");
  // The removal is registered before the directory exists: a Ctrl-C while chromium starts
  // (the await below) once left $TMPDIR/memlane-chromium-* behind in 7 runs of 8.
  // One directory holds the profile and is chromium's TMPDIR (its .org.chromium.* folder
  // and socket), so removing it removes everything chromium left.
  let scratch: string | undefined;
  let profile: string | undefined;
  const removeProfile = (): void => {
    if (scratch === undefined) return;
    try {
      rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // a leftover temporary directory is not worth failing an exit for
    }
  };
  // On exit chromium may still be running (playwright's own exit hook only sends SIGKILL),
  // and a dying chromium writes its profile again after a removal: stop it first.
  const onExit = (): void => {
    if (profile !== undefined) killChromiumSync(profile);
    removeProfile();
  };
  process.once("exit", onExit);
  // Absolute, as playwright passes it to chromium: the exit hook finds chromium by this path.
  scratch = mkdtempSync(join(resolve(chromiumTmpBase(tmpDir)), "memlane-chromium-"));
  profile = join(scratch, "profile");
  // Where memlane's shutdown handlers own SIGINT/SIGTERM, playwright's must not race them to
  // process.exit (CI saw the exit win over chromium's close, and the profile stay): the
  // shutdown closes chromium itself, and waits for it, before it exits.
  const ownSignals = !shutdownHandlersInstalled();
  const launching = chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [...CHROMIUM_ARGS],
    viewport: { ...VIEWPORT },
    env: { ...process.env, TMPDIR: scratch },
    handleSIGINT: ownSignals,
    handleSIGTERM: ownSignals,
    handleSIGHUP: true,
  });
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= launching
      .then((context) => context.close())
      .catch(() => {})
      .finally(() => {
        forgetShutdown();
        process.removeListener("exit", onExit);
        removeProfile();
      }));
  const forgetShutdown = onShutdown(close);
  let context: BrowserContext;
  try {
    context = await launching;
  } catch (err) {
    await close();
    throw err;
  }
  return { context, close };
}

/** Waits until the report's page script says every chart is drawn (window.__memlane). */
export async function waitForCharts(page: Page, timeoutMs = 30_000): Promise<void> {
  // Page-side code as a string: this project's tsconfig has no DOM lib.
  await page.waitForFunction("window.__memlane && window.__memlane.rendered === true", null, { timeout: timeoutMs });
}

/** Full-page screenshot of `page` once its charts are drawn. */
export async function screenshotPage(page: Page, pngPath: string): Promise<string> {
  await waitForCharts(page);
  // The page draws with animation off; two frames let the last layout reach the canvas.
  await page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))");
  await page.screenshot({ path: pngPath, fullPage: true });
  return pngPath;
}

/**
 * Screenshots `htmlPath` into `pngPath` (full page). Rejects if chromium is missing or the
 * page does not render; chromium is closed either way.
 */
export async function screenshotReport(htmlPath: string, pngPath: string, options: BrowserOptions = {}): Promise<string> {
  const why = screenshotUnavailable(options.executablePath);
  if (why) throw new Error(`cannot screenshot ${htmlPath}: ${why}`);
  const browser = await openBrowser(options);
  try {
    const page = await browser.context.newPage();
    await page.goto(pathToFileURL(htmlPath).href);
    return await screenshotPage(page, pngPath);
  } finally {
    await browser.close();
  }
}
