import { EditorView, basicSetup } from "codemirror";
import { keymap } from "@codemirror/view";
import { EditorState, Compartment } from "@codemirror/state";
import { oneDark } from "@codemirror/theme-one-dark";

// Languages load when a file needs one: the parsers are a third of the
// editor's weight, and most sessions use two or three of them.
const byExt = {
  js: () => import("@codemirror/lang-javascript").then((m) => m.javascript()),
  mjs: () => import("@codemirror/lang-javascript").then((m) => m.javascript()),
  cjs: () => import("@codemirror/lang-javascript").then((m) => m.javascript()),
  jsx: () => import("@codemirror/lang-javascript").then((m) => m.javascript({ jsx: true })),
  ts: () => import("@codemirror/lang-javascript").then((m) => m.javascript({ typescript: true })),
  tsx: () => import("@codemirror/lang-javascript").then((m) => m.javascript({ jsx: true, typescript: true })),
  py: () => import("@codemirror/lang-python").then((m) => m.python()),
  go: () => import("@codemirror/lang-go").then((m) => m.go()),
  json: () => import("@codemirror/lang-json").then((m) => m.json()),
  md: () => import("@codemirror/lang-markdown").then((m) => m.markdown()),
  html: () => import("@codemirror/lang-html").then((m) => m.html()),
  htm: () => import("@codemirror/lang-html").then((m) => m.html()),
  css: () => import("@codemirror/lang-css").then((m) => m.css()),
  rs: () => import("@codemirror/lang-rust").then((m) => m.rust()),
  yaml: () => import("@codemirror/lang-yaml").then((m) => m.yaml()),
  yml: () => import("@codemirror/lang-yaml").then((m) => m.yaml()),
  c: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  h: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  cc: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  cpp: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  cxx: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  hpp: () => import("@codemirror/lang-cpp").then((m) => m.cpp()),
  java: () => import("@codemirror/lang-java").then((m) => m.java()),
  kt: () => import("@codemirror/lang-java").then((m) => m.java()),
  sql: () => import("@codemirror/lang-sql").then((m) => m.sql()),
  php: () => import("@codemirror/lang-php").then((m) => m.php()),
  // CodeMirror 5's modes, for what has no CodeMirror 6 parser.
  sh: () => legacy(import("@codemirror/legacy-modes/mode/shell"), "shell"),
  bash: () => legacy(import("@codemirror/legacy-modes/mode/shell"), "shell"),
  zsh: () => legacy(import("@codemirror/legacy-modes/mode/shell"), "shell"),
  toml: () => legacy(import("@codemirror/legacy-modes/mode/toml"), "toml"),
  rb: () => legacy(import("@codemirror/legacy-modes/mode/ruby"), "ruby"),
  lua: () => legacy(import("@codemirror/legacy-modes/mode/lua"), "lua"),
  diff: () => legacy(import("@codemirror/legacy-modes/mode/diff"), "diff"),
  patch: () => legacy(import("@codemirror/legacy-modes/mode/diff"), "diff"),
  ini: () => legacy(import("@codemirror/legacy-modes/mode/properties"), "properties"),
  properties: () => legacy(import("@codemirror/legacy-modes/mode/properties"), "properties"),
  dockerfile: () => legacy(import("@codemirror/legacy-modes/mode/dockerfile"), "dockerFile"),
};

// Files known by name rather than extension.
const byName = { dockerfile: byExt.dockerfile, containerfile: byExt.dockerfile, ".bashrc": byExt.sh, ".profile": byExt.sh };

function legacy(mode, name) {
  return Promise.all([import("@codemirror/language"), mode]).then(([{ StreamLanguage }, m]) => StreamLanguage.define(m[name]));
}

// language resolves to the highlighting for path's kind of file (none for
// one it does not know, or if its parser fails to load).
export function language(path) {
  const name = path.split("/").pop().toLowerCase();
  const load = byName[name] || byExt[name.includes(".") ? name.split(".").pop() : ""];
  return load ? load().catch(() => []) : Promise.resolve([]);
}

// Doc is one open file: its editor, whether it has unsaved changes, and
// saving with Ctrl-S (an atomic write on the other side, mode kept).
export class Doc {
  constructor(host, path, text, { dark, onDirty, onStatus, etag }) {
    this.path = path;
    this.saved = text;
    this.etag = etag; // of what is on disk as far as this editor knows
    this.onDirty = onDirty;
    this.onStatus = onStatus;
    this.theme = new Compartment();
    this.lang = new Compartment();
    this.view = new EditorView({
      parent: host,
      state: EditorState.create({
        doc: text,
        extensions: [
          basicSetup,
          this.lang.of([]),
          this.theme.of(dark ? oneDark : []),
          keymap.of([{ key: "Mod-s", preventDefault: true, run: () => (this.save().catch((e) => this.onStatus(e.message)), true) }]),
          EditorView.updateListener.of((u) => u.docChanged && this.onDirty(this.dirty())),
        ],
      }),
    });
    language(path).then((ext) => this.view.dispatch({ effects: this.lang.reconfigure(ext) }));
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

  // goto puts the cursor on line n (from 1) and scrolls it into view.
  goto(n) {
    const doc = this.view.state.doc;
    const line = doc.line(Math.max(1, Math.min(n, doc.lines)));
    this.view.dispatch({ selection: { anchor: line.from, head: line.to }, scrollIntoView: true });
    this.view.focus();
  }

  setDark(dark) {
    this.view.dispatch({ effects: this.theme.reconfigure(dark ? oneDark : []) });
  }

  // save writes the file if it is still what this editor last read or
  // wrote; if something else changed it since, it asks before
  // overwriting.
  async save(force = false) {
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
    if (!r.ok) throw new Error(`save ${this.path}: ${r.status} ${await r.text()}`);
    this.etag = r.headers.get("ETag");
    this.saved = text;
    this.onDirty(this.dirty());
    this.onStatus(`saved ${this.path}`);
  }
}
