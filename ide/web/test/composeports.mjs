// The Ports view of a Compose workspace (driven by
// TestBrowserPortsCompose in cmd/cove): a server of another service (db,
// its own container in the workspace's network) shows in the view
// without anything started in the IDE; Forward puts it on 127.0.0.1 of
// this machine.
// Usage: node composeports.mjs URL PORT. Prints "cove-test: fetch URL"
// and waits for a line on stdin (the Go test fetching it); prints "ok"
// last when every check passed.
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const [url, port] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const fail = async (msg) => {
  console.error(`composeports: ${msg}`);
  await browser.close();
  rl.close();
  process.exit(1);
};
const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const wait = (fn, arg, msg, timeout = 15000) =>
  page.waitForFunction(fn, arg, { timeout }).catch(async () => fail(typeof msg === "function" ? await msg() : msg));
const view = () => page.$eval("#ports", (p) => p.innerText).catch(() => "");

await page.goto(url);
await wait(() => window.cove?.shells?.length > 0, null, "no terminal");
await page.click("#ports-tab");
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"]`), port,
  async () => `the db service's port ${port} is not listed: ${await view()}`);
await page.click(`#ports .ports-row[data-port="${port}"] button.forward`);
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] a.open-link`), port, async () => `Forward did nothing: ${await view()}`, 10000);
const href = await page.$eval(`#ports .ports-row[data-port="${port}"] a.open-link`, (a) => a.href);
console.log(`cove-test: fetch ${href}`);
await lines.next();
await browser.close();
rl.close();
console.log("ok");
