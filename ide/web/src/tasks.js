// The Tasks view: the project's tasks (cove agent --task NAME: a branch
// and a workspace each), as the launcher lists them (ide/tasks.go); a
// task's diff against its base in the merge view, read-only; its agent's
// conversation; its own IDE (terminal, files) in a new window; two tasks'
// diffs side by side; Merge into the project and Discard, after asking;
// New task: a name and a prompt, made and started by the launcher as
// cove agent --task does. git runs in the workspaces; what they print is
// text here, never markup.
import { $, el } from "./dom.js";

const enc = encodeURIComponent;

// A task's name, as the launcher checks it (task.CheckName).
const taskName = "[a-z0-9][a-z0-9\\-]{0,39}";
// The most of a prompt the launcher takes (ide.MaxTaskPrompt), in bytes.
const maxPrompt = 64 << 10;

export function startTasks({ section, box, status, dark, merged }) {
  const list = el("div", { class: "tasks-list" });
  const form = newTaskForm();
  box.append(el("div", { class: "tasks-actions" }, el("button", { class: "task-new", title: "Make a task: a branch and a workspace of its own, its agent working on your prompt", onclick: () => form.toggle() }, "+ New task")), form.el, list);
  let last = "";
  let names = [];
  let busy = false; // an agent New task started is at work: look more often

  async function refresh() {
    const r = await fetch("/api/tasks").catch(() => null);
    if (!r || !r.ok) return;
    const tasks = await r.json();
    const key = JSON.stringify(tasks);
    busy = tasks.some((t) => t.status === "starting" || t.agent === "working");
    if (key === last) return;
    last = key;
    names = tasks.map((t) => t.name);
    section.dataset.count = String(tasks.length);
    if (!tasks.length) {
      list.replaceChildren(el("p", { class: "empty", title: "Each task is a branch and a workspace of its own" }, "No tasks. + New task (or cove agent --task NAME -p PROMPT) starts one."));
      return;
    }
    list.replaceChildren(...tasks.map(row));
  }

  // newTaskForm is New task's name and prompt, sent to the launcher as
  // they are; it says why it refuses one.
  function newTaskForm() {
    const name = el("input", { class: "task-new-name", placeholder: "name: fix-login", pattern: taskName, maxlength: "40", required: "", spellcheck: "false", "aria-label": "The task's name" });
    const text = el("textarea", { class: "task-new-prompt", placeholder: "What its agent is to do", rows: "4", required: "", "aria-label": "The task's prompt" });
    const start = el("button", { type: "submit", class: "task-new-start" }, "Start");
    const f = el("form", { class: "task-new-form", hidden: "" }, name, text,
      el("div", { class: "task-new-buttons" }, start, el("button", { type: "button", onclick: () => (f.hidden = true) }, "Cancel")),
      el("div", { class: "task-new-note" }, "Its agent runs with --yes in the task's own workspace, with the agent panel's model."));
    f.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const n = name.value.trim(), p = text.value;
      if (new TextEncoder().encode(p).length > maxPrompt) return status(`the prompt is over ${maxPrompt >> 10} KiB`);
      start.disabled = true;
      try {
        const r = await fetch("/api/tasks/new", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name: n, prompt: p }) });
        if (!r.ok) throw new Error((await r.text()).trim());
        f.hidden = true;
        name.value = text.value = "";
        status(`task ${n}: its agent is starting`);
        refresh();
      } catch (e) {
        status(`new task ${n}: ${e.message.slice(0, 300)}`);
      } finally {
        start.disabled = false;
      }
    });
    f.addEventListener("keydown", (ev) => ev.key === "Escape" && (f.hidden = true));
    return { el: f, toggle: () => ((f.hidden = !f.hidden), f.hidden || name.focus()) };
  }

  const badges = (t) => [
    t.tests && t.tests !== "-" ? el("span", { class: `task-tests t-${t.tests}`, title: "The last test run of its agent" }, `tests ${t.tests}`) : "",
    t.agent ? el("span", { class: `task-agent ${t.agent === "working" ? "a-working" : "a-failed"}`, title: t.agent }, t.agent === "working" ? "agent working…" : "agent failed") : "",
  ];

  const row = (t) => el("div", { class: "task", "data-name": t.name, "data-status": t.status, "data-tests": t.tests || "-", "data-agent": t.agent || "", title: t.prompt || t.name },
    el("div", { class: "task-line" },
      el("button", { class: "task-name", title: `Show ${t.branch}'s changes against ${(t.base || "").slice(0, 12)}`, onclick: () => show(t.name) }, t.name),
      el("span", { class: `task-status s-${t.status === "running" ? "running" : "stopped"}` }, t.status),
      ...badges(t),
      el("button", { class: "task-open", title: "Open the task's workspace in an IDE window of its own: its terminal, its files", onclick: () => openIDE(t.name) }, "⧉"),
      el("button", { class: "task-transcript", title: "Its agent's conversation", onclick: () => transcript(t.name) }, "☰"),
      el("button", { class: "task-compare", title: "Compare with another task's changes, side by side", onclick: () => compare(t.name) }, "⇄"),
      el("button", { class: "task-merge", title: `Merge ${t.branch} into the project`, onclick: () => merge(t.name) }, "Merge"),
      el("button", { class: "task-discard", title: "Remove the task: its workspace, tree and branch", onclick: () => discard(t.name) }, "Discard")),
    el("div", { class: "task-info" }, `${t.commits} commit${t.commits === 1 ? "" : "s"}${t.diff ? ` · ${t.diff}` : ""}`),
    t.agent && t.agent !== "working" ? el("div", { class: "task-agent-why" }, t.agent.slice(0, 300)) : "",
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
  let tick = 0;
  setInterval(() => (busy || ++tick % 5 === 0) && document.visibilityState === "visible" && !document.body.classList.contains("stopped") && !section.classList.contains("folded") && refresh(), 2000);
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
