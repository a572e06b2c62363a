import "./token.js"; // first: every request after it carries the token
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { Shell } from "./terminal.js";
import { Doc } from "./editor.js";
import { gotoLine } from "@codemirror/search";
import { startAgent } from "./agent.js";
import { startSearch } from "./search.js";
import { Commands } from "./commands.js";
import { startLayout } from "./layout.js";
import { startLifeline } from "./lifeline.js";
import { startStatusBar } from "./statusbar.js";
import { startNotes } from "./notes.js";
import { startPorts } from "./ports.js";
import { startLanguages } from "./languages.js";
import { startSCM } from "./scm.js";
import { startTasks } from "./tasks.js";
import { startOutline } from "./outline.js";
import { startSettings } from "./settings.js";
import { $, el } from "./dom.js";

const darkQuery = matchMedia("(prefers-color-scheme: dark)");
// On the light background xterm's own colours are faint (its cyan, the
// colour of ls's links, is 3.4:1; its yellow 2.4:1): these are 4.5:1 or
// more, as text needs.
const lightANSI = {
  black: "#383a42", red: "#c8372d", green: "#3d7f3a", yellow: "#8d6300", blue: "#2f63d6", magenta: "#9a2a98", cyan: "#0a6f8f", white: "#6b6e76",
  brightBlack: "#5c5f66", brightRed: "#a8261f", brightGreen: "#2e6b2c", brightYellow: "#765300", brightBlue: "#2152be", brightMagenta: "#82207f",
  brightCyan: "#075a75", brightWhite: "#7d8088",
};
const termTheme = () =>
  darkQuery.matches
    ? { background: "#1e2127", foreground: "#d7dae0", cursor: "#d7dae0" }
    : { background: "#fafafa", foreground: "#383a42", cursor: "#383a42", selectionBackground: "#d0d0d0", ...lightANSI };

// ---- files -------------------------------------------------------------

async function listDir(path) {
  const r = await fetch(`/api/tree?path=${encodeURIComponent(path)}`);
  if (!r.ok) throw new Error(await r.text());
  return r.json();
}

const parentOf = (p) => (p.includes("/") ? p.slice(0, p.lastIndexOf("/")) : ".");
const enc = encodeURIComponent;

// renderDir lists a directory into the tree; folders that were open stay
// open when it is drawn again (after a change on disk).
async function renderDir(path, into, open = null) {
  const entries = await listDir(path);
  open ??= new Set([...into.querySelectorAll(".entry.dir.open")].map((e) => e.dataset.path));
  into.replaceChildren();
  for (const e of entries) {
    const full = path === "." ? e.name : `${path}/${e.name}`;
    const row = el("div", { class: `entry ${e.dir ? "dir" : "file"}`, "data-path": full, title: full, tabindex: "-1" }, e.name);
    into.append(row);
    row.addEventListener("contextmenu", (ev) => (ev.preventDefault(), select(row), entryMenu(row, ev.clientX, ev.clientY)));
    row.addEventListener("keydown", (ev) => entryKey(row, ev));
    if (e.dir) {
      const kids = el("div", { class: "children", hidden: true });
      into.append(kids);
      const toggle = async (reopen) => {
        kids.hidden = !kids.hidden;
        row.classList.toggle("open", !kids.hidden);
        if (!kids.hidden) await renderDir(full, kids, reopen);
      };
      row.toggle = toggle;
      row.addEventListener("click", () => (select(row), toggle()));
      if (open.has(full)) toggle(open).catch(() => {});
    } else {
      row.addEventListener("click", () => (select(row), openFile(full, 0, false)));
      row.addEventListener("dblclick", () => openFile(full));
    }
  }
  dimIgnored(path, into);
}

// ---- file operations --------------------------------------------------------

function select(row) {
  for (const r of document.querySelectorAll(".entry.selected")) r.classList.remove("selected");
  row.classList.add("selected");
  row.focus();
}

// The tree by keyboard, as in VS Code: arrows move, Enter opens, F2
// renames, Delete deletes.
function entryKey(row, ev) {
  const rows = [...document.querySelectorAll("#tree .entry")].filter((r) => r.offsetParent);
  const i = rows.indexOf(row);
  const to = { ArrowDown: rows[i + 1], ArrowUp: rows[i - 1] }[ev.key];
  if (to) return ev.preventDefault(), select(to);
  if (ev.key === "Enter") return row.classList.contains("dir") ? row.click() : openFile(row.dataset.path, 0, true, { side: ev.ctrlKey || ev.metaKey });
  if (ev.key === "ArrowRight" && row.classList.contains("dir") && !row.classList.contains("open")) return row.toggle();
  if (ev.key === "ArrowLeft" && row.classList.contains("open")) return row.toggle();
  if (ev.key === "F2") return ev.preventDefault(), renameEntry(row.dataset.path);
  if (ev.key === "Delete") return ev.preventDefault(), deleteEntry(row.dataset.path, row.classList.contains("dir"));
}

function entryMenu(row, x, y) {
  closeMenu();
  const path = row.dataset.path;
  const isDir = row.classList.contains("dir");
  const item = (label, key, run) => el("button", { onclick: () => (closeMenu(), run()) }, label, el("kbd", {}, key));
  const menu = el("div", { id: "menu", style: `left:${x}px;top:${y}px` },
    ...(isDir ? [] : [item("Open to the side", "Ctrl+Enter", () => openFile(path, 0, true, { side: true }))]),
    item("New file…", "", () => newEntry(false, isDir ? path : parentOf(path))),
    item("New folder…", "", () => newEntry(true, isDir ? path : parentOf(path))),
    item("Rename…", "F2", () => renameEntry(path)),
    item("Delete", "Del", () => deleteEntry(path, isDir)));
  document.body.append(menu);
  menu.querySelector("button").focus();
}
function closeMenu() {
  document.getElementById("menu")?.remove();
}
addEventListener("click", (ev) => ev.target.closest("#menu") || closeMenu());
addEventListener("keydown", (ev) => ev.key === "Escape" && closeMenu());

// The folder new things go in: the selected one, or the selected file's.
function selectedDir() {
  const row = document.querySelector("#tree .entry.selected");
  if (!row) return ".";
  return row.classList.contains("dir") ? row.dataset.path : parentOf(row.dataset.path);
}

async function newEntry(dir, inDir = selectedDir()) {
  const name = prompt(dir ? "New folder (a path in the project):" : "New file (a path in the project):", inDir === "." ? "" : `${inDir}/`);
  if (!name || name.endsWith("/")) return;
  const r = dir
    ? await fetch(`/api/dir?path=${enc(name)}`, { method: "POST" })
    : await fetch(`/api/file?path=${enc(name)}`, { method: "PUT", body: "", headers: { "If-None-Match": "*" } });
  if (!r.ok) return status(r.status === 412 ? `${name} exists already` : `${name}: ${await r.text()}`);
  await refreshDir(parentOf(name));
  if (!dir) await openFile(name);
}

async function renameEntry(path) {
  const to = prompt(`Rename or move ${path} to:`, path);
  if (!to || to === path) return;
  const r = await fetch(`/api/rename?from=${enc(path)}&to=${enc(to)}`, { method: "POST" });
  if (!r.ok) return status(r.status === 409 ? `${to} exists already: nothing was moved` : `rename ${path}: ${await r.text()}`);
  // Open editors follow their file.
  for (const [p, d] of [...docs]) {
    if (p !== path && !p.startsWith(`${path}/`)) continue;
    const np = to + p.slice(path.length);
    docs.delete(p);
    docs.set(np, d);
    d.doc.rename(np);
    d.tab.title = np;
    d.tab.firstChild.textContent = np.split("/").pop();
    if (activeDoc === p) activeDoc = np;
    // Its language server knew it by the old name: closed there, and
    // opened under the new one (maybe another server's, by its kind).
    languages.renamed(d.doc, p);
  }
  saveDocs();
  await refreshDir(parentOf(path));
  if (parentOf(to) !== parentOf(path)) await refreshDir(parentOf(to));
  status(`${path} → ${to}`);
}

async function deleteEntry(path, isDir) {
  if (!confirm(`Delete ${path}${isDir ? " and everything in it" : ""}? This cannot be undone.`)) return;
  const r = await fetch(`/api/file?path=${enc(path)}`, { method: "DELETE" });
  if (!r.ok) return status(`delete ${path}: ${await r.text()}`);
  for (const [p, d] of [...docs]) {
    if (p !== path && !p.startsWith(`${path}/`)) continue;
    if (d.doc.dirty()) status(`${p} was deleted; its unsaved changes are still in the editor (Ctrl-S writes it again)`);
    else closeDoc(p);
  }
  await refreshDir(parentOf(path));
}

// dimIgnored greys what .gitignore hides, as editors do; the tree works
// the same without it.
async function dimIgnored(path, into) {
  const r = await fetch(`/api/ignored?path=${encodeURIComponent(path)}`).catch(() => null);
  if (!r || !r.ok) return;
  const names = new Set(await r.json());
  for (const row of into.querySelectorAll(":scope > .entry")) {
    row.classList.toggle("ignored", names.has(row.textContent));
  }
}

// ---- editor tabs ----------------------------------------------------------

const docs = new Map(); // path → {doc, tab, pane, group}
// userChose is set once the user shows a file: what a reload brings back
// (its files open in a popup too, which copies the session) comes in
// behind it.
let userChose = false;

// ---- editor groups ------------------------------------------------------------

// The editors stand in one group or two side by side, each with its own
// tabs; a file is open in one of them. Files open in the group in front;
// "to the side" (Ctrl+\, Ctrl+Enter in quick open, the tree's menu)
// puts one in the other. A second group with no file left goes; the
// first, when its last file is closed, takes the second's.
const groups = [{ box: $("#group-0"), tabs: $("#editor-tabs"), editors: $("#editors") }];
let frontGroup = 0;
groups[0].editors.addEventListener("mousedown", () => (frontGroup = 0));
function group(i) {
  if (i === 1 && !groups[1]) {
    const tabs = el("div", { class: "tabs", id: "editor-tabs-2" });
    const editors = el("div", { class: "editors", id: "editors-2" });
    const box = el("div", { class: "group", id: "group-1" }, tabs, editors);
    $("#groups").append(box);
    editors.addEventListener("mousedown", () => (frontGroup = 1));
    groups[1] = { box, tabs, editors };
  }
  return groups[i];
}
const inGroup = (i) => [...docs.keys()].filter((p) => docs.get(p).group === i);

// place puts an open file's tab and editor in group i.
function place(d, i) {
  const g = group(i);
  d.group = i;
  g.editors.append(d.pane);
  g.tabs.insertBefore(d.tab, i === 0 ? $("#md-preview") : null);
  d.doc.view.requestMeasure();
}

// tidyGroups drops an empty second group; with collapse, an empty first
// group takes the second's files (its last file was closed).
function tidyGroups(collapse) {
  if (groups[1] && collapse && !inGroup(0).length) for (const p of inGroup(1)) place(docs.get(p), 0);
  if (groups[1] && !inGroup(1).length) {
    groups[1].box.remove();
    groups.length = 1;
    frontGroup = 0;
  }
  $("#welcome").hidden = inGroup(0).length > 0;
  $("#groups").classList.toggle("split", groups.length > 1);
}

// toSide moves an open file to the other group (made if need be), and
// shows the one behind it in the group it leaves.
function toSide(path) {
  const d = docs.get(path);
  if (!d) return;
  const from = d.group;
  place(d, from === 0 ? 1 : 0);
  const behind = frontOf(from);
  if (behind) showDoc(behind, false);
  tidyGroups(false);
  showDoc(path);
}

// frontOf is the file in front in group i (its active tab), else its last.
const frontOf = (i) => inGroup(i).find((p) => docs.get(p).tab.classList.contains("active")) || inGroup(i).pop();

// showGroup gives the keys to group i's file in front.
function showGroup(i) {
  const p = frontOf(i);
  if (p) showDoc(p);
  else if (groups[i]) frontGroup = i;
}

// openFile shows path in the editor (opening it if needed), at line if
// given (with at: {col, len}, that part of it selected); focus false
// leaves the keyboard where it is (a click in the tree, as in VS Code, so
// that F2 or Delete act on the file next). at.side opens it in the other
// group, or moves it there; at.group in that one.
async function openFile(path, line, focus = true, at = {}) {
  if (docs.has(path) && at.side) toSide(path);
  if (docs.has(path)) {
    if (!(at.behind && userChose)) showDoc(path, focus, at.behind);
    if (line) docs.get(path).doc.goto(line, at.col, at.len);
    return;
  }
  const r = await fetch(`/api/file?path=${encodeURIComponent(path)}`);
  if (!r.ok) return status(`${path}: ${await r.text()}`);
  const text = await r.text();
  if (docs.has(path)) return at.behind ? undefined : showDoc(path, focus); // opened meanwhile
  const pane = el("div", { class: "pane" });
  $("#editors").append(pane);
  const tab = el("button", { class: "tab", title: path, onclick: () => showDoc(tab.title) }, path.split("/").pop());
  const close = el("span", { class: "close", title: "Close", onclick: (ev) => (ev.stopPropagation(), closeDoc(tab.title)) }, "×");
  tab.append(close);
  const doc = new Doc(pane, path, text, {
    dark: darkQuery.matches,
    prefs: userSettings.get(),
    etag: r.headers.get("ETag"),
    onDirty: (dirty) => tab.classList.toggle("dirty", dirty),
    onStatus: status,
    onCursor: (d) => d.path === activeDoc && statusBar.doc(d),
    beforeSave: (d) => languages.beforeSave(d),
  });
  doc.changed.add(() => doc.path === activeDoc && outline.changed());
  const entry = { doc, tab, pane, group: 0 };
  docs.set(path, entry);
  place(entry, at.group ?? (at.side ? 1 - frontGroup : frontGroup));
  tidyGroups(false);
  languages.attach(doc);
  // A file brought back by a reload stays behind one the user opened
  // meanwhile.
  if (at.behind && userChose) pane.hidden = true;
  else showDoc(path, focus, at.behind);
  saveDocs();
  if (line) doc.goto(line, at.col, at.len);
}

function showDoc(path, focus = true, restored = false) {
  if (!restored) userChose = true;
  const d = docs.get(path);
  for (const [p, o] of docs) {
    if (o.group !== d.group) continue;
    o.pane.hidden = p !== path;
    o.tab.classList.toggle("active", p === path);
  }
  frontGroup = d.group;
  for (const [i, g] of groups.entries()) g.box.classList.toggle("front", i === d.group);
  if (focus) (d.preview || d.doc.view).focus();
  activeDoc = path;
  statusBar.doc(d.doc);
  $("#md-preview").hidden = !isMarkdown(path);
  $("#md-preview").textContent = d.preview ? "Edit" : "Preview";
  saveDocs();
  outline.refresh();
}

// ---- Markdown preview -------------------------------------------------------

const isMarkdown = (path) => /\.(md|markdown)$/i.test(path);

// togglePreview shows a Markdown file rendered in place of its editor (as
// the agent's answers are: its HTML as text, only web and mail links),
// following the text as it changes; again, the editor comes back.
async function togglePreview(path = activeDoc) {
  const d = docs.get(path);
  if (!d) return;
  if (!isMarkdown(path)) return status(`${path} is not Markdown: nothing to preview`);
  if (d.preview) {
    d.doc.changed.delete(d.redraw);
    d.preview.remove();
    d.preview = null;
    d.pane.classList.remove("previewing");
    if (path === activeDoc) showDoc(path);
    return;
  }
  const md = await import("./markdown.js").catch((e) => status(`no preview: ${e.message}`));
  if (!md) return;
  const { renderMarkdown } = md;
  if (d.preview || !docs.has(path)) return;
  const box = el("div", { class: "md-preview markdown", tabindex: "0", "aria-label": `Preview of ${path}` });
  const draw = () => box.replaceChildren(renderMarkdown(d.doc.text(), { headings: 0 }));
  let timer;
  d.redraw = () => (clearTimeout(timer), (timer = setTimeout(draw, 150)));
  d.doc.changed.add(d.redraw);
  draw();
  d.pane.append(box);
  d.preview = box;
  d.pane.classList.add("previewing");
  if (path === activeDoc) showDoc(path);
}

// The open files come back after a reload, the one shown last in front.
let activeDoc = null;
function saveDocs() {
  sessionStorage.setItem("cove-docs", JSON.stringify({ paths: [...docs.keys()], active: activeDoc, side: inGroup(1) }));
}
async function restoreDocs() {
  const { paths = [], active = null, side = [] } = JSON.parse(sessionStorage.getItem("cove-docs") || "{}");
  for (const p of paths) await openFile(p, 0, false, { behind: true, group: side.includes(p) ? 1 : 0 });
  if (active && docs.has(active) && !userChose) showDoc(active, false, true);
  // Unsaved changes stashed by a reconnect come back, unsaved.
  const stashed = JSON.parse(sessionStorage.getItem("cove-unsaved") || "{}");
  sessionStorage.removeItem("cove-unsaved");
  for (const [p, text] of Object.entries(stashed)) {
    if (!docs.has(p)) await openFile(p, 0, false, { behind: true });
    if (docs.has(p)) docs.get(p).doc.edit(text);
    else status(`${p}: your unsaved changes could not be brought back (the file is gone)`);
  }
}
const unsaved = () => [...docs].filter(([, d]) => d.doc.dirty()).map(([p]) => p);
function stashUnsaved() {
  sessionStorage.setItem("cove-unsaved", JSON.stringify(Object.fromEntries(unsaved().map((p) => [p, docs.get(p).doc.text()]))));
}

function closeDoc(path) {
  const d = docs.get(path);
  if (d.doc.dirty() && !confirm(`${path} has unsaved changes. Close it anyway?`)) return;
  d.doc.view.destroy(); // tells its language server the file closed
  d.pane.remove();
  d.tab.remove();
  docs.delete(path);
  tidyGroups(true);
  const next = frontOf(groups[d.group] ? d.group : 0) || [...docs.keys()].pop();
  if (next) showDoc(next);
  else {
    $("#md-preview").hidden = true;
    activeDoc = null;
    statusBar.doc(null);
    outline.refresh();
  }
  saveDocs();
}

// ---- terminal tabs -----------------------------------------------------

const shells = [];
let shellSeq = 0;

function newShell(id = null) {
  const pane = el("div", { class: "term-pane" });
  $("#terms").append(pane);
  const n = ++shellSeq;
  const tab = el("button", { class: "tab", onclick: () => showShell(entry) }, `shell ${n}`);
  tab.append(el("span", { class: "close", title: "Close: ends the shell and what it runs", onclick: (ev) => (ev.stopPropagation(), closeShell(entry)) }, "×"));
  $("#term-tabs").insertBefore(tab, $("#new-term"));
  const entry = { pane, tab };
  entry.shell = new Shell(pane, {
    id,
    theme: termTheme(),
    passKey: (ev) => commands.passKey(ev),
    onTitle: (t) => (tab.firstChild.textContent = t || `shell ${n}`),
    onExit: () => tab.classList.add("exited"),
  });
  shells.push(entry);
  showShell(entry);
  saveShells();
  return entry;
}

// closeShell ends a terminal for good (the page's tabs are the shells).
async function closeShell(entry) {
  const { shell } = entry;
  if (shell.id && !shell.exited) await fetch(`/api/term/${shell.id}`, { method: "DELETE" }).catch(() => {});
  shell.dispose();
  entry.pane.remove();
  entry.tab.remove();
  shells.splice(shells.indexOf(entry), 1);
  saveShells();
  if (shells.length) showShell(shells[shells.length - 1]);
  else newShell();
}

function showShell(entry) {
  for (const s of shells) {
    s.pane.hidden = s !== entry;
    s.tab.classList.toggle("active", s === entry);
  }
  $("#log").hidden = true;
  $("#log-tab").classList.remove("active");
  hidePorts();
  hideProblems();
  if (!layout.shown("bottom")) layout.toggle("bottom", true);
  entry.shell.resize();
  entry.shell.focus();
}

// showLog shows the workspace log in place of the terminals.
function showLog() {
  for (const s of shells) {
    s.pane.hidden = true;
    s.tab.classList.remove("active");
  }
  $("#log").hidden = false;
  $("#log-tab").classList.add("active");
  hidePorts();
  hideProblems();
  if (!layout.shown("bottom")) layout.toggle("bottom", true);
  $("#log").focus();
  notesLog.seen();
}

// showPorts shows the Ports view in place of the terminals.
function showPorts() {
  for (const s of shells) {
    s.pane.hidden = true;
    s.tab.classList.remove("active");
  }
  $("#log").hidden = true;
  $("#log-tab").classList.remove("active");
  hideProblems();
  $("#ports").hidden = false;
  $("#ports-tab").classList.add("active");
  if (!layout.shown("bottom")) layout.toggle("bottom", true);
  portsView.refresh();
  portsView.focus();
}

// showProblems shows what the language servers found, in place of the
// terminals.
function showProblems() {
  for (const s of shells) {
    s.pane.hidden = true;
    s.tab.classList.remove("active");
  }
  $("#log").hidden = true;
  $("#log-tab").classList.remove("active");
  hidePorts();
  $("#problems").hidden = false;
  $("#problems-tab").classList.add("active");
  if (!layout.shown("bottom")) layout.toggle("bottom", true);
  ($("#problems .problem") || $("#problems")).focus();
}

function hideProblems() {
  $("#problems").hidden = true;
  $("#problems-tab").classList.remove("active");
}

function hidePorts() {
  $("#ports").hidden = true;
  $("#ports-tab").classList.remove("active");
}

// The terminals outlive the page: remember their ids for a reload.
// saveShells keeps the open terminals' ids for a reload; called on
// each change and every 2 s (an id comes when its terminal connects),
// it writes only what changed.
let savedShells = null;
function saveShells() {
  setTimeout(() => {
    const ids = JSON.stringify(shells.map((s) => s.shell.id).filter(Boolean));
    if (ids !== savedShells) sessionStorage.setItem("cove-shells", (savedShells = ids));
  }, 500);
}

function status(text) {
  $("#status").textContent = text;
}

// ---- start ------------------------------------------------------------

darkQuery.addEventListener("change", () => {
  for (const s of shells) s.shell.term.options.theme = termTheme();
  for (const { doc } of docs.values()) doc.setDark(darkQuery.matches);
});
$("#new-term").addEventListener("click", () => newShell());
$("#log-tab").addEventListener("click", showLog);
$("#ports-tab").addEventListener("click", showPorts);
$("#problems-tab").addEventListener("click", showProblems);
$("#new-file").addEventListener("click", () => newEntry(false));
$("#new-folder").addEventListener("click", () => newEntry(true));
$("#md-preview").addEventListener("click", () => togglePreview());

// ---- commands and keys --------------------------------------------------------

const layout = startLayout($("#app"));
const activeShell = () => shells.find((s) => !s.pane.hidden);
const inTerminal = () => !!document.activeElement?.closest("#bottom");
// focusEditor gives the keys to the file in front, else to the page.
const focusEditor = () => {
  const d = docs.get(activeDoc);
  if (d) (d.preview || d.doc.view).focus();
  else document.activeElement?.blur();
};
// togglePanel hides or shows a panel, moving the keys out of one that
// goes and into one that comes.
function togglePanel(panel, into) {
  const had = document.activeElement?.closest(`#${panel === "bottom" ? "bottom" : panel === "side" ? "side" : "agent"}`);
  const visible = layout.toggle(panel);
  if (!visible && had) focusEditor();
  if (visible && into) into();
}
const commands = new Commands()
  .add("palette", "Show all commands", () => commands.palette(), { keys: ["Ctrl+Shift+P", "F1"] })
  .add("quickOpen", "Go to file…", () => finder.quickOpen(), { key: "Ctrl+P" })
  .add("save", "File: Save", () => docs.get(activeDoc)?.doc.trySave(), { key: "Ctrl+S", inTerminal: false })
  .add("saveAll", "File: Save all", () => Promise.all(unsaved().map((p) => docs.get(p).doc.trySave())))
  .add("newFile", "File: New file…", () => newEntry(false), { key: "Alt+N", inTerminal: false })
  .add("newFolder", "File: New folder…", () => newEntry(true))
  .add("closeEditor", "File: Close the file in front", () => activeDoc && closeDoc(activeDoc))
  .add("split", "View: Split: the file in front to the other editor group", () => activeDoc ? toSide(activeDoc) : status("no file to split: open one first"), { key: "Ctrl+\\" })
  .add("group1", "View: Go to the first editor group", () => showGroup(0), { key: "Ctrl+1", inTerminal: false })
  .add("group2", "View: Go to the second editor group", () => showGroup(1), { key: "Ctrl+2", inTerminal: false })
  .add("preview", "Markdown: Preview (again: back to the editor)", () => togglePreview(), { key: "Ctrl+Shift+V" })
  .add("gotoLine", "Go to line…", () => docs.get(activeDoc) && gotoLine(docs.get(activeDoc).doc.view), { key: "Ctrl+Alt+G" })
  .add("files", "View: Files", () => {
    if (!layout.shown("side")) layout.toggle("side", true);
    (document.querySelector("#tree .entry.selected") || document.querySelector("#tree .entry"))?.focus();
  }, { key: "Ctrl+Shift+E" })
  .add("search", "Search: Find in files", () => {
    if (!layout.shown("side")) layout.toggle("side", true);
    finder.focus();
  }, { key: "Ctrl+Shift+F" })
  .add("replace", "Search: Replace in files", () => {
    if (!layout.shown("side")) layout.toggle("side", true);
    if ($("#replace-row").hidden) $("#search-replace").click();
    else $("#replace").focus();
  }, { key: "Ctrl+Shift+H" })
  .add("toggleSide", "View: Show or hide the side bar", () => togglePanel("side"), { key: "Ctrl+B" })
  .add("togglePanel", "View: Show or hide the terminals", () => togglePanel("bottom", () => activeShell()?.shell.focus()), { key: "Ctrl+J" })
  .add("toggleAgent", "View: Show or hide the agent", () => togglePanel("agent"), { key: "Ctrl+Alt+B" })
  .add("resetLayout", "View: Reset the panels' sizes", () => layout.reset())
  .add("newTerminal", "Terminal: New terminal", () => newShell(), { key: "Ctrl+Shift+`" })
  .add("terminal", "Terminal: Go to the terminal (again: back to the editor)", () => {
    if (inTerminal() && layout.shown("bottom")) return focusEditor();
    const s = activeShell();
    if (s) showShell(s);
  }, { key: "Ctrl+`" })
  .add("workspaceLog", "View: Workspace log (cove's notes, the lifecycle commands' output)", showLog)
  .add("ports", "View: Ports (forward a port of the workspace to this machine)", showPorts)
  .add("closeTerminal", "Terminal: Close the terminal (ends its shell)", () => activeShell() && closeShell(activeShell()))
  .add("agent", "Agent: Ask the agent", () => {
    if (!layout.shown("agent")) layout.toggle("agent", true);
    $("#agent-input").focus(); // as VS Code's chat
  }, { key: "Ctrl+Alt+I" })
  .add("agentNew", "Agent: New conversation", () => $("#agent-new").click())
  .add("agentHistory", "Agent: Earlier conversations", () => $("#agent-history").click())
  .add("problems", "View: Problems (what the language servers found)", showProblems, { key: "Ctrl+Shift+M" })
  .add("definition", "Go to definition (F12, or Ctrl+click)", () => languages.run("definition"))
  .add("references", "Find references (Shift+F12)", () => languages.run("references"))
  .add("renameSymbol", "Rename symbol in every file (F2)", () => languages.run("rename"))
  .add("format", "Format document (Shift+Alt+F)", () => languages.run("format"))
  .add("signature", "Show the signature (Ctrl+Shift+Space)", () => languages.run("signature"))
  .add("scm", "View: Source control (git in the workspace)", () => {
    if (!layout.shown("side")) layout.toggle("side", true);
    $("#scm").classList.remove("folded");
    scm.refresh();
    scm.focus();
  }, { key: "Ctrl+Shift+G" })
  .add("outline", "View: Outline (the symbols of the file in front)", () => {
    if (!layout.shown("side")) layout.toggle("side", true);
    $("#outline").classList.remove("folded");
    outline.refresh().then(() => $("#outline-box .outline-item")?.focus());
  }, { key: "Ctrl+Shift+O" })
  .add("branch", "Git: Show the branch again (read .git/HEAD)", () => statusBar.refreshBranch());
document.addEventListener("keydown", (ev) => commands.handle(ev));
const statusBar = startStatusBar();

// ---- changes on disk ------------------------------------------------------

// Files change under the editor: the agent edits, a terminal runs a
// formatter. Open files without unsaved changes follow; the tree refreshes.
function watchFiles(retry = 0) {
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/watch`);
  ws.onopen = () => (retry = 0);
  ws.onmessage = async (ev) => {
    const { path, op } = JSON.parse(ev.data);
    if (op === "repo") {
      // git's own files changed (a commit, a checkout, a stage in a
      // terminal): the views of the repository look again.
      scm.changed();
      statusBar.refreshBranch();
      return;
    }
    languages.changed(path, op);
    scm.changed();
    const open = docs.get(path);
    if (open && op !== "remove") {
      const r = await fetch(`/api/file?path=${encodeURIComponent(path)}`);
      if (r.ok) {
        const text = await r.text();
        if (open.doc.dirty()) {
          if (text !== open.doc.saved) status(`${path} changed on disk; your unsaved changes are kept`);
        } else if (open.doc.reload(text, r.headers.get("ETag"))) {
          status(`${path} reloaded: it changed on disk`);
        }
      }
    }
    if (op !== "write") refreshDir(path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".");
  };
  ws.onclose = () => lifeline.stopped() || setTimeout(() => watchFiles(retry + 1), Math.min(5000, 250 * 2 ** retry));
}

function refreshDir(dir) {
  if (dir === ".") return renderDir(".", $("#tree")).catch(() => {});
  const row = document.querySelector(`.entry.dir.open[data-path="${CSS.escape(dir)}"]`);
  if (row && row.nextElementSibling) renderDir(dir, row.nextElementSibling).catch(() => {});
}

// For the browser tests (and the curious): the open shells and files.
const finder = startSearch({ openFile, status, docs, palette: (q) => commands.palette(q) });
const lifeline = startLifeline({
  unsaved,
  stash: stashUnsaved,
  onStopped: (why) => {
    for (const s of shells) s.shell.halt(why.reason);
    status(`the workspace stopped: ${why.reason}`);
  },
});
const notesLog = startNotes({ pane: $("#log"), badge: $("#st-notes"), show: showLog, stopped: () => lifeline.stopped() });
const portsView = startPorts({ pane: $("#ports"), tab: $("#ports-tab"), shown: () => !$("#ports").hidden && layout.shown("bottom"), stopped: () => lifeline.stopped() });
const languages = startLanguages({
  openFile, docs, status, problems: { pane: $("#problems"), tab: $("#problems-tab") }, front: () => docs.get(activeDoc),
  settings: () => userSettings.get(),
  attached: (doc) => doc.path === activeDoc && outline.refresh(),
});
const outline = startOutline({ section: $("#outline"), box: $("#outline-box"), languages, current: () => docs.get(activeDoc) });
$("#outline-head").addEventListener("click", () => $("#outline").classList.toggle("folded"));
const userSettings = startSettings({ status, apply: (prefs) => docs.forEach(({ doc }) => doc.setPrefs(prefs)) });
const scm = startSCM({ box: $("#scm-box"), status, openFile, dark: () => darkQuery.matches });
$("#scm-head").addEventListener("click", () => $("#scm").classList.toggle("folded"));
const tasks = startTasks({ section: $("#tasks"), box: $("#tasks-box"), status, dark: () => darkQuery.matches, merged: () => scm.refresh() });
$("#tasks-head").addEventListener("click", () => $("#tasks").classList.toggle("folded"));
window.cove = { shells, docs, groups, layout, commands, languages, scm, tasks, outline, settings: userSettings };
renderDir(".", $("#tree")).catch((e) => status(`files: ${e.message}`));
restoreDocs().catch((e) => status(`files: ${e.message}`));
// Unsaved edits live only in this page: the browser asks before it goes.
addEventListener("beforeunload", (ev) => {
  if (sessionStorage.getItem("cove-unsaved")) return; // stashed for the reload (a reconnect)
  if ([...docs.values()].some((d) => d.doc.dirty())) ev.preventDefault();
});
const saved = JSON.parse(sessionStorage.getItem("cove-shells") || "[]");
if (saved.length) saved.forEach((id) => newShell(id));
else newShell();
setInterval(saveShells, 2000);
watchFiles();
startAgent({ log: $("#agent-log"), input: $("#agent-input"), send: $("#agent-send"), fresh: $("#agent-new"), history: $("#agent-history") });
