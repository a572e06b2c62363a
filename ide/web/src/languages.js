// Language servers: they run in the workspace (ide/lsp.go), one per
// language, and reach the page over a WebSocket whose messages the
// launcher bounds (8 MiB); CodeMirror's own LSP client
// (@codemirror/lsp-client, loaded when a file needs it) shows what they
// say: diagnostics in the editor and the Problems panel, hover,
// completion, signature help, go to definition and references (opening
// other files), rename across files, format (on save too, where the
// user's settings or the project's devcontainer.json ask for it) and the
// file's symbols for the Outline.
//
// What a server says is the workspace's, and may be hostile: a file URI
// outside the project opens and changes nothing (every file goes through
// the confined file API, by a path the page checks first); its Markdown
// is cut down to text-like HTML; the diagnostics kept are bounded in
// number and length, and shown as text.
import { el } from "./dom.js";

// What the page sends a server as a file's language.
const languageIds = {
  go: "go", ts: "typescript", mts: "typescript", cts: "typescript", tsx: "typescriptreact", js: "javascript", mjs: "javascript",
  cjs: "javascript", jsx: "javascriptreact", c: "c", h: "c", cc: "cpp", cpp: "cpp", cxx: "cpp", hpp: "cpp", hh: "cpp", py: "python", rs: "rust",
};
export const languageIdOf = (path) => languageIds[path.split(".").pop().toLowerCase()] || null;

// Bounds on what a server's diagnostics may hold in the page.
const MAX_FILES = 500; // files with problems kept
const MAX_PER_FILE = 200; // problems kept per file
const MAX_MESSAGE = 1000; // characters of a problem's message

// clean makes a server's text fit to show: no control characters (an
// escape sequence's ESC included), cut to max characters.
export function clean(s, max = MAX_MESSAGE) {
  s = String(s ?? "").replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, "�");
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

// Tags a server's Markdown may become; every attribute but class goes.
const keptTags = new Set(["P", "PRE", "CODE", "SPAN", "DIV", "EM", "STRONG", "B", "I", "UL", "OL", "LI", "H1", "H2", "H3", "H4", "H5", "H6",
  "BR", "HR", "BLOCKQUOTE", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "A", "DEL", "S", "SUB", "SUP"]);
export function sanitizeHTML(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  const walk = (node) => {
    for (const c of [...node.childNodes]) {
      if (c.nodeType === Node.ELEMENT_NODE) {
        if (!keptTags.has(c.tagName)) {
          c.replaceWith(document.createTextNode(c.textContent));
          continue;
        }
        for (const a of [...c.attributes]) if (a.name !== "class") c.removeAttribute(a.name);
        walk(c);
      } else if (c.nodeType !== Node.TEXT_NODE) c.remove();
    }
  };
  walk(t.content);
  return t.innerHTML;
}

// startLanguages makes the page's side of the language servers.
// openFile(path, line, focus, at) opens a file in the editor; docs are
// the open files (path → {doc}); status says a word in the status bar;
// problems is the Problems panel's pane and tab.
export function startLanguages({ openFile, docs, status, problems, settings = () => ({}), attached = () => {}, front }) {
  let info = null; // {root, servers} of GET /api/lsp
  const clients = new Map(); // server name → {client, ready}
  const diagnostics = new Map(); // path → [{line, col, severity, message}]

  async function getInfo() {
    info ??= fetch("/api/lsp").then((r) => (r.ok ? r.json() : { root: "", servers: [] })).catch(() => ({ root: "", servers: [] }));
    return info;
  }

  // The project's root as a path (from the file URI the server gave).
  const rootPath = async () => decodeURIComponent(new URL((await getInfo()).root).pathname).replace(/\/$/, "");
  const uriOf = (root, path) => `file://${[...root.split("/"), ...path.split("/")].map((s) => encodeURIComponent(s)).join("/")}`;

  // pathOf is the project path a server's URI names, or null when it
  // names none: another scheme, or a place outside the project.
  function pathOf(root, uri) {
    let u;
    try {
      u = new URL(uri);
    } catch {
      return null;
    }
    if (u.protocol !== "file:" || (u.host && u.host !== "localhost")) return null;
    let p;
    try {
      p = decodeURIComponent(u.pathname);
    } catch {
      return null;
    }
    if (!p.startsWith(`${root}/`)) return null;
    const rel = p.slice(root.length + 1);
    if (!rel || rel.split("/").some((s) => s === "" || s === "." || s === ".." || s === ".git") || /[\u0000-\u001f]/.test(rel)) return null;
    return rel;
  }

  // ---- Problems --------------------------------------------------------

  const tab = problems.tab;
  let drawTimer = null;
  function record(root, params) {
    const path = pathOf(root, params?.uri);
    if (!path || !Array.isArray(params.diagnostics)) return false;
    if (!diagnostics.has(path) && diagnostics.size >= MAX_FILES) return false;
    const list = params.diagnostics.slice(0, MAX_PER_FILE).filter((d) => d && d.range?.start);
    for (const d of list) d.message = clean(d.message);
    params.diagnostics = list; // what the editor shows is bounded too
    if (list.length) diagnostics.set(path, list);
    else diagnostics.delete(path);
    drawTimer ??= setTimeout(drawProblems, 100); // a flood is drawn ten times a second at most
    return true;
  }
  function drawProblems() {
    drawTimer = null;
    let n = 0;
    const rows = [];
    for (const [path, list] of [...diagnostics].sort(([a], [b]) => a.localeCompare(b))) {
      rows.push(el("div", { class: "problem-file" }, path));
      for (const d of list) {
        n++;
        const line = (d.range.start.line | 0) + 1;
        const col = d.range.start.character | 0;
        const sev = ["", "error", "warning", "info", "hint"][d.severity || 1] || "error";
        rows.push(el("button", { class: `problem ${sev}`, "data-path": path, "data-line": line, onclick: () => openFile(path, line, true, { col, len: 0 }) },
          el("span", { class: "sev" }, sev), ` ${clean(d.message, 300)} `, el("span", { class: "where" }, `${line}:${col + 1}`)));
      }
    }
    if (!rows.length) rows.push(el("p", { class: "empty" }, "No problems the language servers know of."));
    problems.pane.replaceChildren(...rows);
    tab.textContent = n ? `Problems (${n})` : "Problems";
  }
  drawProblems();

  // ---- the client, per server -------------------------------------------

  async function clientFor(languageId) {
    const { servers = [] } = await getInfo();
    const s = servers.find((s) => s.languages?.includes(languageId));
    if (!s) return null;
    if (!clients.has(s.name)) clients.set(s.name, connect(s));
    return clients.get(s.name);
  }

  async function connect(server) {
    const lsp = await import("@codemirror/lsp-client");
    const { LSPClient, LSPPlugin, Workspace } = lsp;
    const { EditorView, keymap } = await import("@codemirror/view");
    const root = await rootPath();
    const { root: rootUri } = await getInfo();

    // The open files, each with its one editor; files a server asks for
    // that are not open (references) are read, not opened.
    class CoveWorkspace extends Workspace {
      files = [];
      versions = {};
      getFile(uri) {
        const p = pathOf(root, uri);
        return p == null ? null : this.files.find((f) => f.path === p) || null;
      }
      syncFiles() {
        const out = [];
        for (const f of this.files) {
          const plugin = LSPPlugin.get(f.view);
          if (!plugin || plugin.unsyncedChanges.empty) continue;
          out.push({ changes: plugin.unsyncedChanges, file: f, prevDoc: f.doc });
          f.doc = f.view.state.doc;
          f.version = this.versions[f.uri] = (this.versions[f.uri] ?? 0) + 1;
          plugin.clear();
        }
        return out;
      }
      openFile(uri, languageId, view) {
        const path = pathOf(root, uri);
        const version = (this.versions[uri] = (this.versions[uri] ?? 0) + 1);
        const f = { uri, path, languageId, version, doc: view.state.doc, view, getView: () => view };
        this.files.push(f);
        this.client.didOpen(f);
      }
      closeFile(uri) {
        const f = this.getFile(uri);
        if (!f) return;
        this.files = this.files.filter((x) => x !== f);
        this.client.didClose(uri);
      }
      async requestFile(uri) {
        const open = this.getFile(uri);
        if (open) return open;
        const path = pathOf(root, uri);
        if (path == null) return null;
        const r = await fetch(`/api/file?path=${encodeURIComponent(path)}`);
        if (!r.ok) return null;
        const { Text } = await import("@codemirror/state");
        const doc = Text.of((await r.text()).split(/\r?\n/));
        return { uri, path, languageId: languageIdOf(path) || "", version: 0, doc, getView: () => null };
      }
      async displayFile(uri) {
        const path = pathOf(root, uri);
        if (path == null) {
          status(`the language server named a file outside the project; not opened: ${clean(uri, 200)}`);
          return null;
        }
        await openFile(path, 0, true);
        return docs.get(path)?.doc.view || null;
      }
    }

    const client = new LSPClient({
      rootUri,
      workspace: (c) => new CoveWorkspace(c),
      timeout: 10000,
      sanitizeHTML,
      notificationHandlers: {
        // Kept (bounded) for the Problems panel; false: the editor's
        // own handler shows them too.
        "textDocument/publishDiagnostics": (_c, params) => !record(root, params),
        "window/showMessage": (_c, params) => (status(`${server.name}: ${clean(params?.message, 300)}`), true),
        "window/logMessage": () => true,
      },
      extensions: [
        // The Outline's symbols as a tree, not a flat list.
        { clientCapabilities: { textDocument: { documentSymbol: { hierarchicalDocumentSymbolSupport: true } } } },
        lsp.serverDiagnostics(), lsp.serverCompletion(), lsp.hoverTooltips(), lsp.signatureHelp(),
        // Ctrl+click goes to the definition, as in VS Code.
        EditorView.domEventHandlers({
          mousedown(ev, view) {
            if (!(ev.ctrlKey || ev.metaKey) || ev.button !== 0) return false;
            const pos = view.posAtCoords({ x: ev.clientX, y: ev.clientY });
            if (pos == null) return false;
            view.dispatch({ selection: { anchor: pos } });
            lsp.jumpToDefinition(view);
            ev.preventDefault();
            return true;
          },
        }),
        keymap.of([
          { key: "F12", run: lsp.jumpToDefinition, preventDefault: true },
          { key: "Shift-F12", run: lsp.findReferences, preventDefault: true },
          { key: "Escape", run: lsp.closeReferencePanel },
          { key: "Shift-Alt-f", run: lsp.formatDocument, preventDefault: true },
          { key: "F2", run: (view) => (renameAt(view), true), preventDefault: true },
        ])],
    });
    const entry = { client, lsp, root, server, socket: null };
    link(entry, 0);
    return entry;
  }

  // link connects entry's client over a new WebSocket; when the server
  // exits (the workspace's side closes it) it connects again, which
  // starts a new one, sooner or later.
  function link(entry, retry) {
    const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/lsp/${encodeURIComponent(entry.server.name)}`);
    entry.socket = ws;
    const handlers = new Set();
    const transport = {
      send(m) {
        if (ws.readyState !== WebSocket.OPEN) throw new Error(`the ${entry.server.name} language server is not connected`);
        ws.send(m);
      },
      subscribe: (h) => handlers.add(h),
      unsubscribe: (h) => handlers.delete(h),
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") return;
      for (const h of handlers) {
        try {
          h(ev.data);
        } catch (e) {
          console.warn(`[lsp ${entry.server.name}] a message the client could not take: ${e}`);
        }
      }
    };
    ws.onopen = () => {
      entry.client.connect(transport);
      entry.opened = Date.now();
    };
    ws.onclose = (ev) => {
      if (entry.client.connected) entry.client.disconnect();
      // What it said goes with it; the next one says it again.
      for (const [p] of diagnostics) if (entry.server.languages.includes(languageIdOf(p))) diagnostics.delete(p);
      drawProblems();
      if (ev.code === 4409) return status(`${entry.server.name}: another window has the language server; reopen a file here to take it back`), clients.delete(entry.server.name);
      if (ev.code === 4404) return clients.delete(entry.server.name);
      if (ev.reason) status(`${entry.server.name}: ${clean(ev.reason, 200)}`);
      if (document.body.classList.contains("stopped")) return;
      // One that keeps failing at once is tried less and less often.
      const next = Date.now() - (entry.opened || 0) > 30000 ? 0 : retry + 1;
      setTimeout(() => link(entry, next), Math.min(30000, 500 * 2 ** retry));
    };
  }

  // renameAt renames the symbol at the cursor in every file the server
  // names, writing each through the file API (open files through their
  // editor, then saved).
  async function renameAt(view) {
    const entry = [...docs.values()].find((d) => d.doc.view === view)?.doc.lspClient;
    const plugin = entry?.lsp.LSPPlugin.get(view);
    const word = view.state.wordAt(view.state.selection.main.head);
    if (!plugin || !word) return;
    const old = view.state.sliceDoc(word.from, word.to);
    const name = prompt(`Rename ${old} to:`, old);
    if (!name || name === old) return;
    plugin.client.sync();
    let edit;
    try {
      edit = await plugin.client.request("textDocument/rename", { textDocument: { uri: plugin.uri }, position: plugin.toPosition(word.from), newName: name });
    } catch (e) {
      return status(`rename: ${clean(e.message ?? e, 300)}`);
    }
    const n = await applyEdit(entry.root, edit);
    if (n != null) status(`renamed ${old} to ${name} in ${n} file${n === 1 ? "" : "s"}`);
  }

  // applyEdit writes a server's WorkspaceEdit, all of it or nothing when
  // it names a file outside the project or anything but text edits.
  async function applyEdit(root, edit) {
    const byPath = new Map();
    const add = (uri, edits) => {
      const p = pathOf(root, uri);
      if (p == null) throw new Error(`a file outside the project: ${clean(uri, 200)}`);
      byPath.set(p, [...(byPath.get(p) || []), ...edits]);
    };
    try {
      for (const [uri, edits] of Object.entries(edit?.changes || {})) add(uri, edits);
      for (const dc of edit?.documentChanges || []) {
        if (!dc.textDocument) throw new Error(`a ${dc.kind} of a file, which the page does not do`);
        add(dc.textDocument.uri, dc.edits);
      }
    } catch (e) {
      status(`rename not done: the language server asked for ${e.message}`);
      return null;
    }
    for (const [path, edits] of byPath) {
      const open = docs.get(path);
      if (open) {
        const { view } = open.doc;
        const changes = edits.map((e) => ({ from: posIn(view.state.doc, e.range.start), to: posIn(view.state.doc, e.range.end), insert: e.newText }));
        view.dispatch({ changes, userEvent: "rename" });
        await open.doc.trySave();
        continue;
      }
      const r = await fetch(`/api/file?path=${encodeURIComponent(path)}`);
      if (!r.ok) return status(`rename: ${path}: ${await r.text()}`), null;
      const { Text } = await import("@codemirror/state");
      const text = await r.text();
      const doc = Text.of(text.split("\n"));
      const sorted = [...edits].sort((a, b) => posIn(doc, b.range.start) - posIn(doc, a.range.start));
      let out = text;
      for (const e of sorted) out = out.slice(0, posIn(doc, e.range.start)) + e.newText + out.slice(posIn(doc, e.range.end));
      const w = await fetch(`/api/file?path=${encodeURIComponent(path)}`, { method: "PUT", body: out, headers: { "If-Match": r.headers.get("ETag") } });
      if (!w.ok) return status(`rename: ${path} not written: ${await w.text()}`), null;
    }
    return byPath.size;
  }

  // formatNow asks view's language server to format it, within ms, and
  // applies its edits unless the text they touch changed meanwhile; it
  // says whether it did.
  async function formatNow(entry, view, ms) {
    const plugin = entry.lsp.LSPPlugin.get(view);
    if (!plugin || !entry.client.connected || !entry.client.serverCapabilities?.documentFormattingProvider) return false;
    const { getIndentUnit, indentUnit } = await import("@codemirror/language");
    plugin.client.sync();
    let timer;
    const late = new Promise((_, no) => (timer = setTimeout(() => no(new Error(`no answer in ${ms / 1000} s`)), ms)));
    const options = { tabSize: getIndentUnit(view.state), insertSpaces: view.state.facet(indentUnit).indexOf("\t") < 0 };
    return plugin.client.withMapping((mapping) => Promise.race([plugin.client.request("textDocument/formatting", { textDocument: { uri: plugin.uri }, options }), late])
      .then((edits) => {
        if (!Array.isArray(edits)) return false;
        const touched = mapping.getMapping(plugin.uri);
        const changes = [];
        for (const e of edits) {
          let from = mapping.mapPosition(plugin.uri, e.range.start);
          let to = mapping.mapPosition(plugin.uri, e.range.end);
          if (touched) {
            if (touched.touchesRange(from, to)) return false; // typed over since: the user's text wins
            from = touched.mapPos(from, 1);
            to = touched.mapPos(to, -1);
          }
          changes.push({ from, to, insert: String(e.newText ?? "") });
        }
        view.dispatch({ changes, userEvent: "format" });
        return true;
      })
      .finally(() => clearTimeout(timer)));
  }

  // symbolsOf is the outline of doc from its language server: each
  // symbol with its depth, kind and where its name is, in the order of
  // the file; null when the server gives none. A server's list is cut
  // at 5000 symbols, 20 deep.
  async function symbolsOf(doc) {
    const entry = doc.lspClient;
    const plugin = entry?.lsp.LSPPlugin.get(doc.view);
    if (!plugin) return null;
    if (!entry.client.connected) throw new Error(`the ${entry.server.name} language server is starting`);
    plugin.client.sync();
    const res = await plugin.client.request("textDocument/documentSymbol", { textDocument: { uri: plugin.uri } });
    if (!Array.isArray(res)) return null;
    const out = [];
    const walk = (list, depth) => {
      for (const s of list) {
        if (out.length >= 5000 || !s || typeof s !== "object") return;
        // DocumentSymbol (a tree), or SymbolInformation (flat, by location).
        const at = s.selectionRange?.start || s.location?.range?.start;
        if (!at) continue;
        out.push({ name: clean(s.name, 200), detail: clean(s.detail || "", 200), kind: s.kind | 0, depth, line: (at.line | 0) + 1, col: at.character | 0 });
        if (Array.isArray(s.children) && depth < 20) walk(s.children, depth + 1);
      }
    };
    walk(res, 0);
    return out;
  }

  // posIn is an LSP position's offset in doc (UTF-16 columns, as
  // JavaScript strings count).
  function posIn(doc, pos) {
    const line = doc.line(Math.min(doc.lines, Math.max(1, (pos.line | 0) + 1)));
    return Math.min(line.to, line.from + Math.max(0, pos.character | 0));
  }

  return {
    // attach gives an open file's editor its language server, if the
    // workspace has one for it.
    async attach(doc) {
      const id = languageIdOf(doc.path);
      if (!id) return;
      const entry = await clientFor(id).catch(() => null);
      if (!entry || !docs.has(doc.path)) return;
      doc.view.dispatch({ effects: doc.lsp.reconfigure(entry.client.plugin(uriOf(entry.root, doc.path), id)) });
      doc.lspClient = entry;
      attached(doc);
    },
    // renamed tells the servers that doc, open, is now at its new path
    // (it was at from): its old URI is closed, its diagnostics dropped,
    // and it is opened again as the new one.
    async renamed(doc, from) {
      if (doc.lspClient) {
        doc.view.dispatch({ effects: doc.lsp.reconfigure([]) }); // the plugin goes: didClose of the old URI
        doc.lspClient = null;
      }
      if (diagnostics.delete(from)) drawProblems();
      await this.attach(doc);
    },
    // beforeSave formats doc as it is saved, when the user's settings
    // (editor.formatOnSave), else the project's devcontainer.json
    // (customizations.cove.formatOnSave), ask for it. A server that
    // fails or is slow leaves the text as it is: the save goes on.
    async beforeSave(doc) {
      const on = settings().formatOnSave ?? (await getInfo()).formatOnSave;
      if (!on || !doc.lspClient) return;
      await formatNow(doc.lspClient, doc.view, 3000).catch((e) => status(`${doc.path}: not formatted (${clean(e.message ?? e, 200)}); saved as it was`));
    },
    symbols: symbolsOf,
    // changed tells the servers of a file changed on disk (a terminal, a
    // rename written to a file not open).
    changed(path, op) {
      for (const p of clients.values()) {
        p.then((e) => {
          if (!e.client.connected || e.socket?.readyState !== WebSocket.OPEN) return;
          e.client.notification("workspace/didChangeWatchedFiles", { changes: [{ uri: uriOf(e.root, path), type: { create: 1, write: 2, remove: 3 }[op] || 2 }] });
        });
      }
    },
    run(command) {
      const d = front();
      const e = d?.doc.lspClient;
      if (!e) return status("no language server for this file");
      if (command === "rename") return renameAt(d.doc.view);
      const f = { definition: e.lsp.jumpToDefinition, references: e.lsp.findReferences, format: e.lsp.formatDocument, signature: e.lsp.showSignatureHelp }[command];
      f?.(d.doc.view);
    },
    diagnostics,
    pathOf: async (uri) => pathOf(await rootPath(), uri),
  };
}
