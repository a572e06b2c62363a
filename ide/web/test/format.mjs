// A Go project with gopls in its workspace, in Debian's Chromium (driven
// by TestBrowserFormatAndOutline in cmd/cove): the Outline lists a
// file's symbols, nested, and a click puts the cursor on one; with
// formatOnSave in the user's settings, badly formatted Go saved with
// Ctrl+S is written formatted (the Go test compares the file on disk
// with gofmt's); Ctrl+\ splits the editors, Ctrl+1 and Ctrl+2 go from
// one group to the other; a file renamed is known to the language server
// by its new name.
// Usage: node format.mjs URL BADLY-FORMATTED-TEXT. Prints "ok" when every check passed.
import { open } from "./browser.mjs";
import { shot } from "./shot.mjs";

const [url, bad] = process.argv.slice(2);
const { browser, page, fail, wait, shellReady } = await open("format e2e", { timeout: 20000 });
const statusText = () => page.textContent("#status");
const outline = () => page.evaluate(() => [...document.querySelectorAll("#outline:not([hidden]) .outline-item")].map((b) => `${b.dataset.depth}:${b.textContent.slice(1)}`).join(" "));

try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  await page.goto(url);
  await shellReady();

  // The Outline of types.go, from gopls: the struct with its fields
  // under it, the function.
  await page.click('.entry[data-path="types.go"]');
  await wait(() => window.cove.docs.get("types.go")?.doc.lspClient?.client.serverCapabilities, null, async () => `gopls never initialized: ${await statusText()}`, 30000);
  const t0 = Date.now();
  await wait(() => document.querySelectorAll("#outline:not([hidden]) .outline-item").length >= 4, null, async () => `no outline: ${await outline()} / ${await page.textContent("#outline")}`, 60000);
  console.log(`outline shown ${Date.now() - t0} ms after gopls initialized`);
  const items = await outline();
  if (items !== "0:Point 1:X 1:Y 0:Origin") await fail(`the outline: ${items}`);
  await page.click('#outline-box .outline-item[data-line="9"]');
  const cur = await page.evaluate(() => {
    const { doc } = window.cove.docs.get("types.go");
    const { from, to } = doc.view.state.selection.main;
    return { ...doc.cursor(), picked: doc.view.state.sliceDoc(from, to), focus: doc.view.hasFocus };
  });
  if (cur.line !== 9 || cur.picked !== "Origin" || !cur.focus) await fail(`after a click on Origin in the outline: ${JSON.stringify(cur)}`);

  // Format on save: the text as the user left it, saved with Ctrl+S.
  await page.click('.entry[data-path="main.go"]');
  await wait(() => window.cove.docs.get("main.go")?.doc.lspClient && document.querySelector("#outline-box")?.dataset.path === "main.go" &&
    /main/.test(document.querySelector("#outline-box").textContent), null, async () => `main.go's outline: ${await outline()}`);
  await page.evaluate((bad) => {
    const { view } = window.cove.docs.get("main.go").doc;
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: bad } });
    view.focus();
  }, bad);
  await page.keyboard.press("Control+s");
  await wait(() => document.querySelector("#status").textContent === "saved main.go" && !window.cove.docs.get("main.go").doc.dirty(), null,
    async () => `not saved: ${await statusText()}`);
  const shown = await page.evaluate(() => window.cove.docs.get("main.go").doc.text());
  if (shown === bad) await fail("saved as it was: not formatted");

  // Split: Ctrl+\ puts main.go in a second group beside types.go; Ctrl+1
  // and Ctrl+2 go from one to the other, the Outline following; closing
  // main.go closes its group.
  const where = () => page.evaluate(() => ["types.go", "main.go"].map((p) => {
    const d = window.cove.docs.get(p);
    const r = d.pane.getBoundingClientRect();
    return { group: d.group, shown: !d.pane.hidden, left: Math.round(r.left), right: Math.round(r.right), focus: d.doc.view.hasFocus };
  }));
  await page.keyboard.press("Control+Backslash");
  await wait(() => window.cove.docs.get("main.go").group === 1 && document.querySelector("#editors-2")?.contains(window.cove.docs.get("main.go").pane) &&
    !window.cove.docs.get("types.go").pane.hidden, null, async () => `after Ctrl+\\: ${JSON.stringify(await where())}`);
  const [t, m] = await where();
  if (!t.shown || !m.shown || t.right > m.left + 1 || t.right - t.left < 200 || m.right - m.left < 200 || !m.focus) await fail(`side by side: ${JSON.stringify([t, m])}`);
  await shot(page, "ide-split.png", ["#side", "#main"]);
  await page.keyboard.press("Control+1");
  await wait(() => window.cove.docs.get("types.go").doc.view.hasFocus && document.querySelector("#outline-box").dataset.path === "types.go", null,
    async () => `after Ctrl+1: ${JSON.stringify(await where())}, outline of ${await page.getAttribute("#outline-box", "data-path")}`);
  await page.keyboard.press("Control+2");
  await wait(() => window.cove.docs.get("main.go").doc.view.hasFocus && document.querySelector("#outline-box").dataset.path === "main.go", null,
    async () => `after Ctrl+2: ${JSON.stringify(await where())}`);
  await page.click("#editor-tabs-2 .tab .close");
  await wait(() => !document.querySelector("#group-1") && !document.querySelector("#groups.split") && !window.cove.docs.get("types.go").pane.hidden, null, "the second group stayed after its last file closed");

  // types.go renamed in the tree (F2): its language server knows it by
  // the new name, and what it finds in it is shown under that name.
  page.once("dialog", (d) => d.accept("shapes.go"));
  await page.click('.entry[data-path="types.go"]');
  await page.keyboard.press("F2");
  const uri = () => page.evaluate(() => {
    const d = window.cove.docs.get("shapes.go")?.doc;
    return d?.lspClient?.lsp.LSPPlugin.get(d.view)?.uri || null;
  });
  await wait(() => {
    const d = window.cove.docs.get("shapes.go")?.doc;
    return d?.lspClient?.lsp.LSPPlugin.get(d.view)?.uri.endsWith("/shapes.go");
  }, null, async () => `after the rename, the server's URI: ${await uri()}; status: ${await statusText()}`);
  await page.evaluate(() => {
    const { view } = window.cove.docs.get("shapes.go").doc;
    view.dispatch({ changes: { from: view.state.doc.length, insert: "\nvar bad int = \"x\"\n" } });
  });
  await wait(() => document.querySelector('#problems .problem[data-path="shapes.go"]') && !document.querySelector('#problems .problem[data-path="types.go"]'), null,
    async () => `the type error in the renamed file: ${await page.textContent("#problems")}`);
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
