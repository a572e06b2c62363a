// A hostile language server (ide's hostileServer) against the page in
// Debian's Chromium (driven by TestBrowserHostileLanguageServer): what it
// says outside the project is neither shown nor opened nor written, its
// HTML runs nothing, its flood is bounded, its huge message is refused.
// Usage: node hostile.mjs URL. Prints "ok" when every check passed.
import { open } from "./browser.mjs";

const [url] = process.argv.slice(2);
const { browser, page, fail, wait, shellReady } = await open("hostile lsp");
const start = Date.now();
const step = (what) => console.log(`${Date.now() - start} ms: ${what}`);
const statusText = () => page.textContent("#status");
const at = (path, line, col) => page.evaluate(([path, line, col]) => {
  const { view } = window.cove.docs.get(path).doc;
  view.dispatch({ selection: { anchor: view.state.doc.line(line).from + col } });
  view.focus();
}, [path, line, col]);

try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const opened = [];
  page.on("request", (r) => opened.push(r.url()));
  await page.goto(url);
  await shellReady();
  await page.click('.entry[data-path="a.go"]');
  await wait(() => window.cove.docs.get("a.go")?.doc.lspClient?.client.serverCapabilities, null, async () => `no server: ${await statusText()}`);

  step("connected");
  // The flood: 200 problems for a.go, one each for 499 more files, no
  // more; none outside the project; no escape character anywhere.
  await wait(() => document.querySelector("#problems-tab").textContent === "Problems (699)", null,
    async () => `the Problems tab says ${await page.textContent("#problems-tab")}`);
  await page.click("#problems-tab");
  const shown = await page.evaluate(() => ({
    files: [...document.querySelectorAll("#problems .problem-file")].map((e) => e.textContent),
    text: document.querySelector("#problems").textContent,
    longest: Math.max(...[...window.cove.languages.diagnostics.values()].flat().map((d) => d.message.length)),
    lint: document.querySelectorAll(".cm-lintRange").length,
  }));
  if (shown.files.some((f) => f.includes("passwd") || f.includes("..") || f.startsWith("/"))) await fail(`a file outside the project is listed: ${shown.files.slice(0, 5)}`);
  if (shown.files.length !== 500 || shown.files[0] !== "a.go") await fail(`${shown.files.length} files listed, first ${shown.files[0]}`);
  if (shown.text.includes("\x1b") || shown.text.includes("\x07")) await fail("an escape sequence reached the page's text");
  if (shown.longest > 1001) await fail(`a message of ${shown.longest} characters was kept`);
  if (!(await statusText()).includes("hello")) await fail(`the server's message: ${await statusText()}`);
  if ((await statusText()).includes("\x1b")) await fail("an escape sequence in the status bar");

  step("flood checked");
  // A definition in /etc/passwd: nothing opens, the status bar says why.
  const before = opened.length;
  await at("a.go", 3, 6);
  await page.keyboard.press("F12");
  await wait(() => /outside the project; not opened/.test(document.querySelector("#status").textContent), null, async () => `after F12: ${await statusText()}`);
  if (await page.evaluate(() => [...window.cove.docs.keys()].some((p) => p !== "a.go"))) await fail("another file opened");
  if (opened.slice(before).some((u) => /passwd|etc/.test(decodeURIComponent(u)))) await fail(`the page asked for ${opened.slice(before)}`);

  step("definition refused");
  // Hover: the Markdown's HTML is cut down; nothing runs.
  const word = await page.evaluate(() => {
    const { view } = window.cove.docs.get("a.go").doc;
    const c = view.coordsAtPos(view.state.doc.line(3).from + 7);
    return { x: c.left + 2, y: (c.top + c.bottom) / 2 };
  });
  await page.mouse.move(word.x, word.y);
  await wait(() => document.querySelector(".cm-tooltip-hover"), null, "no hover tooltip");
  const hover = await page.evaluate(() => ({ html: document.querySelector(".cm-tooltip-hover").innerHTML, pwned: window.pwned }));
  if (hover.pwned || /<(img|script|iframe)|href=|onerror/i.test(hover.html) || !hover.html.includes("<strong>bold</strong>")) await fail(`the hover: ${hover.html} (pwned ${hover.pwned})`);

  step("hover checked");
  // A rename that would also write outside the project: nothing written.
  page.once("dialog", (d) => d.accept("Other"));
  await at("a.go", 3, 6);
  await page.keyboard.press("F2");
  await wait(() => /rename not done: .*outside the project/.test(document.querySelector("#status").textContent), null, async () => `after F2: ${await statusText()}`);
  if ((await page.evaluate(() => window.cove.docs.get("a.go").doc.text())).includes("RENAMED")) await fail("the editor took part of the rename");

  step("rename refused");
  // References, answered with a message over the limit: the connection
  // is closed and said so; the page goes on (and connects again).
  // The status says so until the next word: the server's greeting when
  // the page connects again may follow within milliseconds, so what the
  // status said is recorded, not polled.
  await page.evaluate(() => {
    const status = document.querySelector("#status");
    window.statusSaid = [];
    new MutationObserver(() => window.statusSaid.push(status.textContent)).observe(status, { childList: true, characterData: true, subtree: true });
  });
  await at("a.go", 3, 6);
  await page.keyboard.press("Shift+F12");
  await wait(() => window.statusSaid.some((t) => /over the limit/.test(t)), null,
    async () => `after Shift+F12 the status said: ${JSON.stringify(await page.evaluate(() => window.statusSaid))}`, 20000);
  await wait(() => window.cove.docs.get("a.go")?.doc.lspClient?.client.serverCapabilities, null, "the page did not connect again");
  step("huge message refused, connected again");
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
