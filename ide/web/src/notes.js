// The workspace log: what the launcher said while it started the
// workspace (GET /api/notes, see ide/notes.go), in a tab beside the
// terminals. Its notes, what cove did not do as the project asked (a
// devcontainer.json key it ignores, a port kept on loopback, a runArg it
// dropped), are marked, and counted on a badge in the status bar that
// opens the log; the lifecycle commands' output is there too. That
// output is the workspace's: every line is shown as text, never as HTML.
import { el } from "./dom.js";

const MAX_ROWS = 5000; // the page keeps this many lines; the launcher keeps 256 KiB

// startNotes follows the log into pane; badge counts the notes and, like
// the tab, calls show; stopped says the workspace stopped (no more
// reconnecting). The badge stands out until the log has been seen with
// every note in it (seen, or notes arriving while it is shown); a reload
// remembers what was seen.
export function startNotes({ pane, badge, show, stopped }) {
  let last = 0; // the last line's id
  let notes = 0;
  let lastNote = 0; // the last note's id
  let seenNote = Number(sessionStorage.getItem("cove-notes-seen")) || 0;
  let retry = 0;

  function seen() {
    seenNote = lastNote;
    sessionStorage.setItem("cove-notes-seen", String(seenNote));
    badge.classList.add("seen");
  }

  badge.addEventListener("click", show);

  function add({ lines, dropped }) {
    const atEnd = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 8;
    if (lines.length && lines[0].id <= last) {
      // Lines from before ours: a record begun again, shown again.
      pane.replaceChildren();
      last = notes = lastNote = seenNote = 0;
    }
    if (dropped) pane.append(el("div", { class: "log-line dropped" }, `… ${dropped} earlier line${dropped === 1 ? " is" : "s are"} no longer kept`));
    for (const l of lines) {
      last = l.id; // asked for after it on a reconnect: each line is shown once
      const kind = ["note", "cove", "output"].includes(l.kind) ? l.kind : "output";
      const row = el("div", { class: `log-line ${kind}` }, String(l.text));
      if (kind === "note") {
        notes++;
        lastNote = l.id;
        row.prepend(el("span", { class: "mark", "aria-label": "note" }, "⚠ "));
      }
      pane.append(row);
    }
    while (pane.childElementCount > MAX_ROWS) pane.firstElementChild.remove();
    if (atEnd) pane.scrollTop = pane.scrollHeight;
    badge.hidden = notes === 0;
    badge.textContent = `⚠ ${notes} note${notes === 1 ? "" : "s"}`;
    if (!pane.hidden && pane.offsetParent !== null) seen();
    else badge.classList.toggle("seen", lastNote <= seenNote);
  }

  function connect() {
    if (stopped()) return;
    const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/notes?after=${last}`);
    ws.onopen = () => (retry = 0);
    ws.onmessage = (ev) => add(JSON.parse(ev.data));
    ws.onclose = () => stopped() || setTimeout(connect, Math.min(5000, 250 * 2 ** retry++));
  }
  connect();
  return { notes: () => notes, seen };
}
