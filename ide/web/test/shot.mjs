// shot saves a PNG of page's region around the elements sels (the box
// that holds them) as name in the directory COVE_SCREENSHOTS, when that
// is set: the README's screenshots (docs/img), made by the browser tests
// on asking so that CI never rewrites them. The page is laid out at
// 1000×560 without the agent's panel for it (prepare, if given, then
// runs: a hover, say) and back at Playwright's 1280×720 with it after.
import { resolve } from "node:path";

export async function shot(page, name, sels, prepare) {
  const dir = process.env.COVE_SCREENSHOTS;
  if (!dir) return;
  await page.setViewportSize({ width: 1000, height: 560 });
  await page.evaluate(() => window.cove.commands.run("toggleAgent"));
  if (prepare) await prepare();
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const box = await page.evaluate((sels) => {
    const rs = sels.map((s) => document.querySelector(s)?.getBoundingClientRect()).filter((r) => r && r.width && r.height);
    const x = Math.min(...rs.map((r) => r.left)), y = Math.min(...rs.map((r) => r.top));
    return { x, y, width: Math.max(...rs.map((r) => r.right)) - x, height: Math.max(...rs.map((r) => r.bottom)) - y };
  }, sels);
  await page.screenshot({ path: resolve(dir, name), clip: box });
  console.log(`screenshot ${name}: ${Math.round(box.width)}×${Math.round(box.height)}`);
  await page.mouse.move(0, 0);
  await page.evaluate(() => window.cove.commands.run("toggleAgent"));
  await page.setViewportSize({ width: 1280, height: 720 });
}
