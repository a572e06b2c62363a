// What an idle IDE window costs (driven by scripts/bench/idle.sh): opens
// URL in Debian's headless Chromium, waits for its first terminal and
// SETTLE seconds more, then prints "ready" and, after SECONDS of nobody
// doing anything, "chromium CPU" with the CPU seconds Chromium's own
// processes (this script's children) used meanwhile, by process type.
// Usage: node idle.mjs URL SECONDS [SETTLE]
import { chromium } from "playwright-core";
import { readFileSync, readdirSync } from "node:fs";

const [url, secs, settle = "5"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
});
const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
await page.goto(url);
await page.waitForFunction(() => window.cove?.shells[0]?.shell.id, null, { timeout: 60000 });
await new Promise((r) => setTimeout(r, settle * 1000));

// ours: this script's descendants (other Chromiums on the machine are not).
function ours() {
  const parent = new Map();
  for (const p of readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      parent.set(p, readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")[1]);
    } catch {}
  }
  const mine = (p) => {
    for (let i = 0; p && i < 64; i++, p = parent.get(p)) if (p === String(process.pid)) return true;
    return false;
  };
  return [...parent.keys()].filter(mine);
}
// cpu: CPU seconds of our processes now, by type (browser, renderer, gpu-process, …).
function cpu() {
  const by = {};
  for (const p of ours()) {
    try {
      const cmd = readFileSync(`/proc/${p}/cmdline`, "utf8");
      const f = readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ");
      const type = (cmd.match(/--type=([a-z-]+)/) || [, "browser"])[1];
      by[type] = (by[type] || 0) + (+f[11] + +f[12]) / 100;
    } catch {}
  }
  return by;
}
const before = cpu();
console.log("ready");
await new Promise((r) => setTimeout(r, secs * 1000));
const after = cpu();
const used = Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - (before[k] || 0)]));
const total = Object.values(used).reduce((a, b) => a + b, 0);
console.log(`chromium ${total.toFixed(2)} ${Object.entries(used).filter(([, v]) => v > 0.005).map(([k, v]) => `${k}=${v.toFixed(2)}`).join(" ")}`);
await browser.close();
