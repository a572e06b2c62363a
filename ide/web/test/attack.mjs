// Pages that want the workspace's API, in real Chromium:
//  - a page on another port of 127.0.0.1 (as a workspace's forwarded dev
//    server could serve), trying the API with fetch (cors and no-cors,
//    GET and POST) and WebSockets, with no token and with a guessed one;
//  - a DNS-rebinding page: its document came from the attacker under the
//    name rebind.test (Playwright's route stands in for the first DNS
//    answer), and rebind.test then resolves to 127.0.0.1 (Chromium's
//    host-resolver-rules), so its same-origin requests reach the
//    launcher's port with Host: rebind.test, the leaked token and all.
// It prints one JSON object: what each page could read. Usage:
// node attack.mjs IDE_BASE OTHER_BASE TOKEN
import { chromium } from "playwright-core";

const [ide, other, token] = process.argv.slice(2);
const idePort = new URL(ide).port;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
    "--host-resolver-rules=MAP rebind.test 127.0.0.1",
    // Chromium's own local-network checks would stop the rebinding page
    // before the launcher sees it; off, as in an older browser (or one the
    // user allowed), so that what refuses it is cove's Host check.
    "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests"],
});

// tries runs in the attacking page: every way it has to the API, against
// base (another origin, or its own after the rebinding), and what came back.
const tries = async ({ base, token }) => {
  const out = {};
  const paths = ["/api/file?path=a.txt", "/api/tree", "/api/dir", "/api/launcher"];
  for (const p of paths) {
    for (const [name, init] of Object.entries({
      cors: {},
      nocors: { mode: "no-cors", credentials: "include" },
      token: { headers: { "X-Cove-Token": token } },
      post: { method: "POST", body: "x", headers: { "X-Cove-Token": token } },
    })) {
      try {
        const r = await fetch(base + p, init);
        out[`${name} ${p}`] = `${r.status} ${r.type === "opaque" ? "" : await r.text()}`;
      } catch (e) {
        out[`${name} ${p}`] = "error";
      }
    }
  }
  for (const [name, [path, protos]] of Object.entries({
    ws: ["/api/ws", []], wstoken: ["/api/ws", ["cove", "cove-token." + token]],
    term: ["/api/term/new", []], termtoken: ["/api/term/new", ["cove", "cove-token." + token]],
  })) {
    out[name] = await new Promise((resolve) => {
      let ws;
      try {
        ws = new WebSocket(base.replace(/^http/, "ws") + path, protos);
      } catch (e) {
        return resolve("error");
      }
      ws.onopen = () => { ws.send("hi"); };
      ws.onmessage = (m) => resolve("message: " + m.data);
      ws.onerror = () => resolve("error");
      ws.onclose = () => resolve("closed");
      setTimeout(() => resolve("timeout"), 5000);
    });
  }
  return out;
};

const result = {};
try {
  const ctx = await browser.newContext();
  const cross = await ctx.newPage();
  await cross.goto(other + "/attacker");
  result.crossPort = await cross.evaluate(tries, { base: ide, token: "not-the-token" });
  result.crossPortLeaked = await cross.evaluate(tries, { base: ide, token });

  const rebind = await ctx.newPage();
  const origin = `http://rebind.test:${idePort}`;
  // The first answer for rebind.test was the attacker's: its document.
  await rebind.route(origin + "/", (route) => route.fulfill({ contentType: "text/html", body: "<title>attacker</title>" }));
  await rebind.goto(origin + "/");
  await rebind.unroute(origin + "/");
  result.rebind = await rebind.evaluate(tries, { base: origin, token });
  // The UI itself under that name: nothing is served to it.
  const asUI = await ctx.newPage();
  const resp = await asUI.goto(origin + "/?token=" + token);
  result.rebindUI = `${resp.status()} ${(await asUI.content()).slice(0, 200)}`;
} catch (e) {
  console.error(e.stack || String(e));
  await browser.close();
  process.exit(1);
}
console.log(JSON.stringify(result));
await browser.close();
