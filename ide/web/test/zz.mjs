import { chromium } from "playwright-core";
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"] });
const page = await (await browser.newContext()).newPage();
const cdp = await page.context().newCDPSession(page);
await cdp.send("Performance.enable");
await page.goto(process.argv[2]);
await page.waitForFunction(() => window.cove?.shells[0]?.shell.id, null, { timeout: 60000 });
await page.waitForTimeout(5000);
const m = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((x) => [x.name, x.value]));
const a = await m();
await page.waitForTimeout(10000);
const b = await m();
const d = {};
for (const k of ["TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "LayoutCount", "RecalcStyleCount", "JSHeapUsedSize"]) d[k] = +(b[k] - a[k]).toFixed(3);
console.log(JSON.stringify(d));
// who runs: count timers
const t = await page.evaluate(async () => {
  const counts = {};
  const st = window.setTimeout, si = window.setInterval, raf = window.requestAnimationFrame;
  window.setTimeout = (f, ms, ...r) => { const k = "timeout " + ms + " " + (new Error().stack.split("\n")[2] || "").trim().slice(0, 90); counts[k] = (counts[k] || 0) + 1; return st(f, ms, ...r); };
  window.requestAnimationFrame = (f) => { const k = "raf " + (new Error().stack.split("\n")[2] || "").trim().slice(0, 90); counts[k] = (counts[k] || 0) + 1; return raf(f); };
  await new Promise((r) => st(r, 5000));
  return counts;
});
console.log(JSON.stringify(t, null, 1));
await browser.close();
