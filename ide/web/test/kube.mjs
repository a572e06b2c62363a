// The IDE on a workspace that runs as a Kubernetes Pod (cove up --kube),
// in Debian's Chromium: the tree lists the Pod's copy of the project, a
// terminal runs in the Pod, and a file saved in the editor is written in
// the Pod (the test then finds it synchronised on the laptop).
// Usage: node kube.mjs URL
import { chromium } from "playwright-core";

const [url] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const fail = async (msg) => {
  console.error("kube: " + msg);
  await browser.close();
  process.exit(1);
};
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(url);
  await page.waitForSelector('.entry[data-path="main.c"]', { timeout: 20000 }).catch(() => fail("the tree does not list main.c"));
  await page.waitForFunction(() => window.cove?.shells?.[0]?.shell?.id, null, { timeout: 20000 }).catch(() => fail("no terminal"));
  await page.click(".term-pane");
  // The Pod's own marker: cove's IDE server's pid file, in its /.cove.
  await page.keyboard.type("echo pod-$((6*7)) $(test -f /.cove/ide.pid && echo has-ide-pid)\n");
  await page.waitForFunction(() => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (/pod-42 has-ide-pid/.test(b.getLine(i).translateToString(true))) return true;
    return false;
  }, null, { timeout: 20000 }).catch(() => fail("the terminal did not run in the Pod"));
  console.log("terminal: in the Pod");
  await page.click('.entry[data-path="main.c"]');
  await page.waitForSelector(".cm-content", { timeout: 10000 });
  await page.click(".cm-content");
  await page.keyboard.press("Control+End");
  await page.keyboard.type("// saved in the browser");
  await page.waitForSelector(".tab.dirty");
  await page.keyboard.press("Control+s");
  await page.waitForSelector(".tab.dirty", { state: "detached", timeout: 10000 }).catch(() => fail("the save did not finish"));
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
