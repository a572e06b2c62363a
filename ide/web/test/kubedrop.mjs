// The IDE on a workspace that runs as a Kubernetes Pod (cove up --kube),
// in Debian's Chromium, across a silent drop of every connection between
// the launcher and the API server (the test drops them once this says
// "ready", and says "dropped" on stdin): the page's terminal is
// reconnected by itself, shows what it showed before (once), runs the
// next command in the same shell, and a save in the editor reaches the
// Pod (the test then finds it synchronised on the laptop).
// Usage: node kubedrop.mjs URL
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";

const [url] = process.argv.slice(2);
const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const fail = async (msg) => {
  console.error("kubedrop: " + msg);
  stdin.close();
await browser.close();
  process.exit(1);
};
// The browser is driven for at most this long: the test waits on it.
setTimeout(() => fail("not done within 90 s"), 90000).unref();
// shows counts the terminal's lines that match re.
const shows = (page, re) =>
  page.evaluate((src) => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    let n = 0;
    for (let i = 0; i < b.length; i++) if (new RegExp(src).test(b.getLine(i).translateToString(true))) n++;
    return n;
  }, re.source);
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector('.entry[data-path="main.c"]', { timeout: 20000 }).catch(() => fail("the tree does not list main.c"));
  await page.waitForFunction(() => window.cove?.shells?.[0]?.shell?.ws?.readyState === 1, null, { timeout: 20000 }).catch(() => fail("no terminal"));
  await page.click(".term-pane");
  await page.keyboard.type("echo before-$((6*7))\n");
  await page.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (/^before-42/.test(b.getLine(i).translateToString(true))) return true;
    return false;
  }, null, { timeout: 20000 }).catch(() => fail("the terminal did not run the first command"));
  await page.evaluate(() => (window.beforeDrop = window.cove.shells[0].shell.ws));
  console.log("ready");
  const said = await lines.next();
  if (said.value !== "dropped") await fail(`stdin said ${JSON.stringify(said.value)}`);
  const dropped = Date.now();
  await page.waitForFunction(() => {
    const ws = window.cove.shells[0].shell.ws;
    return ws !== window.beforeDrop && ws.readyState === 1;
  }, null, { timeout: 20000, polling: 50 }).catch(() => fail("the terminal did not reconnect within 20 s of the drop"));
  console.log(`terminal: reconnected ${Date.now() - dropped} ms after the drop`);
  await page.keyboard.type("echo after-$((6*8))\n");
  await page.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (/^after-48/.test(b.getLine(i).translateToString(true))) return true;
    return false;
  }, null, { timeout: 10000 }).catch(() => fail("the terminal did not run a command after the drop"));
  const before = await shows(page, /^before-42/);
  if (before !== 1) await fail(`the output from before the drop shows ${before} times`);
  console.log("terminal: the same shell after the drop");
  await page.click('.entry[data-path="main.c"]');
  await page.waitForSelector(".cm-content", { timeout: 10000 });
  await page.click(".cm-content");
  await page.keyboard.press("Control+End");
  await page.keyboard.type("// saved after the drop");
  await page.waitForSelector(".tab.dirty");
  await page.keyboard.press("Control+s");
  await page.waitForSelector(".tab.dirty", { state: "detached", timeout: 10000 }).catch(() => fail("the save after the drop did not finish"));
  console.log(`editor: saved ${Date.now() - dropped} ms after the drop`);
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
stdin.close();
await browser.close();
