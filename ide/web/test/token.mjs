// The launch's token stays with the launcher's origin: a window opened at
// its URL loads, takes the token out of the address, and then neither a
// page it opens on another port of this host nor one the same browser
// visits there is sent it (cookies go to every port: RFC 6265 §8.5). A
// window opened without the token says what to do. Usage:
// node token.mjs URL OTHER, where OTHER is a server on another port of
// 127.0.0.1 (the test's, recording what it is sent, as a workspace's
// forwarded dev server could).
import { open } from "./browser.mjs";

const [url, other] = process.argv.slice(2);
const { browser, page, fail } = await open("token e2e");
try {
  const ctx = page.context();
  await page.goto(url);
  await page.waitForSelector("#tree .entry", { timeout: 15000 }).catch(() => fail("the IDE did not load its files"));
  if (page.url().includes("token")) await fail("the token stayed in the address bar: " + page.url());
  // A reload keeps the token: the page works on.
  await page.reload();
  await page.waitForSelector("#tree .entry", { timeout: 15000 }).catch(() => fail("after a reload the IDE did not load its files"));
  // A page the app window opens on the other port, as a link to a dev
  // server does, and one the same browser goes to by itself.
  const [opened] = await Promise.all([ctx.waitForEvent("page"), page.evaluate((u) => window.open(u + "/opened", "_blank"), other)]);
  await opened.waitForLoadState("load");
  await opened.waitForFunction(() => window.done === true, null, { timeout: 10000 }).catch(() => fail("the opened page did not finish"));
  const visited = await ctx.newPage();
  await visited.goto(other + "/visited");
  await visited.waitForFunction(() => window.done === true, null, { timeout: 10000 }).catch(() => fail("the visited page did not finish"));
  // A file of the app the network drops on the way (Chromium cancels
  // requests in flight when this machine's network changes:
  // ERR_NETWORK_CHANGED; a Pod made on the test cluster did it to a
  // CI run's app window) has the page load again, token and all.
  const flaky = await (await browser.newContext()).newPage();
  let chunks = 0;
  await flaky.route("**/chunks/*.js", (route) => (chunks++ === 0 ? route.abort("internetdisconnected") : route.continue()));
  await flaky.goto(url);
  await flaky.waitForSelector("#tree .entry", { timeout: 20000 }).catch(async () =>
    fail(`a page whose first chunk the network dropped did not load (${chunks} chunk requests): ${await flaky.textContent("#status").catch(() => "?")}`));
  if (flaky.url().includes("token")) await fail("after the reload the token stayed in the address bar: " + flaky.url());
  // A request of the running app the network drops (the file tree's)
  // is asked again: the tree is there, and a write is not repeated.
  const reads = await (await browser.newContext()).newPage();
  let trees = 0;
  await reads.route("**/api/tree?*", (route) => (trees++ === 0 ? route.abort("internetdisconnected") : route.continue()));
  await reads.goto(url);
  await reads.waitForSelector("#tree .entry", { timeout: 15000 }).catch(() =>
    fail(`a page whose first request for its file tree the network dropped shows no files (${trees} tree requests)`));
  let puts = 0;
  await reads.route("**/api/file?*", (route) => (route.request().method() === "PUT" ? (puts++, route.abort("internetdisconnected")) : route.continue()));
  const put = await reads.evaluate(() => fetch("/api/file?path=b.txt", { method: "PUT", body: "b" }).then(() => "done", (e) => e.name));
  if (put !== "TypeError" || puts !== 1) await fail(`a write the network dropped: ${put}, sent ${puts} times (once, and failed, is right)`);
  // Without its token the page says what to do.
  const bare = await (await browser.newContext()).newPage();
  await bare.goto(new URL("/", url).href);
  const said = await bare.waitForSelector("#no-token", { timeout: 10000 }).then((e) => e.textContent()).catch(() => null);
  if (!said || !said.includes("Open the URL that cove printed")) await fail("a page opened without the token says: " + (said ?? (await bare.textContent("body"))));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
