import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Compartment } from "@codemirror/state";
import { LanguageDescription, LanguageSupport } from "@codemirror/language";
import { oneDark } from "@codemirror/theme-one-dark";
import { extensionOf } from "./settings.js";

// Languages load when a file needs one: the parsers are a third of the
// editor's weight, and most sessions use two or three of them. Each has
// its name (the status bar's), how to load it, and the names a fence in
// Markdown gives it (```sh).
const cm6 = (pkg, f) => () => pkg().then(f);
const langs = {
  javascript: { name: "JavaScript", alias: ["js", "mjs", "cjs", "node"], load: cm6(() => import("@codemirror/lang-javascript"), (m) => m.javascript()) },
  jsx: { name: "JavaScript JSX", load: cm6(() => import("@codemirror/lang-javascript"), (m) => m.javascript({ jsx: true })) },
  typescript: { name: "TypeScript", alias: ["ts"], load: cm6(() => import("@codemirror/lang-javascript"), (m) => m.javascript({ typescript: true })) },
  tsx: { name: "TypeScript JSX", load: cm6(() => import("@codemirror/lang-javascript"), (m) => m.javascript({ jsx: true, typescript: true })) },
  python: { name: "Python", alias: ["py", "python3"], load: cm6(() => import("@codemirror/lang-python"), (m) => m.python()) },
  go: { name: "Go", alias: ["golang"], load: cm6(() => import("@codemirror/lang-go"), (m) => m.go()) },
  json: { name: "JSON", alias: ["jsonc"], load: cm6(() => import("@codemirror/lang-json"), (m) => m.json()) },
  markdown: { name: "Markdown", alias: ["md"], load: cm6(() => import("@codemirror/lang-markdown"), (m) => m.markdown({ codeLanguages: fenced })) },
  html: { name: "HTML", alias: ["htm", "xhtml"], load: cm6(() => import("@codemirror/lang-html"), (m) => m.html()) },
  css: { name: "CSS", load: cm6(() => import("@codemirror/lang-css"), (m) => m.css()) },
  rust: { name: "Rust", alias: ["rs"], load: cm6(() => import("@codemirror/lang-rust"), (m) => m.rust()) },
  yaml: { name: "YAML", alias: ["yml"], load: cm6(() => import("@codemirror/lang-yaml"), (m) => m.yaml()) },
  c: { name: "C", alias: ["h"], load: cm6(() => import("@codemirror/lang-cpp"), (m) => m.cpp()) },
  cpp: { name: "C++", alias: ["c++", "cc", "cxx", "hpp"], load: cm6(() => import("@codemirror/lang-cpp"), (m) => m.cpp()) },
  java: { name: "Java", load: cm6(() => import("@codemirror/lang-java"), (m) => m.java()) },
  kotlin: { name: "Kotlin", alias: ["kt"], load: cm6(() => import("@codemirror/lang-java"), (m) => m.java()) },
  sql: { name: "SQL", load: cm6(() => import("@codemirror/lang-sql"), (m) => m.sql()) },
  php: { name: "PHP", load: cm6(() => import("@codemirror/lang-php"), (m) => m.php()) },
  // CodeMirror 5's modes, for what has no CodeMirror 6 parser.
  shell: { name: "Shell", alias: ["sh", "bash", "zsh", "console", "shell-session"], load: () => legacy(import("@codemirror/legacy-modes/mode/shell"), "shell") },
  toml: { name: "TOML", load: () => legacy(import("@codemirror/legacy-modes/mode/toml"), "toml") },
  ruby: { name: "Ruby", alias: ["rb"], load: () => legacy(import("@codemirror/legacy-modes/mode/ruby"), "ruby") },
  lua: { name: "Lua", load: () => legacy(import("@codemirror/legacy-modes/mode/lua"), "lua") },
  diff: { name: "Diff", alias: ["patch"], load: () => legacy(import("@codemirror/legacy-modes/mode/diff"), "diff") },
  properties: { name: "Properties", alias: ["ini", "conf"], load: () => legacy(import("@codemirror/legacy-modes/mode/properties"), "properties") },
  dockerfile: { name: "Dockerfile", alias: ["docker", "containerfile"], load: () => legacy(import("@codemirror/legacy-modes/mode/dockerfile"), "dockerFile") },
  // Neither has a make mode: ours (make.js), recipes as shell.
  make: { name: "Makefile", alias: ["makefile", "mk", "mak"], load: () => legacy(import("./make.js"), "make") },
};

// A file's language: by its name, else its extension.
const byName = {
  dockerfile: "dockerfile", containerfile: "dockerfile", makefile: "make", gnumakefile: "make", ".bashrc": "shell", ".profile": "shell",
  ".bash_profile": "shell", ".zshrc": "shell",
};
const byExt = {
  js: "javascript", mjs: "javascript", cjs: "javascript", jsx: "jsx", ts: "typescript", mts: "typescript", tsx: "tsx", py: "python", go: "go",
  json: "json", md: "markdown", markdown: "markdown", html: "html", htm: "html", css: "css", rs: "rust", yaml: "yaml", yml: "yaml",
  c: "c", h: "c", cc: "cpp", cpp: "cpp", cxx: "cpp", hpp: "cpp", java: "java", kt: "kotlin", sql: "sql", php: "php",
  sh: "shell", bash: "shell", zsh: "shell", toml: "toml", rb: "ruby", lua: "lua", diff: "diff", patch: "diff", ini: "properties",
  properties: "properties", dockerfile: "dockerfile", mk: "make", mak: "make",
};

function legacy(mode, name) {
  return Promise.all([import("@codemirror/language"), mode]).then(([{ StreamLanguage }, m]) => StreamLanguage.define(m[name]));
}

function langOf(path) {
  const name = path.split("/").pop().toLowerCase();
  return byName[name] || byExt[name.includes(".") ? name.split(".").pop() : ""] || (name.startsWith("makefile.") ? "make" : null);
}

// languageName is what the status bar calls path's kind of file.
export function languageName(path) {
  const l = langOf(path);
  return l ? langs[l].name : "Plain Text";
}

// language resolves to the highlighting for path's kind of file (none for
// one it does not know, or if its parser fails to load).
export function language(path) {
  const l = langOf(path);
  return l ? langs[l].load().catch(() => []) : Promise.resolve([]);
}

// fenced finds the language of a fence in Markdown (```sh) by its first
// word: the same parsers, loaded when a fence asks for one.
let descriptions = null;
function fenced(info) {
  if (!descriptions) {
    descriptions = new Map();
    for (const [id, l] of Object.entries(langs)) {
      const d = LanguageDescription.of({
        name: l.name,
        alias: [id, ...(l.alias || [])],
        load: () => l.load().then((x) => (x instanceof LanguageSupport ? x : new LanguageSupport(x))),
      });
      for (const n of [id, l.name.toLowerCase(), ...(l.alias || [])]) descriptions.set(n, d);
    }
  }
  return descriptions.get(info.trim().split(/[\s{,]/)[0].toLowerCase()) || null;
}

// Doc is one open file: its editor, whether it has unsaved changes, and
// saving with Ctrl-S (an atomic write on the other side, mode kept).
export class Doc {
  constructor(host, path, text, { dark, onDirty, onStatus, onCursor, etag, prefs, beforeSave }) {
    this.path = path;
    this.beforeSave = beforeSave; // formats the text, if the user asks for it on save (languages.js)
    this.changed = new Set(); // called after each change to the text (the preview)
    this.saved = text;
    this.etag = etag; // of what is on disk as far as this editor knows
    this.onDirty = onDirty;
    this.onStatus = onStatus;
    this.theme = new Compartment();
    this.lang = new Compartment();
    this.lsp = new Compartment(); // the language server's, once it is connected (languages.js)
    this.prefs = new Compartment(); // the user's settings (settings.js)
    this.view = new EditorView({
      parent: host,
      state: EditorState.create({
        doc: text,
        extensions: [
          basicSetup,
          this.lang.of([]),
          this.lsp.of([]),
          this.prefs.of(extensionOf(prefs)),
          this.theme.of(dark ? oneDark : []),
          keymap.of([{ key: "Mod-s", preventDefault: true, run: () => (this.trySave(), true) }]),
          EditorView.updateListener.of((u) => {
            if (u.docChanged) {
              this.onDirty(this.dirty());
              for (const f of this.changed) f();
            }
            if ((u.selectionSet || u.docChanged || u.focusChanged) && onCursor) onCursor(this);
          }),
        ],
      }),
    });
    language(path).then((ext) => this.view.dispatch({ effects: this.lang.reconfigure(ext) }));
  }

  // trySave saves, saying in the status bar what went wrong if it did.
  trySave() {
    return this.save().catch((e) => this.onStatus(`${this.path} not saved: ${e.message}; your changes stay in the editor`));
  }

  // edit puts text in the editor as an unsaved change (what a reload
  // brings back).
  edit(text) {
    const cur = this.view.state.doc.toString();
    if (text !== cur) this.view.dispatch({ changes: { from: 0, to: cur.length, insert: text } });
  }

  dirty() {
    return this.view.state.doc.toString() !== this.saved;
  }

  // reload takes the file's new content from disk, when there are no
  // unsaved changes to lose.
  reload(text, etag) {
    if (etag) this.etag = etag;
    if (text === this.saved) return false;
    const cur = this.view.state.doc.toString();
    this.saved = text;
    this.view.dispatch({ changes: { from: 0, to: cur.length, insert: text } });
    this.onDirty(this.dirty());
    return true;
  }

  text() {
    return this.view.state.doc.toString();
  }

  // cursor is where the cursor is: line and column, from 1.
  cursor() {
    const { state } = this.view;
    const head = state.selection.main.head;
    const line = state.doc.lineAt(head);
    return { line: line.number, col: head - line.from + 1 };
  }

  // goto shows line n (from 1): the len characters from column col (from
  // 0, as a search hit says) selected, else the whole line.
  goto(n, col, len) {
    const doc = this.view.state.doc;
    const line = doc.line(Math.max(1, Math.min(n, doc.lines)));
    const from = col == null ? line.from : Math.min(line.to, line.from + col);
    const to = col == null ? line.to : Math.min(line.to, from + (len || 0));
    this.view.dispatch({ selection: { anchor: from, head: to }, scrollIntoView: true });
    this.view.focus();
  }

  // rename follows the file to its new path, its highlighting to its
  // new kind.
  rename(path) {
    this.path = path;
    language(path).then((ext) => this.path === path && this.view.dispatch({ effects: this.lang.reconfigure(ext) }));
  }

  // setPrefs applies the user's editor settings (settings.js).
  setPrefs(prefs) {
    this.view.dispatch({ effects: this.prefs.reconfigure(extensionOf(prefs)) });
  }

  setDark(dark) {
    this.view.dispatch({ effects: this.theme.reconfigure(dark ? oneDark : []) });
  }

  // save writes the file if it is still what this editor last read or
  // wrote; if something else changed it since, it asks before
  // overwriting.
  async save(force = false) {
    // Formatted first (never again on the overwrite's second try): what
    // is written is what the editor shows.
    if (!force && this.beforeSave) await this.beforeSave(this);
    const text = this.view.state.doc.toString();
    const headers = this.etag && !force ? { "If-Match": this.etag } : {};
    const r = await fetch(`/api/file?path=${encodeURIComponent(this.path)}`, { method: "PUT", body: text, headers });
    if (r.status === 412) {
      if (confirm(`${this.path} changed on disk since you opened it (a terminal, the agent or another window changed it). Overwrite it with your version?`)) {
        return this.save(true);
      }
      this.onStatus(`${this.path} not saved: it changed on disk; your version is still in the editor`);
      return;
    }
    if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
    this.etag = r.headers.get("ETag");
    this.saved = text;
    this.onDirty(this.dirty());
    this.onStatus(`saved ${this.path}`);
  }
}
