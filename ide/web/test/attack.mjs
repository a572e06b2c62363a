// Pages that are not the IDE's try it, in the browser where the IDE is
// open: one on another port of 127.0.0.1 (a workspace's forwarded dev
// server could be one) and one at a DNS-rebinding name that resolves to
// 127.0.0.1 (an attacker's site after its name's address changed). Each
// tries the API (a read, a write) and a terminal's WebSocket, with the
// token too, as if it had leaked: the Origin and Host checks must hold
// on their own. Prints one JSON line of what each attempt got. Usage:
// node attack.mjs URL OTHER TOKEN, OTHER a server on another port.
import { chromium } from "playwright-core";

const [url, other, token] = process.argv.slice(2);
const ide = new URL(url);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
    "--host-resolver-rules=MAP rebind.test 127.0.0.1"],
});
const fail = async (msg) => {
  console.error("attack e2e: " + msg);
  await browser.close();
  process.exit(1);
};
// attempts runs in a page: each API call's status (0: the browser did not
// let the page see or send it) and whether each WebSocket opened.
const attempts = async ({ base, wsBase, token, tag }) => {
  const status = (p) => p.then((r) => r.status).catch(() => 0);
  const opened = (u, protocols) => new Promise((resolve) => {
    let ws;
    try { ws = new WebSocket(u, protocols); } catch { return resolve(false); }
    ws.onopen = () => { ws.close(); resolve(true); };
    ws.onerror = () => resolve(false);
    setTimeout(() => resolve(false), 5000);
  });
  return {
    read: await status(fetch(base + "/api/tree?path=.", { credentials: "include" })),
    readWithToken: await status(fetch(base + "/api/tree?path=.", { headers: { "X-Cove-Token": token } })),
    write: await status(fetch(base + "/api/file?path=pwned-" + tag + "-1.txt", { method: "PUT", body: "x", mode: "no-cors", credentials: "include" })),
    writeWithToken: await status(fetch(base + "/api/file?path=pwned-" + tag + "-2.txt", { method: "PUT", body: "x", headers: { "X-Cove-Token": token } })),
    post: await status(fetch(base + "/api/dir?path=pwned-" + tag + "-3", { method: "POST", mode: "no-cors", credentials: "include" })),
    ws: await opened(wsBase + "/api/term/" + tag, ["cove"]),
    wsWithToken: await opened(wsBase + "/api/term/" + tag + "t", ["cove", "cove-token." + token]),
  };
};
try {
  const ctx = await browser.newContext();
  // The user's IDE, open and working.
  const page = await ctx.newPage();
  await page.goto(url);
  await page.waitForSelector("#tree .entry", { timeout: 15000 }).catch(() => fail("the IDE did not load its files"));
  // A page on another port, in the same browser.
  const port = await ctx.newPage();
  await port.goto(other + "/");
  const fromPort = await port.evaluate(attempts, { base: ide.origin, wsBase: "ws://" + ide.host, token, tag: "port" });
  // A rebinding name for 127.0.0.1, at the IDE's own port: same-origin
  // to the browser, so only the Host check stands in its way.
  const rebound = await ctx.newPage();
  const res = await rebound.goto("http://rebind.test:" + ide.port + "/");
  const rebind = await rebound.evaluate(attempts, { base: "", wsBase: "ws://rebind.test:" + ide.port, token, tag: "rebind" });
  rebind.page = res ? res.status() : 0;
  console.log(JSON.stringify({ port: fromPort, rebind }));
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
