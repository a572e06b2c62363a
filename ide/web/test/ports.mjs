// The Ports view in Debian's Chromium (driven by TestBrowserPortsView in
// cmd/cove): a server started in a terminal of the running workspace
// (busybox httpd, under a process name made of HTML) shows in the view,
// its name as text; Forward puts it on 127.0.0.1 of this machine, Open
// opens it in a new window, which shows the server's page; Stop ends the
// forward, and its port no longer answers. A port published with cove up
// -p is listed, marked as such, with its address; forwardPorts' too.
// Usage: node ports.mjs URL PORT BODY PUBLISHED (PORT: where the test's
// server is to listen in the workspace; BODY: what its page says;
// PUBLISHED: CTR=HOST of a -p port, listening before the page opens;
// DECLARED: a port of devcontainer.json's forwardPorts, "-" for none).
// Prints "cove-test: fetch URL" and waits for a line on stdin (the Go
// test fetching it); prints "ok" last when every check passed.
import { open } from "./browser.mjs";
import { createInterface } from "node:readline";

const [url, port, body, published, declared] = process.argv.slice(2);
const [pubCtr, pubHost] = published.split("=");
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const { browser, page, fail, wait, shellReady } = await open("ports", { viewport: { width: 1280, height: 800 }, onFail: () => rl.close() });
const ctx = page.context();
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));
page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
// The view as one line: the first lines of a failure are what a run keeps.
const view = () => page.$eval("#ports", (p) => p.innerText.split("\n").filter(Boolean).join(" | ")).catch(() => "");

await page.goto(url);
await shellReady();

// The -p port: listed, marked, with where it is.
await page.click("#ports-tab");
await wait(() => !document.querySelector("#ports").hidden && document.querySelector("#ports").getBoundingClientRect().height > 40, null, "the Ports tab did not show the view");
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] .source`)?.textContent === "-p", pubCtr,
  async () => `no -p row for port ${pubCtr}: ${await view()}`);
const pub = await page.$eval(`#ports .ports-row[data-port="${pubCtr}"] a.open-link`, (a) => a.href);
if (pub !== `http://127.0.0.1:${pubHost}/`) await fail(`the -p port opens ${pub}, want 127.0.0.1:${pubHost}`);
if (declared !== "-") {
  await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] .source`)?.textContent === "forwardPorts", declared,
    async () => `no forwardPorts row for port ${declared}: ${await view()}`);
  const decl = await page.$eval(`#ports .ports-row[data-port="${declared}"]`, (r) => ({ href: r.querySelector("a.open-link")?.href, text: r.innerText }));
  if (decl.href !== `http://127.0.0.1:${declared}/` || !decl.text.includes("nothing listens yet")) await fail(`the forwardPorts row: ${JSON.stringify(decl)}`);
}
if (await page.$(`#ports .ports-row[data-port="${port}"]`)) await fail(`port ${port} is listed before anything listens on it`);

// A server started in a terminal, as a user does; its process name is
// HTML, which must show as text.
await page.evaluate(() => window.cove.shells[0].tab.click());
await page.click("#terms .term-pane:not([hidden])");
await wait(() => document.activeElement?.closest(".xterm"), null, "the terminal did not take the focus");
await page.keyboard.type(`mkdir -p /tmp/www && printf '%s\\n' '${body}' > /tmp/www/index.html && cp /bin/busybox '/tmp/<i>srv' && (exec -a httpd '/tmp/<i>srv' -p ${port} -h /tmp/www) && echo started-$((6*7))\n`);
await wait(() => {
  const b = window.cove.shells[0].shell.term.buffer.active;
  for (let i = 0; i < b.length; i++) if (b.getLine(i).translateToString(true).includes("started-42")) return true;
  return false;
}, null, "the server did not start in the terminal");

// It shows in the view on its own (the view polls), with its name.
await page.click("#ports-tab");
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"]`), port, async () => `port ${port} not listed: ${await view()}`, 30000);
const row = await page.$eval(`#ports .ports-row[data-port="${port}"]`, (r) => ({
  process: r.querySelector(".process").textContent,
  elements: r.querySelectorAll(".process *").length + document.querySelectorAll("#ports i").length,
  forward: !!r.querySelector("button.forward"),
}));
if (row.process !== "<i>srv") await fail(`the process shows as ${JSON.stringify(row.process)}, want <i>srv`);
if (row.elements) await fail("the process name made elements");
if (!row.forward) await fail("no Forward button on a port that is not forwarded");

// Forward; Open opens it in a window of its own.
await page.click(`#ports .ports-row[data-port="${port}"] button.forward`);
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] a.open-link`), port, async () => `Forward did nothing: ${await view()}`, 30000);
const fwd = await page.$eval(`#ports .ports-row[data-port="${port}"]`, (r) => ({
  href: r.querySelector("a.open-link").href, source: r.querySelector(".source")?.textContent, rel: r.querySelector("a.open-link").rel,
}));
if (!/^http:\/\/127\.0\.0\.1:\d+\/$/.test(fwd.href) || fwd.source !== "forwarded") await fail(`forwarded row: ${JSON.stringify(fwd)}`);
if (!fwd.rel.includes("noopener")) await fail("Open gives the page to the workspace's server: no noopener");
const [popup] = await Promise.all([ctx.waitForEvent("page"), page.click(`#ports .ports-row[data-port="${port}"] a.open-link`)]);
await popup.waitForLoadState();
const shown = await popup.evaluate(() => document.body.innerText);
if (shown.trim() !== body) await fail(`Open showed ${JSON.stringify(shown)}, want ${JSON.stringify(body)}`);
if (await popup.evaluate(() => { try { return sessionStorage.getItem("cove-token"); } catch { return null; } })) await fail("the opened page holds the token");
await popup.close();

console.log(`cove-test: fetch ${fwd.href}`);
await lines.next(); // the Go test fetched it

// Stop: the forward ends, its port refuses.
await page.click(`#ports .ports-row[data-port="${port}"] button.unforward`);
await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] button.forward`), port, async () => `Stop did nothing: ${await view()}`, 10000);
const after = await fetch(fwd.href).then(() => "answered", (e) => e.cause?.code || String(e));
if (after !== "ECONNREFUSED") await fail(`${fwd.href} after Stop: ${after}`);
if (errors.length) await fail("page errors: " + errors.join("; "));
if (process.env.COVE_SCREENSHOTS) {
  await page.click(`#ports .ports-row[data-port="${port}"] button.forward`);
  await wait((p) => document.querySelector(`#ports .ports-row[data-port="${p}"] a.open-link`), port, "no forward for the screenshot");
  await page.screenshot({ path: `${process.env.COVE_SCREENSHOTS}/ide-ports.png` });
}
await browser.close();
rl.close();
console.log("ok");
