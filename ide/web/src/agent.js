// The agent panel: prompts go to the launcher (the model is called from
// the host, keys never enter the workspace); its steps stream back, and
// edits and commands wait here for approval, diff shown.

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
    send.disabled = b;
    send.textContent = b ? "…" : "Send";
  };

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
      case "checkpoint":
        add(el("div", "note", `checkpoint ${m.text.slice(0, 12)}`));
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
    if (!text || busy || !ws || ws.readyState !== WebSocket.OPEN) return;
    add(el("div", "msg user", text));
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
