// Drives the agent panel's MCP parts in Debian's Chromium: the servers
// list shows each server's state (one running with its tools, one failed
// with its error); an MCP call's approval card offers "Always allow this
// server", and once that is clicked the server's next call runs without a
// card. Usage: node mcp.mjs URL SCREENSHOT
import { open } from "./browser.mjs";

const [url, shot] = process.argv.slice(2);
const { browser, page, fail } = await open("mcp e2e", { viewport: { width: 1280, height: 800 } });
try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  await page.goto(url);
  await page.waitForFunction(() => /MCP: 1 of 2 servers running, 1 failed/.test(document.querySelector("#agent-mcp summary")?.textContent || ""), null, { timeout: 60000 })
    .catch(async () => fail("the servers list: " + (await page.textContent("#agent-mcp").catch(() => "(none)"))));
  await page.click("#agent-mcp summary");
  const fs = await page.textContent("#agent-mcp li.server.running");
  if (!/^fs workspace, stdio · running · 14 tools/.test(fs)) await fail("the running server shows as " + fs);
  const broken = await page.textContent("#agent-mcp li.server.failed");
  if (!/^broken workspace, stdio · failed/.test(broken) || !/could not start/.test(broken)) await fail("the failed server shows as " + broken);
  await page.fill("#agent-input", "look in the workspace");
  await page.press("#agent-input", "Enter");
  await page.waitForSelector('.approval:not(.approved) .action:has-text("MCP fs (workspace): list_directory")', { timeout: 20000 })
    .catch(async () => fail("no approval card for the MCP call: " + (await page.textContent("#agent-log"))));
  const buttons = await page.$$eval(".approval:not(.approved) button", (bs) => bs.map((b) => b.textContent));
  if (buttons.join("|") !== "Approve|Reject|Always allow this tool|Always allow this server") await fail("the card's buttons: " + buttons.join("|"));
  if (shot) await page.screenshot({ path: shot });
  await page.click(".approval:not(.approved) button:has-text('Always allow this server')");
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("Looked around."), null, { timeout: 20000 })
    .catch(async () => fail("no answer: " + (await page.textContent("#agent-log"))));
  const cards = await page.$$eval("#agent-log .approval", (cs) => cs.length);
  if (cards !== 1) await fail(`${cards} approval cards: the server's second call should not have asked`);
  const results = await page.$$eval("#agent-log details.result summary", (ss) => ss.map((s) => s.textContent));
  if (!results.includes("[FILE] marker.txt") || !results.some((r) => r.startsWith("Allowed directories:"))) await fail("results: " + results.join(" | "));
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
