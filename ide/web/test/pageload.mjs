// Page load of the IDE in Chromium, headless (software GL, so a lower
// bound on a desktop with a GPU): for RUNS fresh browser contexts, the
// times from navigation to DOMContentLoaded, to the file tree's first
// entry, and to the shell's prompt on the terminal's screen.
// Usage: node pageload.mjs URL [RUNS]; prints "run DCL TREE PROMPT" (ms).
import { chromium } from "playwright-core";

const [url, runs = "10"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
});
for (let i = 0; i < Number(runs) + 1; i++) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const t0 = Date.now();
  await page.goto(url, { waitUntil: "domcontentloaded" });
  const dcl = Date.now() - t0;
  await page.waitForSelector("#tree .entry", { timeout: 30000 });
  const tree = Date.now() - t0;
  await page.waitForFunction(() => {
    const s = window.cove?.shells?.[0]?.shell;
    const b = s?.term.buffer.active;
    for (let i = 0; b && i < b.length; i++) if (/[#$]\s*$/.test(b.getLine(i).translateToString(true))) return true;
    return false;
  }, null, { timeout: 30000, polling: 5 });
  const prompt = Date.now() - t0;
  if (i > 0) console.log(`run ${dcl} ${tree} ${prompt}`); // the first warms the server's caches
  await ctx.close();
}
await browser.close();
