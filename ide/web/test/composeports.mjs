// The Ports view of a Compose workspace (driven by
// TestBrowserPortsCompose in cmd/cove): a server of another service (db,
// its own container in the workspace's network) shows in the view
// without anything started in the IDE; Forward puts it on 127.0.0.1 of
// this machine.
// Usage: node composeports.mjs URL PORT. Prints "cove-test: fetch URL"
// and waits for a line on stdin (the Go test fetching it); prints "ok"
// last when every check passed.
import { open } from "./browser.mjs";
import { createInterface } from "node:readline";

const [url, port] = process.argv.slice(2);
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const { browser, page, fail, wait, shellReady } = await open("composeports", { viewport: { width: 1280, height: 800 }, onFail: () => rl.close() });
// The view as one line: the first lines of a failure are what a run keeps.
const view = () => page.$eval("#ports", (p) => p.innerText.split("\n").filter(Boolean).join(" | ")).catch(() => "");

await page.goto(url);
// The Ports view first, then the first terminal: a failure of either says
// which part of the workspace the page could not reach (stop 36's CI
// waited in vain for the terminal, and said nothing of the rest).
await wait(() => window.cove, null, "the page did not start", 60000);
await page.click("#ports-tab");
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"]`), port,
  async () => `the db service's port ${port} is not listed: ${await view()}`, 60000);
await page.click(`#ports .ports-row[data-port="${port}"] button.forward`);
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] a.open-link`), port, async () => `Forward did nothing: ${await view()}`, 30000);
const href = await page.$eval(`#ports .ports-row[data-port="${port}"] a.open-link`, (a) => a.href);
await shellReady(page, "the Ports view works, but no terminal");
console.log(`cove-test: fetch ${href}`);
await lines.next();
await browser.close();
rl.close();
console.log("ok");
