// open launches Debian's Chromium (playwright-core, no browser download)
// with a page in it, for a browser test named name, and gives the
// helpers every test script wants:
//   fail(msg): prints "NAME: msg", saves the page as COVE_FAIL_SHOT when
//     that is set (what the page showed is the first clue in a CI log),
//     closes the browser and exits 1;
//   wait(fn, arg, msg, timeout): page.waitForFunction, failing with msg
//     (a string, or an async function giving one: read only on failure)
//     when fn is not true in time;
//   shellReady(p = page, why): waits up to firstShellWait for p's first
//     terminal, failing with what p says of its terminals.
// A failure's message ends with what the pages did on the network
// (trace.mjs).
// Options: args, more Chromium flags; viewport, the page's size
// (Playwright's 1280×720 if unset); timeout, wait's default in ms;
// onFail, run before the browser closes on a failure (a readline to
// close, say).
import { chromium } from "playwright-core";
import { firstShellWait, shellState, traceContext, traced } from "./trace.mjs";

// flags keep a headless Chromium to itself: no GPU, no sandbox (the
// tests run as root too), and no traffic of its own besides the page's.
const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run"];

export async function open(name, { args = [], viewport, timeout = 15000, onFail } = {}) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: [...flags, ...args],
  });
  // A context of its own, not browser.newPage's: a script may open more
  // pages in it (page.context().newPage()).
  const ctx = await browser.newContext(viewport ? { viewport } : {});
  traceContext(ctx);
  const page = await ctx.newPage();
  const fail = async (msg) => {
    console.error(`${name}: ${msg}\n${traced()}`);
    if (process.env.COVE_FAIL_SHOT) await page.screenshot({ path: process.env.COVE_FAIL_SHOT }).catch(() => {});
    if (onFail) await onFail();
    await browser.close();
    process.exit(1);
  };
  const wait = (fn, arg, msg, ms = timeout) =>
    page.waitForFunction(fn, arg, { timeout: ms }).catch(async () => fail(typeof msg === "function" ? await msg() : msg));
  const shellReady = (p = page, why = "no terminal") =>
    p.waitForFunction(() => window.cove?.shells[0]?.shell.id, null, { timeout: firstShellWait }).catch(async () => fail(`${why}: ${await shellState(p)}`));
  return { browser, page, fail, wait, shellReady };
}
