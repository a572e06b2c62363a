// Drives the agent panel's first-run setup in Debian's Chromium: no model
// is configured, so the panel shows a form; the test points it at the
// scripted server, lists its models, picks one, checks and saves it, and
// asks the agent something. Usage: node setup.mjs URL SERVER_URL
import { open } from "./browser.mjs";

const [url, server] = process.argv.slice(2);
const { browser, page, fail } = await open("setup e2e");
try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // The page runs under the launcher's Content-Security-Policy: anything
  // it blocks (a style, a worker, a connection) is a broken feature.
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  await page.goto(url);
  await page.waitForSelector("#agent-log .setup", { timeout: 15000 }).catch(async () => fail("no setup form: " + (await page.textContent("#agent-log"))));
  const field = (label) => page.locator("#agent-log .setup label", { hasText: label }).locator("input, select");
  await field("Base URL").fill(server);
  await field("API key").fill("sk-typed");
  await page.click("#agent-log .setup button:has-text('List models')");
  await page.waitForFunction(() => [...document.querySelectorAll("#setup-models option")].some((o) => o.value === "test-model"), null, { timeout: 10000 })
    .catch(async () => fail("the models were not listed: " + (await page.textContent("#agent-log .setup"))));
  await field("Model").fill("test-model");
  await page.click("#agent-log .setup button:has-text('Check and save')");
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("the model is set up"), null, { timeout: 15000 })
    .catch(async () => fail("not saved: " + (await page.textContent("#agent-log"))));
  if (await page.$("#agent-log .setup")) await fail("the form stayed");
  await page.fill("#agent-input", "hello?");
  await page.press("#agent-input", "Enter");
  await page.waitForFunction(() => document.querySelector("#agent-log").textContent.includes("Hello from the new model."), null, { timeout: 15000 })
    .catch(async () => fail("no answer: " + (await page.textContent("#agent-log"))));
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
