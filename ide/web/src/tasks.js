// The Tasks view: the project's tasks (cove agent --task NAME: a branch
// and a workspace each), as the launcher lists them (ide/tasks.go); a
// task's diff against its base in the merge view, read-only; its agent's
// conversation; its own IDE (terminal, files) in a new window; two tasks'
// diffs side by side; Merge into the project and Discard, after asking.
// git runs in the workspaces; what they print is text here, never markup.
import { $, el } from "./dom.js";

const enc = encodeURIComponent;

export function startTasks({ section, box, status, dark, merged }) {
  const list = el("div", { class: "tasks-list" });
  box.append(list);
  let last = "";
  let names = [];

  async function refresh() {
    const r = await fetch("/api/tasks").catch(() => null);
    if (!r || !r.ok) return;
    const tasks = await r.json();
    const key = JSON.stringify(tasks);
    if (key === last) return;
    last = key;
    names = tasks.map((t) => t.name);
    section.dataset.count = String(tasks.length);
    if (!tasks.length) {
      list.replaceChildren(el("p", { class: "empty", title: "Each task is a branch and a workspace of its own" }, "No tasks. cove agent --task NAME -p PROMPT starts one."));
      return;
    }
    list.replaceChildren(...tasks.map(row));
  }

  const row = (t) => el("div", { class: "task", "data-name": t.name, "data-status": t.status, title: t.prompt || t.name },
    el("div", { class: "task-line" },
      el("button", { class: "task-name", title: `Show ${t.branch}'s changes against ${t.base.slice(0, 12)}`, onclick: () => show(t.name) }, t.name),
      el("span", { class: `task-status s-${t.status === "running" ? "running" : "stopped"}` }, t.status),
      el("button", { class: "task-open", title: "Open the task's workspace in an IDE window of its own: its terminal, its files", onclick: () => openIDE(t.name) }, "⧉"),
      el("button", { class: "task-transcript", title: "Its agent's conversation", onclick: () => transcript(t.name) }, "☰"),
      el("button", { class: "task-compare", title: "Compare with another task's changes, side by side", onclick: () => compare(t.name) }, "⇄"),
      el("button", { class: "task-merge", title: `Merge ${t.branch} into the project`, onclick: () => merge(t.name) }, "Merge"),
      el("button", { class: "task-discard", title: "Remove the task: its workspace, tree and branch", onclick: () => discard(t.name) }, "Discard")),
    el("div", { class: "task-info" }, `${t.commits} commit${t.commits === 1 ? "" : "s"}${t.diff ? ` · ${t.diff}` : ""}`),
    t.prompt ? el("div", { class: "task-prompt" }, t.prompt.split("\n")[0].slice(0, 200)) : "");

  async function diffOf(name) {
    const r = await fetch(`/api/tasks/diff?name=${enc(name)}`);
    const text = await r.text();
    if (!r.ok) throw new Error(text.trim());
    return text;
  }

  // show puts the task's diff in the merge view: its base's side of each
  // hunk on the left, the task's on the right, file by file.
  async function show(name) {
    try {
      const [a, b] = sides(await diffOf(name));
      await open(name, `${name} — its base ↔ its branch`, a, b, true);
    } catch (e) {
      status(`task ${name}: ${e.message}`);
    }
  }

  // openIDE opens the task's own IDE (cove up on its tree) in a new
  // window: asked for at once, while the click still allows a window,
  // and sent to the task's IDE once its launcher answers.
  async function openIDE(name) {
    const w = window.open("about:blank", "_blank");
    status(`opening ${name}'s workspace…`);
    try {
      const r = await fetch(`/api/tasks/open?name=${enc(name)}`, { method: "POST" });
      if (!r.ok) throw new Error((await r.text()).trim());
      const { url } = await r.json();
      if (!/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+$/.test(url)) throw new Error(`not a URL: ${url}`);
      if (w) w.location.href = url;
      status(`${name}'s workspace is open in its own window`);
    } catch (e) {
      w?.close();
      status(`open ${name}: ${e.message.slice(0, 300)}`);
    }
  }

  // transcript shows the task's agent's conversation, as text.
  async function transcript(name) {
    const r = await fetch(`/api/tasks/transcript?name=${enc(name)}`);
    const text = await r.text();
    if (!r.ok) return status(`task ${name}: ${text.trim().slice(0, 300)}`);
    $("#task-diff")?.remove();
    const close = () => pane.remove();
    const pane = el("div", { id: "task-diff", class: "diff-pane transcript", "data-name": name, role: "dialog", "aria-label": `${name}'s conversation` },
      el("div", { class: "scm-diff-head" }, el("span", {}, `${name} — its agent's conversation`), el("button", { class: "task-close", onclick: () => close() }, "Close")),
      el("pre", { class: "task-transcript-text" }, text));
    $("#main").append(pane);
    pane.addEventListener("keydown", (ev) => ev.key === "Escape" && close());
    pane.querySelector(".task-close").focus();
  }

  async function compare(name) {
    const others = names.filter((n) => n !== name);
    if (!others.length) return status("there is no other task to compare with");
    const other = others.length === 1 ? others[0] : prompt(`Compare ${name}'s changes with which task's? (${others.join(", ")})`, others[0]);
    if (!other || !names.includes(other)) return;
    try {
      const [a, b] = await Promise.all([diffOf(name), diffOf(other)]);
      await open(`${name}-${other}`, `${name}'s changes ↔ ${other}'s changes`, a, b, false);
    } catch (e) {
      status(`compare ${name} with ${other}: ${e.message}`);
    }
  }

  async function open(name, title, a, b, actions) {
    const [{ MergeView }, { EditorView, basicSetup }, { EditorState }, theme] = await Promise.all([
      import("@codemirror/merge"), import("codemirror"), import("@codemirror/state"),
      dark() ? import("@codemirror/theme-one-dark").then((m) => m.oneDark) : [],
    ]);
    $("#task-diff")?.remove();
    const host = el("div", { class: "merge-host" });
    const close = () => (view.destroy(), pane.remove());
    const buttons = actions
      ? [el("button", { class: "task-merge", onclick: () => merge(name).then((ok) => ok && close()) }, "Merge"),
        el("button", { class: "task-discard", onclick: () => discard(name).then((ok) => ok && close()) }, "Discard")]
      : [];
    const pane = el("div", { id: "task-diff", class: "diff-pane", "data-name": name, role: "dialog", "aria-label": title },
      el("div", { class: "scm-diff-head" }, el("span", {}, title), el("span", {}, ...buttons, el("button", { class: "task-close", onclick: () => close() }, "Close"))), host);
    const ro = [basicSetup, theme, EditorState.readOnly.of(true), EditorView.editable.of(false)];
    $("#main").append(pane);
    const view = new MergeView({ a: { doc: a, extensions: ro }, b: { doc: b, extensions: ro }, parent: host, collapseUnchanged: { margin: 3, minSize: 8 } });
    pane.addEventListener("keydown", (ev) => ev.key === "Escape" && close());
    pane.querySelector(".task-close").focus();
  }

  async function post(op, name) {
    const r = await fetch(`/api/tasks/${op}?name=${enc(name)}`, { method: "POST" });
    const text = (await r.text()).trim();
    if (!r.ok) throw new Error(text);
    return text;
  }

  async function merge(name) {
    if (!confirm(`Merge task ${name}'s branch into the project's current branch? git merges it in the project's workspace; conflicts stay there to resolve.`)) return false;
    status(`merging ${name}…`);
    try {
      const out = await post("merge", name);
      status(`merged ${name}${out ? `: ${out.split("\n")[0].slice(0, 200)}` : ""}`);
      return true;
    } catch (e) {
      status(`merge ${name}: ${e.message.slice(0, 500)}`);
      return false;
    } finally {
      merged();
      refresh();
    }
  }

  async function discard(name) {
    if (!confirm(`Discard task ${name}? Its workspace, its tree and its branch are removed: what it did and did not merge is gone.`)) return false;
    status(`discarding ${name}…`);
    try {
      await post("discard", name);
      status(`discarded ${name}`);
      return true;
    } catch (e) {
      status(`discard ${name}: ${e.message.slice(0, 500)}`);
      return false;
    } finally {
      refresh();
    }
  }

  addEventListener("focus", () => refresh());
  setInterval(() => document.visibilityState === "visible" && !document.body.classList.contains("stopped") && !section.classList.contains("folded") && refresh(), 10000);
  refresh();
  return { refresh };
}

// sides makes git's unified diff two documents for the merge view: each
// file's header and each hunk's line on both, a hunk's context on both,
// its removed lines on the left and its added ones on the right.
export function sides(patch) {
  const a = [], b = [];
  let header = false;
  for (const line of patch.replace(/\n$/, "").split("\n")) {
    if (line.startsWith("diff --git ")) header = true;
    else if (line.startsWith("@@")) header = false;
    if (header || line.startsWith("@@")) {
      if (!/^(index |--- |\+\+\+ )/.test(line)) (a.push(line), b.push(line));
    } else if (line.startsWith("-")) a.push(line.slice(1));
    else if (line.startsWith("+")) b.push(line.slice(1));
    else if (line.startsWith(" ")) (a.push(line.slice(1)), b.push(line.slice(1)));
    else if (!line.startsWith("\\")) (a.push(line), b.push(line));
  }
  return [a.join("\n"), b.join("\n")];
}
