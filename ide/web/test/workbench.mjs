// The IDE as a VS Code user works in it, in Debian's Chromium at 1280×800
// and at 800×600 (driven by TestBrowserIDEWorkbench in cmd/cove).
// Usage: node workbench.mjs URL main|killed|stopped PROJECT_DIR
//   main:   keys from the terminal, panels, search, highlighting, the
//           preview, the status bar, colours; then it prints
//           "cove-test: interrupt" for the test to Ctrl-C the launcher,
//           and checks what each window does.
//   killed: prints "cove-test: kill" for the test to kill the launcher
//           (no word to the windows), and checks they find out.
//   stopped: prints "cove-test: stop" for the test to run cove stop, and
//           checks that every window stays, saying why.
// COVE_SCREENSHOTS=DIR saves the IDE at each size (ide-WxH.png) there;
// COVE_FAIL_SHOT=PREFIX saves every page as PREFIX-N.png on a failure.
// It prints "ok" last when every check passed.
import { chromium } from "playwright-core";
import { firstShellWait, shellState, traceContext, traced } from "./trace.mjs";

const [url, mode, projectDir] = process.argv.slice(2);
const shots = process.env.COVE_SCREENSHOTS;
const sizes = [{ width: 1280, height: 800 }, { width: 800, height: 600 }];
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const origin = new URL(url).origin;
let where = "";
const fail = async (msg) => {
  console.error(`workbench ${where}: ${msg}\n${traced()}`);
  if (process.env.COVE_FAIL_SHOT) {
    for (const [i, p] of browser.contexts().flatMap((c) => c.pages()).entries()) await p.screenshot({ path: `${process.env.COVE_FAIL_SHOT}-${i}.png` }).catch(() => {});
  }
  await browser.close();
  process.exit(1);
};
const wait = (page, fn, arg, msg, timeout = 10000) =>
  page.waitForFunction(fn, arg, { timeout }).catch(async () => fail(typeof msg === "function" ? await msg() : msg));

// shellReady waits for page's first terminal.
const shellReady = (page, why = "no terminal") =>
  page.waitForFunction(() => window.cove?.shells[0]?.shell.id, null, { timeout: firstShellWait }).catch(async () => fail(`${why}: ${await shellState(page)}`));

// open makes a page in a fresh context (its own localStorage) at size.
async function open(size) {
  const ctx = await browser.newContext({ viewport: size });
  traceContext(ctx);
  const page = await ctx.newPage();
  page.errors = [];
  page.on("pageerror", (e) => page.errors.push(e.message));
  // The launcher's Content-Security-Policy: anything it blocks is broken.
  page.on("console", (m) => { if (/Content Security Policy|Refused to/.test(m.text())) page.errors.push(m.text()); });
  await page.goto(url);
  await shellReady(page);
  return page;
}

const screen = (page, i = 0) => page.evaluate((i) => {
  const b = window.cove.shells[i].shell.term.buffer.active;
  const lines = [];
  for (let n = 0; n < b.length; n++) lines.push(b.getLine(n).translateToString(true));
  return lines.join("\n");
}, i);
const box = (page, sel) => page.$eval(sel, (e) => {
  const r = e.getBoundingClientRect();
  return { x: r.x, y: r.y, w: r.width, h: r.height, visible: r.width > 0 && r.height > 0 };
});
const focusTerminal = async (page) => {
  await page.click("#terms .term-pane:not([hidden])");
  await wait(page, () => document.activeElement?.closest(".xterm"), null, "the terminal did not take the focus");
};
const activeDoc = (page) => page.evaluate(() => {
  const d = [...window.cove.docs.values()].find((d) => !d.pane.hidden);
  if (!d) return null;
  const { from, to } = d.doc.view.state.selection.main;
  return { path: d.doc.path, selected: d.doc.view.state.sliceDoc(from, to) };
});
// openInTree opens a file by a click in the tree, the keys in its editor.
async function openFile(page, path) {
  await page.click(`.entry[data-path="${path}"]`);
  await wait(page, (p) => document.querySelector(".tab.active")?.title === p, path, `${path} did not open`);
  await page.click(".pane:not([hidden]) .cm-content");
}
// contrast is WCAG's contrast ratio of two colours (#rrggbb or rgb()).
const contrast = (page, a, b) => page.evaluate(([a, b]) => {
  const rgb = (c) => (c.startsWith("#") ? [1, 3, 5].map((i) => parseInt(c.slice(i, i + 2), 16)) : c.match(/\d+/g).slice(0, 3).map(Number));
  const lum = (c) => rgb(c).map((v) => v / 255).map((v) => (v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4))
    .reduce((s, v, i) => s + v * [0.2126, 0.7152, 0.0722][i], 0);
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}, [a, b]);

async function workbench(page, size) {
  // 1. Ctrl+Shift+` from the terminal: a second terminal (with Shift the
  // key is "~": the IDE goes by the key's code).
  await focusTerminal(page);
  await page.keyboard.press("Control+Shift+Backquote");
  await wait(page, () => window.cove.shells.length === 2 && window.cove.shells[1].shell.id, null,
    async () => `Ctrl+Shift+\` opened no second terminal (${await page.evaluate(() => window.cove.shells.length)} shells)`);
  if ((await page.$$("#term-tabs .tab:not(#new-term):not(#log-tab):not(#ports-tab):not(#problems-tab)")).length !== 2) await fail("no second terminal tab");
  await page.click("#term-tabs .tab.active .close");
  await wait(page, () => window.cove.shells.length === 1, null, "the second terminal did not close");

  // 2. Ctrl+P and the command palette while the terminal has the keys.
  await focusTerminal(page);
  await page.keyboard.press("Control+p");
  await wait(page, () => document.activeElement?.matches("#quick input"), null, "Ctrl+P in the terminal opened no quick open");
  await page.keyboard.press("Escape");
  await focusTerminal(page);
  await page.keyboard.press("Control+Shift+P");
  await wait(page, () => document.activeElement?.matches("#quick.palette input"), null, "Ctrl+Shift+P in the terminal opened no palette");
  const listed = await page.$$eval(".palette .quick-item", (is) => is.map((i) => i.dataset.command));
  for (const c of ["newTerminal", "toggleSide", "togglePanel", "save", "search", "agent", "preview"]) {
    if (!listed.includes(c)) await fail(`the palette lacks ${c}: ${listed}`);
  }
  await page.keyboard.type("hide side bar");
  await wait(page, () => document.querySelector(".palette .quick-item.selected")?.dataset.command === "toggleSide", null,
    async () => "the palette picks " + (await page.$eval(".palette .quick-item.selected", (i) => i.dataset.command).catch(() => "nothing")));
  await page.keyboard.press("Enter");
  await wait(page, () => !document.querySelector("#side").offsetWidth, null, "the palette's command did not hide the side bar");
  if (await page.$("#quick")) await fail("the palette stayed open");

  // 3. Ctrl+B (from the terminal) shows the side bar again; Ctrl+J hides
  // the terminals and gives the keys to the editor; again, back.
  await focusTerminal(page);
  const mainNarrow = (await box(page, "#main")).w;
  await page.keyboard.press("Control+b");
  await wait(page, () => document.querySelector("#side").offsetWidth > 100, null, "Ctrl+B in the terminal did not show the side bar");
  if ((await box(page, "#main")).w >= mainNarrow) await fail("the editor did not give the side bar its room back");
  await page.keyboard.press("Control+b");
  await wait(page, () => !document.querySelector("#side").offsetWidth, null, "Ctrl+B did not hide the side bar");
  await page.keyboard.press("Control+b");
  await focusTerminal(page);
  await page.keyboard.press("Control+j");
  await wait(page, () => !document.querySelector("#bottom").offsetHeight && !document.activeElement?.closest("#bottom"), null,
    "Ctrl+J did not hide the terminals (or left the keys in them)");
  await page.keyboard.press("Control+j");
  await wait(page, () => document.querySelector("#bottom").offsetHeight > 50 && document.activeElement?.closest(".xterm"), null,
    "Ctrl+J did not bring the terminals back with the keys");
  await page.keyboard.press("Control+Alt+b");
  await wait(page, () => !document.querySelector("#agent").offsetWidth, null, "Ctrl+Alt+B did not hide the agent");
  await page.keyboard.press("Control+Alt+b");
  await wait(page, () => document.querySelector("#agent").offsetWidth > 100, null, "Ctrl+Alt+B did not show the agent");

  // 4. A usable editor: every panel shown, and room to edit.
  const ed = await box(page, "#editors");
  if (ed.w < 300 || ed.h < 200) await fail(`the editor is ${ed.w}×${ed.h} with every panel shown`);
  for (const p of ["#side", "#agent", "#bottom"]) {
    if (!(await box(page, p)).visible) await fail(`${p} is not shown by default`);
  }

  // 5. Drag the side bar's edge 30px right and the terminals' 50px up;
  // a reload keeps both.
  const drag = async (sel, dx, dy) => {
    const g = await box(page, sel);
    await page.mouse.move(g.x + g.w / 2, g.y + g.h / 2);
    await page.mouse.down();
    await page.mouse.move(g.x + g.w / 2 + dx / 2, g.y + g.h / 2 + dy / 2);
    await page.mouse.move(g.x + g.w / 2 + dx, g.y + g.h / 2 + dy);
    await page.mouse.up();
  };
  const side0 = (await box(page, "#side")).w;
  const bottom0 = (await box(page, "#bottom")).h;
  await drag(".gutter-side", 30, 0);
  await drag(".gutter-bottom", 0, -50);
  const side1 = (await box(page, "#side")).w;
  const bottom1 = (await box(page, "#bottom")).h;
  if (Math.abs(side1 - side0 - 30) > 2) await fail(`dragged 30px, the side bar went from ${side0} to ${side1}`);
  if (Math.abs(bottom1 - bottom0 - 50) > 2) await fail(`dragged 50px, the terminals went from ${bottom0} to ${bottom1}`);
  await page.reload();
  await shellReady(page);
  const side2 = (await box(page, "#side")).w;
  const bottom2 = (await box(page, "#bottom")).h;
  if (Math.abs(side2 - side1) > 1 || Math.abs(bottom2 - bottom1) > 1) await fail(`after a reload the side bar is ${side2} (was ${side1}), the terminals ${bottom2} (were ${bottom1})`);
  if ((await box(page, "#editors")).w < 280) await fail("the drag left no room to edit");

  // 6. A search hit selects the match, not its line.
  await page.keyboard.press("Control+Shift+F");
  await page.keyboard.type("NEEDLE-77");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".search-hit", { timeout: 10000 }).catch(() => fail("no search hit"));
  if ((await page.textContent(".search-hit mark")) !== "needle-77") await fail("the hit does not mark its match");
  await page.click(".search-hit");
  await wait(page, () => {
    const d = window.cove.docs.get("notes.md");
    if (!d) return false;
    const { from, to } = d.doc.view.state.selection.main;
    return d.doc.view.state.sliceDoc(from, to) === "needle-77";
  }, null, async () => "the hit selected " + JSON.stringify(await activeDoc(page)));
  await page.fill("#search", "");
  await page.press("#search", "Escape");

  // 7. The status bar: line and column, language, the branch.
  await page.click(".pane:not([hidden]) .cm-content");
  await page.keyboard.press("Control+Home");
  for (let i = 0; i < 2; i++) await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Home");
  for (let i = 0; i < 4; i++) await page.keyboard.press("ArrowRight");
  await wait(page, () => document.querySelector("#st-pos").textContent === "Ln 3, Col 5", null,
    async () => "the status bar says " + (await page.textContent("#statusbar")));
  if ((await page.textContent("#st-lang")) !== "Markdown") await fail("the language shown: " + (await page.textContent("#st-lang")));
  await wait(page, () => document.querySelector("#st-branch").textContent === "⎇ ux-branch", null,
    async () => "the branch shown: " + (await page.textContent("#st-branch")));
  // A detached HEAD shows its commit.
  const put = (path, body) => page.evaluate(([p, b]) => fetch(`/api/file?path=${encodeURIComponent(p)}`, { method: "PUT", body: b }).then((r) => r.status), [path, body]);
  const wrote = await put(".git/HEAD", "0123456789abcdef0123456789abcdef01234567\n");
  if (wrote >= 300) await fail(`writing .git/HEAD: ${wrote}`);
  await page.evaluate(() => window.dispatchEvent(new Event("focus")));
  await wait(page, () => document.querySelector("#st-branch").textContent === "⎇ 0123456 (detached)", null,
    async () => "a detached HEAD shows as " + (await page.textContent("#st-branch")));
  await put(".git/HEAD", "ref: refs/heads/ux-branch\n");
  await page.evaluate(() => window.dispatchEvent(new Event("focus")));
  await wait(page, () => document.querySelector("#st-branch").textContent === "⎇ ux-branch", null, "the branch did not come back");

  // 8. Fenced code in Markdown is highlighted as its language (sh).
  await wait(page, () => [...document.querySelectorAll(".pane:not([hidden]) .cm-line span")].some((s) => s.textContent === '"fenced"'), null,
    async () => "the fenced shell is not highlighted: " + (await page.innerHTML(".pane:not([hidden]) .cm-content")));

  // 9. The preview: a heading; HTML stays text; only web links link.
  await page.keyboard.press("Control+Shift+V");
  await page.waitForSelector(".pane:not([hidden]) .md-preview", { timeout: 10000 }).catch(() => fail("Ctrl+Shift+V showed no preview"));
  const pv = await page.$eval(".pane:not([hidden]) .md-preview", (p) => ({
    h1: p.querySelector("h1")?.textContent, img: !!p.querySelector("img"), text: p.textContent,
    links: [...p.querySelectorAll("a")].map((a) => a.getAttribute("href")), editor: !!p.parentNode.querySelector(".cm-editor").offsetHeight,
  }));
  if (pv.h1 !== "Notes" || pv.img || !pv.text.includes("<img src=x onerror=alert(1)>") || pv.links.join() !== "https://example.com/" || pv.editor) {
    await fail("the preview: " + JSON.stringify(pv));
  }
  if (await page.evaluate(() => window.alerted)) await fail("the preview ran a script");
  await page.keyboard.press("Control+Shift+V");
  await wait(page, () => !document.querySelector(".pane:not([hidden]) .md-preview") && document.activeElement?.closest(".cm-editor"), null,
    "Ctrl+Shift+V did not bring the editor back");

  // 10. A Makefile is highlighted: its target, and $(CC) in a recipe.
  await openFile(page, "Makefile");
  await wait(page, () => {
    const spans = [...document.querySelectorAll(".pane:not([hidden]) .cm-line span")].map((s) => s.textContent);
    return spans.includes("build") && spans.includes("$(CC)") && spans.includes("# build the tool");
  }, null, async () => "the Makefile is not highlighted: " + (await page.innerHTML(".pane:not([hidden]) .cm-content")));
  if ((await page.textContent("#st-lang")) !== "Makefile") await fail("the Makefile's language shown: " + (await page.textContent("#st-lang")));

  // 11. The favicon, from the launcher, under its policy.
  const icon = await page.evaluate(async () => {
    const href = document.querySelector("link[rel=icon]")?.href;
    const r = href && (await fetch(href));
    return { href, status: r && r.status, type: r && r.headers.get("Content-Type") };
  });
  if (icon.status !== 200 || icon.type !== "image/svg+xml") await fail("the favicon: " + JSON.stringify(icon));

  // 12. Colours on the light theme: the terminal's ANSI colours and the
  // inputs can be read; an input looks like a place to type.
  const theme = await page.evaluate(() => window.cove.shells[0].shell.term.options.theme);
  for (const c of ["cyan", "yellow", "green", "blue", "red", "magenta"]) {
    const r = await contrast(page, theme[c] || "#ffffff", theme.background);
    if (!(r >= 4.5)) await fail(`the terminal's ${c} (${theme[c]}) on ${theme.background}: ${r.toFixed(2)}:1, want 4.5:1`);
  }
  const input = await page.$eval("#search", (e) => {
    const s = getComputedStyle(e);
    return { bg: s.backgroundColor, border: s.borderTopColor, panel: getComputedStyle(document.querySelector("#side")).backgroundColor };
  });
  if (input.bg === input.panel || (await contrast(page, input.border, input.panel)) < 1.5) await fail("the search box looks disabled: " + JSON.stringify(input));

  // A realistic state for the screenshot: a C file, colours from ls in
  // the terminal, the agent's answer.
  await openFile(page, "main.c");
  await focusTerminal(page);
  await page.keyboard.type("clear; ls --color=always -p / | head -12; printf '\\033[36mcyan\\033[0m \\033[33myellow\\033[0m \\033[32mgreen\\033[0m\\n'\n");
  await wait(page, () => {
    const b = window.cove.shells[0].shell.term.buffer.active;
    for (let i = 0; i < b.length; i++) if (b.getLine(i).translateToString(true).startsWith("cyan yellow green")) return true;
    return false;
  }, null, async () => "the terminal did not run ls:\n" + (await screen(page)));
  if (size.width === 1280) {
    await page.fill("#agent-input", "What does the Makefile do?");
    await page.press("#agent-input", "Enter");
  }
  await wait(page, () => document.querySelector("#agent-log").textContent.includes("compiles it"), null,
    async () => "no answer from the agent: " + (await page.textContent("#agent-log")), 15000);
  await page.click(".pane:not([hidden]) .cm-content");
  await page.keyboard.press("Control+End");
  if (shots) await page.screenshot({ path: `${shots}/ide-${size.width}x${size.height}.png` });
  if (page.errors.length) await fail("page errors: " + page.errors.join("; "));
}

// stopped checks a window's "workspace stopped" state: it says so and
// why, how to start it again, keeps the unsaved file, takes no keys in
// its terminal, and a save says why it cannot.
async function stopped(page, why, unsaved) {
  await page.waitForSelector("#stopped", { timeout: 15000 }).catch(async () => fail("no stopped state: " + (await page.textContent("#statusbar"))));
  const text = await page.textContent("#stopped");
  if (!text.includes("The workspace stopped") || !text.includes(why) || !text.includes(`cove up ${projectDir}`)) await fail("the stopped state says: " + text);
  if (unsaved && !text.includes(unsaved)) await fail("it does not say the unsaved file is kept: " + text);
  if (!(await page.evaluate(() => window.cove.shells.every((s) => s.shell.term.options.disableStdin)))) await fail("the terminal still takes keys");
  if (unsaved) {
    if (!(await page.$(`.tab.dirty[title="${unsaved}"]`))) await fail("the unsaved tab is gone");
    if (!(await page.textContent(".pane:not([hidden]) .cm-content")).includes("unsaved line")) await fail("the unsaved text is gone");
    await page.click(".pane:not([hidden]) .cm-content");
    await page.keyboard.press("Control+s");
    await wait(page, () => /not saved: the workspace stopped/.test(document.querySelector("#status").textContent), null,
      async () => "Ctrl+S said: " + (await page.textContent("#status")));
  }
  await page.click("#stopped .reconnect");
  await wait(page, () => /not back yet/.test(document.querySelector("#stopped .stopped-note").textContent), null,
    async () => "Reconnect said: " + (await page.textContent("#stopped")));
  if (page.errors.length) await fail("page errors: " + page.errors.join("; "));
}

async function edit(page, path) {
  await openFile(page, path);
  await page.keyboard.press("Control+End");
  await page.keyboard.type("unsaved line");
  await page.waitForSelector(`.tab.dirty[title="${path}"]`);
}

try {
  if (mode === "main") {
    const pages = [];
    for (const size of sizes) {
      where = `${size.width}x${size.height}`;
      const page = await open(size);
      await workbench(page, size);
      pages.push(page);
    }
    // Ctrl-C on the launcher: an app window closes itself; one with
    // unsaved changes stays, as do tabs, saying the workspace stopped.
    where = "after Ctrl-C";
    const [wide, narrow] = pages;
    // An app window: Chromium lets a script close a window whose history
    // is its one page (an --app window) or that a script opened; a
    // playwright page starts at about:blank, so this one is opened by a
    // script.
    const popup = (page) => Promise.all([page.context().waitForEvent("page"), page.evaluate(() => window.open("/?window=app", "_blank", "popup"))]).then(([p]) => p);
    const app = await popup(wide);
    await shellReady(app, "no terminal in the app window");
    if (new URL(app.url()).search !== "") await fail("the app window's address keeps its mark: " + app.url());
    const appClosed = new Promise((res) => app.once("close", () => res(true)));
    await edit(narrow, "hello.txt");
    // A window that lost its launcher for a while (offline here): it says
    // so; Reconnect, once the launcher answers, reloads the page with the
    // unsaved changes brought back.
    where = "offline";
    await narrow.context().setOffline(true);
    await narrow.evaluate(() => fetch("/api/tree?path=.").catch(() => {}));
    await narrow.waitForSelector("#stopped", { timeout: 15000 }).catch(() => fail("a failed request showed no stopped state"));
    if (!(await narrow.textContent("#stopped")).includes("its launcher is gone")) await fail("offline: " + (await narrow.textContent("#stopped")));
    await narrow.context().setOffline(false);
    await narrow.click("#stopped .reconnect");
    await narrow.waitForFunction(() => !document.querySelector("#stopped") && window.cove?.shells[0]?.shell.id, null, { timeout: firstShellWait })
      .catch(() => fail("Reconnect did not reload the page"));
    await wait(narrow, () => document.querySelector('.tab.dirty[title="hello.txt"]') && window.cove.docs.get("hello.txt").doc.text().endsWith("unsaved line"), null,
      "the unsaved change did not come back after the reconnect");
    // Opened only now: a window of the context that was offline would
    // (rightly) have found its launcher gone.
    where = "after Ctrl-C";
    const dirtyApp = await popup(narrow);
    dirtyApp.errors = [];
    await shellReady(dirtyApp, "no terminal in the app window");
    await edit(dirtyApp, "notes.md");
    console.log("cove-test: interrupt");
    if (!(await Promise.race([appClosed, new Promise((res) => setTimeout(() => res(false), 15000))]))) await fail("the app window did not close");
    await stopped(wide, "cove up was stopped", null);
    await stopped(narrow, "cove up was stopped", "hello.txt");
    await stopped(dirtyApp, "cove up was stopped", "notes.md");
  } else if (mode === "stopped") {
    // cove stop: the launcher says the workspace stopped; no window
    // closes, an app window included.
    const pages = [];
    for (const size of sizes) {
      where = `${size.width}x${size.height}`;
      pages.push(await open(size));
    }
    where = "after cove stop";
    // An app window as the launcher opens one: its address holds the
    // token (a popup's copy of its opener's sessionStorage came too late
    // once under CI's load: the page had no token, every request a 401).
    const app = await Promise.all([pages[1].context().waitForEvent("page"),
      pages[1].evaluate(() => window.open(`/?token=${encodeURIComponent(sessionStorage.getItem("cove-token"))}&window=app`, "_blank", "popup"))]).then(([p]) => p);
    app.errors = [];
    await shellReady(app, "no terminal in the app window");
    console.log("cove-test: stop");
    for (const page of [...pages, app]) await stopped(page, "the workspace was stopped", null);
    await app.waitForTimeout(1000);
    if (app.isClosed()) await fail("cove stop closed the app window");
  } else {
    // Killed: no word from the launcher; the windows see it gone.
    const pages = [];
    for (const size of sizes) {
      where = `${size.width}x${size.height}`;
      const page = await open(size);
      await edit(page, "hello.txt");
      // No repository: no branch shown.
      await page.waitForTimeout(500);
      if (!(await page.$("#st-branch[hidden]"))) await fail("a branch is shown without a repository: " + (await page.textContent("#st-branch")));
      pages.push(page);
    }
    where = "after a kill";
    console.log("cove-test: kill");
    for (const page of pages) await stopped(page, "its launcher is gone", "hello.txt");
  }
  console.log("ok");
} catch (e) {
  await fail(e.stack || String(e));
}
await browser.close();
