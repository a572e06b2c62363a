// A Go project with gopls in its workspace, in Debian's Chromium (driven
// by TestBrowserLanguageServerGo in cmd/cove): diagnostics as one types,
// completion, go to definition in another file, rename across files.
// Usage: node lsp.mjs URL. Prints the measured times, then "ok".
import { open } from "./browser.mjs";
import { shot } from "./shot.mjs";

const [url] = process.argv.slice(2);
const { browser, page, fail, wait, shellReady } = await open("lsp e2e", { timeout: 20000 });
const statusText = () => page.textContent("#status");
// at puts the cursor in path's editor at line (from 1), after the first
// occurrence of text on it (or at its end), and gives it the keys.
const at = (path, line, text, after = true) => page.evaluate(([path, line, text, after]) => {
  const { view } = window.cove.docs.get(path).doc;
  const l = view.state.doc.line(line);
  const i = text ? l.text.indexOf(text) : l.length;
  view.dispatch({ selection: { anchor: l.from + i + (after && text ? text.length : 0) } });
  view.focus();
}, [path, line, text, after]);
const docText = (path) => page.evaluate((p) => window.cove.docs.get(p).doc.text(), path);
const active = () => page.evaluate(() => {
  const d = [...window.cove.docs.values()].find((d) => !d.pane.hidden);
  const { view } = d.doc;
  return { path: d.doc.path, line: view.state.doc.lineAt(view.state.selection.main.head).number };
});

try {
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) errors.push(m.text()); });
  await page.goto(url);
  await shellReady();
  await page.click('.entry[data-path="main.go"]');
  await wait(() => window.cove.docs.get("main.go")?.doc.lspClient?.client.serverCapabilities, null, async () => `gopls never initialized: ${await statusText()}`, 30000);
  // gopls has loaded the package once a hover on a name answers.
  const t0 = Date.now();
  await wait(async () => {
    const d = window.cove.docs.get("main.go").doc;
    const r = await d.lspClient.client.request("textDocument/hover", { textDocument: { uri: d.lspClient.client.workspace.files[0].uri }, position: { line: 5, character: 8 } }).catch(() => null);
    return r && JSON.stringify(r).includes("func Origin() Point");
  }, null, "gopls never answered a hover on Origin", 60000);
  console.log(`gopls ready: ${Date.now() - t0} ms after the file opened`);

  // A type error, typed: shown in the editor and Problems. How soon is
  // logged, and measured quiet by the language-server benchmark
  // (ide/lsp_bench_test.go): a bound here would fail on a busy machine.
  await at("main.go", 8, null);
  await page.keyboard.press("Enter");
  await page.keyboard.type("p.X = true", { delay: 20 });
  await page.keyboard.press("Escape");
  const typed = Date.now();
  await wait(() => document.querySelector(".pane:not([hidden]) .cm-lintRange-error") &&
    [...document.querySelectorAll("#problems .problem")].some((p) => /cannot use true .*9:/.test(p.textContent)),
  null, async () => `no diagnostic for the type error: ${await statusText()} / ${await page.textContent("#problems")} / line 9: ${(await docText("main.go")).split("\n")[8]}`);
  const shown = Date.now() - typed;
  await page.click("#problems-tab");
  // The README's: the error underlined, the Problems panel below.
  await shot(page, "ide-diagnostic.png", ["#main", "#bottom"]);
  console.log(`diagnostic shown ${shown} ms after the last keystroke`);
  // Fixed: the line taken out again.
  await page.evaluate(() => {
    const { view } = window.cove.docs.get("main.go").doc;
    const l = view.state.doc.line(9);
    view.dispatch({ changes: { from: l.from - 1, to: l.to }, userEvent: "delete" });
  });
  const fixed = Date.now();
  await wait(() => !document.querySelector(".pane:not([hidden]) .cm-lintRange-error") && document.querySelector("#problems-tab").textContent === "Problems",
    null, "the diagnostic stayed after the fix");
  console.log(`diagnostic gone ${Date.now() - fixed} ms after the fix`);

  // Completion after "p." offers the struct's fields.
  await at("main.go", 8, null);
  await page.keyboard.press("Enter");
  await page.keyboard.type("p.", { delay: 20 });
  const asked = Date.now();
  await wait(() => {
    const labels = [...document.querySelectorAll(".cm-tooltip-autocomplete li .cm-completionLabel")].map((l) => l.textContent);
    return labels.includes("X") && labels.includes("Y");
  }, null, async () => `no completion of the fields: ${await page.evaluate(() => document.querySelector(".cm-tooltip-autocomplete")?.textContent)}`, 5000);
  console.log(`completion shown ${Date.now() - asked} ms after "p."`);
  await page.keyboard.press("Escape");
  await page.evaluate(() => {
    const { view } = window.cove.docs.get("main.go").doc;
    const l = view.state.doc.line(9);
    view.dispatch({ changes: { from: l.from - 1, to: l.to } });
  });
  if (!(await docText("main.go")).includes("fmt.Println(p.X, q.Y)\n}")) await fail(`main.go is not back: ${await docText("main.go")}`);

  // F12 on Origin opens types.go at its line.
  await at("main.go", 6, "Orig");
  await page.keyboard.press("F12");
  await wait(() => document.querySelector(".tab.active")?.title === "types.go", null, async () => `types.go did not open: ${await statusText()}`, 5000);
  await wait(() => {
    const d = window.cove.docs.get("types.go")?.doc;
    return d && d.view.state.doc.lineAt(d.view.state.selection.main.head).number === 9;
  }, null, async () => `the cursor is not at Origin's definition: ${JSON.stringify(await active())}`, 5000);

  // F2 on Point renames it in both files, on disk.
  await wait(() => window.cove.docs.get("types.go")?.doc.lspClient, null, "types.go got no language server", 10000);
  await at("types.go", 4, "Poi");
  page.once("dialog", (d) => d.accept("Place"));
  await page.keyboard.press("F2");
  await wait(() => /renamed Point to Place in 2 files/.test(document.querySelector("#status").textContent), null,
    async () => `no rename: ${await statusText()}`, 10000);
  if (await page.evaluate(() => window.cove.docs.get("types.go").doc.dirty() || window.cove.docs.get("main.go").doc.dirty())) await fail("the renamed files were left unsaved");
  if (errors.length) await fail("page errors: " + errors.join("; "));
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
