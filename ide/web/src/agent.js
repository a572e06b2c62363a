// The agent panel: prompts go to the launcher (the model is called from
// the host, keys never enter the workspace); its steps stream back, and
// edits and commands wait here for approval, diff shown. Stop ends the
// turn in progress; each turn's checkpoint can rewind the files and the
// conversation to before it. The conversation is the workspace's, not
// this page's: every event has an id, and a reload or a reconnect asks
// for those after the last it showed.

import { EditorView } from "codemirror";
import { EditorState } from "@codemirror/state";
import { lineNumbers } from "@codemirror/view";
import { syntaxHighlighting, defaultHighlightStyle } from "@codemirror/language";
import { oneDark } from "@codemirror/theme-one-dark";
import { language } from "./editor.js";

// mergeView shows a proposed edit as the file will be, the lines it
// replaces shown struck out above the new ones, unchanged stretches
// folded: easier to judge than a unified diff. The merge view and the
// file's language load on first use.
async function mergeView(host, { path, before, after }) {
  const [{ unifiedMergeView }, lang] = await Promise.all([import("@codemirror/merge"), language(path)]);
  const dark = matchMedia("(prefers-color-scheme: dark)").matches;
  return new EditorView({
    parent: host,
    state: EditorState.create({
      doc: after,
      extensions: [
        EditorState.readOnly.of(true),
        EditorView.editable.of(false),
        EditorView.lineWrapping,
        lineNumbers(),
        lang,
        dark ? oneDark : syntaxHighlighting(defaultHighlightStyle, { fallback: true }),
        unifiedMergeView({ original: before, mergeControls: false, collapseUnchanged: { margin: 3, minSize: 6 } }),
      ],
    }),
  });
}

// Markdown loads on first use too (its parser's start is 25 ms of a page
// load otherwise); until then an answer shows as text.
let markdown = null;
let markdownReady = null;
// A renderer that cannot load (the launcher went) leaves the text as it is.
const loadMarkdown = () => (markdownReady ??= import("./markdown.js").then((m) => (markdown = m), () => {}));

// callLine says in one line what a tool call does (the arguments in full
// are its tooltip).
function callLine({ name, args = {} }) {
  if (name === "bash" && args.command) return `$ ${args.command}`;
  if (name === "search" && args.pattern) return `search ${args.pattern}`;
  if (args.path) return `${name} ${args.path}`;
  return `${name} ${JSON.stringify(args)}`;
}

const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
};

export function startAgent({ log, input, send, fresh, history }) {
  let ws;
  let current = null; // the answer being streamed
  let busy = false;
  let lastId = 0; // the newest event shown: a reconnect asks for what follows
  let live = false; // false while what this window missed is replayed

  const add = (node) => {
    log.append(node);
    log.scrollTop = log.scrollHeight;
    return node;
  };
  const setBusy = (b) => {
    busy = b;
    send.textContent = b ? "Stop" : "Send";
    send.title = b ? "stop the agent's turn" : "send (Enter)";
    log.classList.toggle("busy", b);
  };
  // An answer is rendered again as its deltas come, once a frame at most.
  const pending = new Set();
  const render = (node) => {
    if (!markdown) loadMarkdown().then((m) => m && rerenderAll());
    if (!pending.size) {
      requestAnimationFrame(() => {
        for (const n of pending) {
          if (markdown) n.replaceChildren(markdown.renderMarkdown(n.md));
          else n.textContent = n.md;
        }
        pending.clear();
        log.scrollTop = log.scrollHeight;
      });
    }
    pending.add(node);
  };
  // Answers shown before the renderer came: rendered once it is here.
  const rerenderAll = () => log.querySelectorAll(".markdown").forEach((n) => n.md != null && render(n));
  let lastUser = null; // the newest prompt's node, which its checkpoint takes back
  const cards = new Map(); // approval number → its card, until decided
  // waiting shows, in the window's title and on the panel, that the agent
  // waits for an answer: the card may be scrolled away, or the page in
  // another tab.
  const title = document.title;
  const waiting = () => {
    const n = cards.size;
    document.title = n ? `(${n}) ${title} — the agent asks` : title;
    log.parentNode.classList.toggle("asking", n > 0);
  };
  // Up in an empty box brings back the last prompt sent from here.
  const sent = [];
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && busy && ws) {
      ws.send(JSON.stringify({ type: "stop" })); // as in a terminal agent
      return;
    }
    if (ev.key === "ArrowUp" && !input.value && sent.length) {
      ev.preventDefault();
      input.value = sent[sent.length - 1];
    }
  });
  let output = null; // the running command's live output
  let toolLine = null; // the last call's line, which its approval card replaces
  let edited = false; // the running call made an edit (its diff is shown)
  let thinking = null; // the reasoning being streamed
  let approved = null; // the action of the approval just granted, whose edit follows
  const usage = fresh.parentNode.insertBefore(el("span", "usage", ""), fresh);
  const mode = fresh.parentNode.insertBefore(el("select", "mode"), fresh);
  for (const [value, label, title] of [
    ["ask", "Ask first", "every edit and command waits for Approve"],
    ["edits", "Auto-edit", "edits run at once (their diffs shown); commands wait for Approve"],
    ["yolo", "Auto", "edits and commands run without asking"],
  ]) {
    const o = mode.appendChild(el("option", null, label));
    o.value = value;
    o.title = title;
  }
  mode.title = "what the agent may do without asking";
  // The MCP servers: where each runs, its state and tools, or its error.
  const servers = log.parentNode.insertBefore(el("details", "mcp"), log);
  servers.id = "agent-mcp";
  servers.hidden = true;
  const showServers = (list) => {
    servers.hidden = !list.length;
    const failed = list.filter((s) => s.state === "failed").length;
    const running = list.filter((s) => s.state === "running").length;
    const summary = el("summary", failed ? "failed" : null,
      `MCP: ${running} of ${list.length} server${list.length === 1 ? "" : "s"} running${failed ? `, ${failed} failed` : ""}`);
    const items = el("ul");
    for (const s of list) {
      const li = items.appendChild(el("li", "server " + s.state));
      li.append(el("span", "name", s.name), el("span", "where", ` ${s.where}, ${s.kind} · `), el("span", "state", s.state));
      if (s.state === "running") {
        const t = li.appendChild(el("span", "tools", ` · ${(s.tools || []).length} tools`));
        t.title = (s.tools || []).join(", ");
      }
      if (s.restarts) li.append(el("span", "restarts", ` · restarted ${s.restarts}×`));
      if (s.error) li.append(el("div", "error", s.error));
      li.title = s.source;
    }
    servers.replaceChildren(summary, items);
  };
  mode.onchange = () => ws && ws.send(JSON.stringify({ type: "mode", text: mode.value }));

  function handle(m) {
    if (m.id) {
      if (m.id <= lastId) return; // seen before a reconnect
      lastId = m.id;
    }
    switch (m.type) {
      case "live":
        live = true;
        break;
      case "reset":
        lastId = 0;
      // falls through: all of it comes again
      case "cleared": // a new conversation
        log.replaceChildren();
        current = lastUser = output = thinking = null;
        cards.clear();
        waiting();
        usage.textContent = "";
        break;
      case "note":
        add(el("div", "note", m.text));
        break;
      case "mcp":
        showServers(m.servers || []);
        break;
      case "setup":
        setupForm(m);
        break;
      case "sessions":
        sessionList(m.sessions || []);
        break;
      case "setup_models":
        if (setup) setup.models(m.models || []);
        break;
      case "setup_error":
        if (setup) setup.error(m.text);
        break;
      case "setup_done":
        if (setup) setup.card.remove();
        setup = null;
        add(el("div", "note", `the model is set up (saved in ${m.text}); ask away`));
        if (m.reason) add(el("div", "msg error", m.reason));
        input.focus();
        break;
      case "user":
        current = thinking = null;
        lastUser = add(el("div", "msg user", m.text));
        // The box empties when the prompt is taken, not before: one the
        // launcher refuses stays to send again.
        if (live && input.value.trim() === m.text) input.value = "";
        break;
      case "state":
        setBusy(m.text === "running");
        break;
      case "text":
        thinking = null;
        if (!current) {
          current = add(el("div", "msg assistant markdown"));
          current.md = "";
        }
        current.md += m.text;
        render(current);
        break;
      case "thinking": // deltas, gathered into one block until the answer
        if (!thinking) thinking = add(el("div", "thinking", ""));
        thinking.textContent += m.text;
        break;
      case "usage": {
        // What the model read and wrote on its last call: about the size
        // of the conversation, against its context window.
        const n = (m.usage?.input || 0) + (m.usage?.output || 0);
        usage.textContent = n ? `${n >= 1000 ? (n / 1000).toFixed(1) + "k" : n} tokens` : "";
        usage.title = `the last call: ${m.usage?.input || 0} tokens in (${m.usage?.cache_read || 0} from the cache), ${m.usage?.output || 0} out`;
        break;
      }
      case "tool_call":
        current = thinking = null;
        edited = false;
        toolLine = add(el("div", "tool", callLine(m.call)));
        toolLine.title = JSON.stringify(m.call.args, null, 2);
        break;
      case "tool_output":
        if (!output) {
          output = add(el("pre", "output"));
        }
        output.textContent += m.text;
        output.scrollTop = output.scrollHeight;
        log.scrollTop = log.scrollHeight;
        break;
      case "tool_result": {
        if (output) output.remove();
        output = null;
        // An edit's result says what its diff (shown) says already.
        if (edited && !m.is_error) break;
        const d = add(el("details", m.is_error ? "result error" : "result"));
        d.append(el("summary", null, (m.text || "").split("\n")[0].slice(0, 120) || "(no output)"), el("pre", null, m.text));
        // A command's output is what one wants to see: open unless long.
        d.open = (m.text || "").split("\n").length <= 30;
        break;
      }
      case "approval": {
        // The card names the call: its line above would say it twice.
        if (toolLine && toolLine === log.lastElementChild) toolLine.remove();
        const card = add(el("div", "approval"));
        card.append(el("div", "action", m.action));
        if (m.after != null) {
          const host = card.appendChild(el("div", "merge"));
          mergeView(host, m).catch(() => host.replaceWith(el("pre", "diff", m.diff)));
        }
        else if (m.diff) card.append(el("pre", "diff", m.diff));
        const reason = el("input", "reason");
        reason.placeholder = "why not (optional)";
        const yes = el("button", "approve", "Approve");
        const no = el("button", "reject", "Reject");
        const decide = (approve, always) => {
          ws.send(JSON.stringify({ type: "decision", approval: m.approval, approve, reason: reason.value, always }));
          for (const b of card.controls) b.disabled = true;
        };
        yes.onclick = () => decide(true);
        no.onclick = () => decide(false);
        // By keyboard: y approves, n goes to the reason, whose Enter rejects.
        yes.title = "Approve (y)";
        no.title = "Reject (n, then the reason and Enter)";
        card.addEventListener("keydown", (ev) => {
          if (ev.target === reason) {
            if (ev.key === "Enter") (ev.preventDefault(), decide(false));
            return;
          }
          if (ev.key === "y") (ev.preventDefault(), decide(true));
          if (ev.key === "n") (ev.preventDefault(), reason.focus());
        });
        card.append(reason, yes, no);
        card.controls = [yes, no, reason];
        card.action = m.action;
        // An MCP tool may be allowed for the rest of the conversation,
        // the tool alone or all of its server's.
        for (const key of m.always || []) {
          const b = el("button", "approve-always", key.includes("/") ? "Always allow this tool" : "Always allow this server");
          b.title = `approve, and from now on run ${key} without asking, in this conversation`;
          b.onclick = () => decide(true, key);
          card.append(b);
          card.controls.push(b);
        }
        if (m.after != null) {
          // Approve this and the edits after it, for this conversation.
          const all = el("button", "approve-all", "Approve all edits");
          all.title = "switch to Auto-edit: edits run without asking, commands still ask";
          all.onclick = () => {
            ws.send(JSON.stringify({ type: "mode", text: "edits" }));
            decide(true);
            all.disabled = true;
          };
          card.append(all);
          card.controls.push(all);
        }
        cards.set(m.approval, card);
        waiting();
        if (live) yes.focus();
        break;
      }
      case "decided": {
        // From this window or another: the first answer counts.
        const card = cards.get(m.approval);
        if (!card) break;
        approved = m.approve ? card.action : null;
        cards.delete(m.approval);
        waiting();
        card.classList.add(m.approve ? "approved" : "rejected");
        for (const b of card.controls) b.remove();
        card.append(el("div", "verdict", m.approve ? "✓ approved" : `✗ rejected${m.reason ? ": " + m.reason : ""}`));
        break;
      }
      case "edited": {
        edited = true;
        // A change made: its diff, open unless it was just approved from its card.
        const d = add(el("details", "edited"));
        d.open = approved !== m.action;
        approved = null;
        const lines = (m.diff || "").split("\n");
        const plus = lines.filter((l) => l.startsWith("+") && !l.startsWith("+++")).length;
        const minus = lines.filter((l) => l.startsWith("-") && !l.startsWith("---")).length;
        d.append(el("summary", null, `${m.action}  +${plus} −${minus}`));
        const pre = d.appendChild(el("pre", "diff"));
        for (const l of lines) {
          const cls = l.startsWith("@@") ? "hunk" : l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : null;
          pre.append(el("span", cls, l + "\n"));
        }
        break;
      }
      case "mode":
        mode.value = m.text;
        break;
      case "checkpoint": {
        const note = add(el("div", "note checkpoint", `checkpoint ${m.text.slice(0, 12)} `));
        note.dataset.checkpoint = m.text;
        note.userNode = lastUser;
        const back = el("button", "rewind", "Rewind to here");
        back.title = "put the files and the conversation back as they were before this prompt";
        back.onclick = () => {
          if (busy) return;
          // It changes files on disk: asked first, as VS Code's chat does.
          if (!confirm("Put the files and the conversation back as they were before this prompt? What changed since is lost.")) return;
          ws.send(JSON.stringify({ type: "rewind", text: m.text }));
        };
        note.append(back);
        break;
      }
      case "rewound": {
        const note = log.querySelector(`[data-checkpoint="${m.text}"]`);
        if (!note) break;
        const from = note.userNode || note;
        if (live && note.userNode) input.value = note.userNode.textContent;
        while (from.nextSibling) from.nextSibling.remove();
        from.remove();
        current = null;
        add(el("div", "note", "files and conversation rewound" + (live ? "; the prompt is back in the box" : "")));
        if (live) input.focus();
        break;
      }
      case "stopped":
        current = null;
        add(el("div", "note", "stopped"));
        break;
      case "compacted": {
        add(el("div", "note", "the conversation was summarised to fit the model"));
        // The turns before this one are a summary now: no rewinding to them.
        const notes = [...log.querySelectorAll(".note.checkpoint")];
        for (const n of notes.slice(0, -1)) n.querySelector(".rewind")?.remove();
        break;
      }
      case "error":
        add(el("div", "msg error", m.text));
        break;
      case "done":
        current = null;
        break;
    }
  }

  // sessionList shows the conversations kept, to go on with one.
  function sessionList(list) {
    document.getElementById("sessions")?.remove();
    const box = el("div", "sessions");
    box.id = "sessions";
    if (!list.length) box.append(el("div", "note", "no conversations yet"));
    for (const s of list) {
      const when = new Date(s.modified).toLocaleString();
      const row = el("button", "session");
      row.append(el("span", "prompt", s.prompt || "(no prompt)"), el("span", "when", `${when} · ${s.prompts} prompt${s.prompts === 1 ? "" : "s"}`));
      row.title = s.id;
      row.onclick = () => {
        box.remove();
        ws.send(JSON.stringify({ type: "open", text: s.id }));
      };
      box.append(row);
    }
    log.parentNode.insertBefore(box, log);
    box.querySelector("button")?.focus();
    box.addEventListener("keydown", (ev) => ev.key === "Escape" && box.remove());
  }
  history.onclick = () => {
    if (document.getElementById("sessions")) return document.getElementById("sessions").remove();
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "sessions" }));
  };

  // setupForm is the first run: no model is configured, so the panel
  // asks for one, as cove agent --setup does on a terminal. The key goes
  // to the launcher only; it is never shown back.
  let setup = null;
  function setupForm(m) {
    if (setup) setup.card.remove();
    const c = m.config || {};
    const card = add(el("div", "setup"));
    card.append(el("div", "action", "Set up the agent's model"));
    card.append(el("div", "note", m.text));
    if (m.found?.length) card.append(el("div", "note", `found: ${m.found.join(", ")}`));
    const field = (label, node) => {
      const row = card.appendChild(el("label", "field"));
      row.append(el("span", null, label), node);
      return node;
    };
    const provider = field("Provider", el("select"));
    for (const [v, t] of [["openai", "OpenAI-compatible (OpenAI, OpenRouter, Ollama, LM Studio, llama.cpp, vLLM…)"], ["anthropic", "Anthropic"]]) {
      const o = provider.appendChild(el("option", null, t));
      o.value = v;
    }
    provider.value = c.provider || "openai";
    const url = field("Base URL", el("input"));
    url.value = c.base_url || "";
    url.placeholder = "https://api.openai.com/v1";
    const key = field("API key", el("input"));
    key.type = "password";
    key.autocomplete = "off";
    key.value = c.api_key || "";
    key.placeholder = m.saved_key ? "empty: keep the saved key" : "the key, or $VAR to read it from the environment; empty for none";
    const model = field("Model", el("input"));
    model.value = c.model || "";
    model.setAttribute("list", "setup-models");
    const list = card.appendChild(el("datalist"));
    list.id = "setup-models";
    const status = card.appendChild(el("div", "note"));
    const config = () => ({ provider: provider.value, base_url: url.value.trim(), api_key: key.value.trim(), model: model.value.trim(), context_window: windows.get(model.value.trim()) || 0 });
    const windows = new Map();
    const listBtn = el("button", null, "List models");
    listBtn.onclick = () => {
      status.textContent = "asking the server…";
      ws.send(JSON.stringify({ type: "setup_models", config: config() }));
    };
    const save = el("button", "approve", "Check and save");
    save.onclick = () => {
      status.textContent = `checking ${model.value} with one small call…`;
      ws.send(JSON.stringify({ type: "setup_save", config: config() }));
    };
    card.append(listBtn, save);
    setup = {
      card,
      models(ms) {
        list.replaceChildren(...ms.map((x) => {
          windows.set(x.ID, x.Window);
          const o = el("option");
          o.value = x.ID;
          return o;
        }));
        status.textContent = ms.length ? `${ms.length} ${ms.length === 1 ? "model" : "models"}: pick one in the Model box` : "the server lists no models: type the model's name";
        if (!model.value && ms.length === 1) model.value = ms[0].ID;
        model.focus();
      },
      error(text) {
        status.textContent = text;
        status.classList.add("error");
      },
    };
    if (url.value) listBtn.click();
  }

  function connect(retry = 0) {
    live = false;
    ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/agent?after=${lastId}`);
    ws.onopen = () => (retry = 0);
    ws.onmessage = (ev) => handle(JSON.parse(ev.data));
    ws.onclose = () => setTimeout(() => connect(retry + 1), Math.min(5000, 500 * 2 ** retry));
  }

  function submit() {
    const text = input.value.trim();
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (busy) {
      ws.send(JSON.stringify({ type: "stop" }));
      return;
    }
    if (!text) return;
    sent.push(text);
    ws.send(JSON.stringify({ type: "prompt", text }));
  }

  send.onclick = submit;
  fresh.onclick = () => {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "new" }));
    input.focus();
  };
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      submit();
    }
  });
  connect();
}
