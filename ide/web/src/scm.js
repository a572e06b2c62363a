// The Source Control view: git runs in the workspace (ide/git.go), never
// on the host; this lists what changed, shows a file's diff in the merge
// view, stages and unstages files and hunks, discards (after asking), commits, and
// switches or makes branches. The agent's checkpoints are its own, kept
// apart from git: nothing here touches them.
import { $, el } from "./dom.js";
import { language } from "./editor.js";

const enc = encodeURIComponent;
const letters = { M: "modified", A: "added", D: "deleted", R: "renamed", C: "copied", U: "conflict", "?": "untracked", T: "type changed" };

export function startSCM({ box, status, openFile, dark }) {
  const list = el("div", { class: "scm-list" });
  const message = el("textarea", { id: "scm-message", rows: "2", placeholder: "Message (Ctrl+Enter commits what is staged)", spellcheck: "true" });
  const commit = el("button", { id: "scm-commit", onclick: () => doCommit() }, "Commit");
  const branch = el("button", { id: "scm-branch", title: "Switch branch, or make one", onclick: () => switchBranch() }, "");
  box.append(el("div", { class: "scm-row" }, branch, el("button", { title: "Look again", onclick: () => refresh() }, "↻")), message, el("div", { class: "scm-row" }, commit), list);
  message.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) (ev.preventDefault(), doCommit());
  });

  async function post(op, query = "", body = undefined) {
    const r = await fetch(`/api/git/${op}${query}`, { method: "POST", body });
    if (!r.ok) throw new Error((await r.text()).trim());
  }
  const act = (what, f) => f().then(refresh, (e) => status(`${what}: ${e.message}`));

  let last = "";
  async function refresh() {
    const r = await fetch("/api/git/status").catch(() => null);
    if (!r || !r.ok) {
      const why = r ? (await r.text()).trim() : "the workspace does not answer";
      box.dataset.state = "none";
      list.replaceChildren(el("p", { class: "empty" }, /not a git repository/.test(why) ? "This project is not a git repository." : `No source control: ${why.slice(0, 300)}`));
      return;
    }
    const s = await r.json();
    const key = JSON.stringify(s);
    if (key === last) return;
    last = key;
    box.dataset.state = "repo";
    branch.textContent = `⎇ ${(s.branch || "").replace(/^No commits yet on /, "").split("...")[0]}`;
    const staged = s.files.filter((f) => f.x !== " " && f.x !== "?");
    const changed = s.files.filter((f) => f.y !== " ");
    const row = (f, side) => {
      const code = side === "staged" ? f.x : f.y;
      const name = f.path.split("/").pop();
      return el("div", { class: "scm-file", "data-path": f.path, "data-side": side, title: `${f.path}: ${letters[code] || code}` },
        el("button", { class: "scm-name", onclick: () => showDiff(f.path, side === "staged") }, name, el("span", { class: "scm-dir" }, f.path.slice(0, -name.length))),
        el("button", { class: "scm-open", title: "Open the file", onclick: () => openFile(f.path) }, "⤴"),
        ...(side === "staged"
          ? [el("button", { class: "scm-unstage", title: "Unstage", onclick: () => act(`unstage ${f.path}`, () => post("unstage", `?path=${enc(f.path)}`)) }, "−")]
          : [el("button", { class: "scm-discard", title: "Discard the change", onclick: () => discard(f) }, "↺"),
            el("button", { class: "scm-stage", title: "Stage", onclick: () => act(`stage ${f.path}`, () => post("stage", `?path=${enc(f.path)}`)) }, "+")]),
        el("span", { class: `scm-letter l-${code === "?" ? "U" : code}` }, code === "?" ? "U" : code));
    };
    list.replaceChildren(
      el("h3", {}, `Staged changes (${staged.length})`), ...staged.map((f) => row(f, "staged")),
      el("h3", {}, `Changes (${changed.length})`), ...changed.map((f) => row(f, "changes")),
    );
  }

  async function discard(f) {
    const untracked = f.y === "?";
    if (!confirm(untracked ? `Delete ${f.path}? It is not in git: it cannot be brought back.` : `Discard your changes to ${f.path}? They cannot be brought back.`)) return;
    act(`discard ${f.path}`, () => post("discard", `?path=${enc(f.path)}`));
  }

  async function doCommit() {
    const msg = message.value.trim();
    if (!msg) return status("a commit needs a message"), message.focus();
    try {
      await post("commit", "", msg);
      message.value = "";
      status("committed");
    } catch (e) {
      status(`commit: ${e.message}`);
    }
    refresh();
  }

  async function switchBranch() {
    const r = await fetch("/api/git/branches").catch(() => null);
    const b = r?.ok ? await r.json() : { current: "", branches: [] };
    const name = prompt(`Switch to a branch (${b.branches.join(", ") || "none yet"}), or name a new one:`, "");
    if (!name || name === b.current) return;
    const create = !b.branches.includes(name);
    if (create && !confirm(`Make a new branch ${name} here and switch to it?`)) return;
    act(`switch to ${name}`, () => post("switch", `?branch=${enc(name)}${create ? "&create=1" : ""}`).then(() => status(`on ${name}`)));
  }

  // showDiff shows a file's change in the merge view, over the editors:
  // the index against the working tree, or HEAD against the index
  // (staged); above each of git's hunks, a button stages or unstages it.
  async function showDiff(path, staged) {
    const r = await fetch(`/api/git/diff?path=${enc(path)}${staged ? "&staged=1" : ""}`);
    if (!r.ok) return status(`diff ${path}: ${await r.text()}`);
    const { original, modified, hunks = [] } = await r.json();
    const [{ MergeView }, { EditorView, basicSetup }, { EditorState }, lang, theme, buttons] = await Promise.all([
      import("@codemirror/merge"), import("codemirror"), import("@codemirror/state"), language(path),
      dark() ? import("@codemirror/theme-one-dark").then((m) => m.oneDark) : [], hunkButtons(path, staged, hunks),
    ]);
    $("#scm-diff")?.remove();
    const host = el("div", { class: "merge-host" });
    const close = () => (view.destroy(), pane.remove());
    const pane = el("div", { id: "scm-diff", "data-path": path, "data-staged": staged ? "1" : "0", role: "dialog", "aria-label": `Changes in ${path}` },
      el("div", { class: "scm-diff-head" }, el("span", {}, `${path} — ${staged ? "HEAD ↔ staged" : "staged ↔ working tree"}`), el("button", { onclick: () => close() }, "Close")), host);
    const ro = [basicSetup, lang, theme, EditorState.readOnly.of(true), EditorView.editable.of(false)];
    $("#main").append(pane);
    const view = new MergeView({ a: { doc: original, extensions: ro }, b: { doc: modified, extensions: [...ro, buttons] }, parent: host, collapseUnchanged: { margin: 3, minSize: 6 } });
    pane.addEventListener("keydown", (ev) => ev.key === "Escape" && close());
    pane.querySelector("button").focus();
  }

  // hunkButtons puts a Stage (or Unstage) button above the first changed
  // line of each of git's hunks in the diff's right side. The hunk is
  // named by its index and git's ID of it: the workspace builds the patch
  // from its own diff, and refuses when the hunk is no longer that one.
  async function hunkButtons(path, staged, hunks) {
    const [{ EditorView, Decoration, WidgetType }, { RangeSet, StateField }] = await Promise.all([import("@codemirror/view"), import("@codemirror/state")]);
    const op = staged ? "unstage-hunk" : "stage-hunk";
    class HunkButton extends WidgetType {
      constructor(h) {
        super();
        this.h = h;
      }
      eq(o) {
        return o.h.id === this.h.id;
      }
      toDOM() {
        const { index, id, oldStart, oldLines, newStart, newLines } = this.h;
        const run = () => act(`${staged ? "unstage" : "stage"} a hunk of ${path}`, () => post(op, `?path=${enc(path)}&hunk=${index | 0}&id=${enc(id)}`)
          .then(() => (status(`${staged ? "unstaged" : "staged"} lines ${newStart}–${newStart + Math.max(newLines, 1) - 1} of ${path}`), showDiff(path, staged))));
        return el("div", { class: "scm-hunk" },
          el("button", { class: `scm-${op}`, "data-hunk": String(index | 0), title: `@@ -${oldStart},${oldLines} +${newStart},${newLines} @@`, onclick: run }, staged ? "− Unstage hunk" : "+ Stage hunk"));
      }
    }
    // A field, not a function of the view: block widgets change the
    // editor's layout, which only decorations given directly may.
    const build = (doc) => RangeSet.of(hunks.slice(0, 5000).map((h) => Decoration.widget({ widget: new HunkButton(h), block: true, side: -1 })
      .range(doc.line(Math.min(Math.max(1, h.first | 0), doc.lines)).from)), true);
    return StateField.define({ create: (state) => build(state.doc), update: (v) => v, provide: (f) => EditorView.decorations.from(f) });
  }

  // Another tool changes the repository too (a terminal's git): the
  // server's watch says so (a "repo" change: .git's HEAD, index or refs;
  // main.js calls changed), and the view looks again when the window
  // comes back and, in case a change went unseen (a .git elsewhere, a
  // worktree's), every 30 s while it is shown. Every 3 s, as it was, an
  // idle window ran git status 20 times a minute.
  addEventListener("focus", () => refresh());
  setInterval(() => document.visibilityState === "visible" && !document.body.classList.contains("stopped") && refresh(), 30000);
  let timer = null;
  refresh();
  return {
    refresh,
    changed: () => (clearTimeout(timer), (timer = setTimeout(refresh, 200))),
    focus: () => message.focus(),
  };
}
