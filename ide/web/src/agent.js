// The agent panel: prompts go to the launcher (the model is called from
// the host, keys never enter the workspace); its steps stream back, and
// edits and commands wait here for approval, diff shown. Stop ends the
// turn in progress; each turn's checkpoint can rewind the files and the
// conversation to before it.

const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
};

export function startAgent({ log, input, send, status }) {
  let ws;
  let current = null; // the answer being streamed
  let busy = false;

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
  let lastUser = null; // the newest prompt's node, which its checkpoint takes back

  function handle(m) {
    switch (m.type) {
      case "text":
        if (!current) current = add(el("div", "msg assistant", ""));
        current.textContent += m.text;
        log.scrollTop = log.scrollHeight;
        break;
      case "thinking":
        add(el("div", "thinking", m.text));
        break;
      case "tool_call":
        current = null;
        add(el("div", "tool", `${m.call.name} ${JSON.stringify(m.call.args)}`));
        break;
      case "tool_result": {
        const d = add(el("details", m.is_error ? "result error" : "result"));
        d.append(el("summary", null, (m.text || "").split("\n")[0].slice(0, 120) || "(no output)"), el("pre", null, m.text));
        break;
      }
      case "approval": {
        const card = add(el("div", "approval"));
        card.append(el("div", "action", m.action));
        if (m.diff) card.append(el("pre", "diff", m.diff));
        const reason = el("input", "reason");
        reason.placeholder = "why not (optional)";
        const yes = el("button", "approve", "Approve");
        const no = el("button", "reject", "Reject");
        const decide = (approve) => {
          ws.send(JSON.stringify({ type: "decision", id: m.id, approve, reason: reason.value }));
          card.classList.add(approve ? "approved" : "rejected");
          for (const b of [yes, no, reason]) b.disabled = true;
        };
        yes.onclick = () => decide(true);
        no.onclick = () => decide(false);
        card.append(reason, yes, no);
        yes.focus();
        break;
      }
      case "checkpoint": {
        const note = add(el("div", "note checkpoint", `checkpoint ${m.text.slice(0, 12)} `));
        note.dataset.checkpoint = m.text;
        note.userNode = lastUser;
        const back = el("button", "rewind", "Rewind to here");
        back.title = "put the files and the conversation back as they were before this prompt";
        back.onclick = () => {
          if (!busy) ws.send(JSON.stringify({ type: "rewind", text: m.text }));
        };
        note.append(back);
        break;
      }
      case "rewound": {
        const note = log.querySelector(`[data-checkpoint="${m.text}"]`);
        if (!note) break;
        const from = note.userNode || note;
        if (note.userNode) input.value = note.userNode.textContent;
        while (from.nextSibling) from.nextSibling.remove();
        from.remove();
        current = null;
        add(el("div", "note", "files and conversation rewound; the prompt is back in the box"));
        input.focus();
        break;
      }
      case "stopped":
        current = null;
        add(el("div", "note", "stopped"));
        setBusy(false);
        break;
      case "compacted":
        add(el("div", "note", "the conversation was summarised to fit the model"));
        break;
      case "error":
        add(el("div", "msg error", m.text));
        setBusy(false);
        break;
      case "done":
        current = null;
        setBusy(false);
        break;
    }
  }

  function connect(retry = 0) {
    ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/agent`);
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
    lastUser = add(el("div", "msg user", text));
    current = null;
    input.value = "";
    setBusy(true);
    ws.send(JSON.stringify({ type: "prompt", text }));
  }

  send.onclick = submit;
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      submit();
    }
  });
  connect();
}
