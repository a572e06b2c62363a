// The page's line to its launcher (GET /api/launcher, see ide/lifeline.go),
// and the "workspace stopped" state. The launcher says when it ends on
// purpose (cove stop, Ctrl-C on cove up) and why; one that dies without a
// word is known by its socket closing and requests failing to connect.
// Then the page says so, stops its terminals from taking keys, keeps the
// editors (their unsaved changes too), and tells how to start it again;
// an app window whose launcher was stopped by its user closes itself.
import { $, el } from "./dom.js";

const wsURL = (path) => `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${path}`;

// The launcher marks the app windows it opens (?window=app): those may
// close themselves. A reload keeps the mark; the address loses it.
const params = new URLSearchParams(location.search);
if (params.get("window") === "app") {
  sessionStorage.setItem("cove-app-window", "1");
  params.delete("window");
  history.replaceState(null, "", location.pathname + (params.size ? `?${params}` : "") + location.hash);
}
export const appWindow = sessionStorage.getItem("cove-app-window") === "1";

// shq quotes a path for a POSIX shell.
const shq = (s) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

export function startLifeline({ onStopped, unsaved, stash }) {
  let dir = null;
  let stopped = null; // why, once stopped
  let retry = 0;
  const realFetch = window.fetch.bind(window);

  // A request that cannot reach the launcher means it may be gone: ask.
  // Once it is, requests fail saying so, not "Failed to fetch".
  window.fetch = async (...args) => {
    if (stopped) throw new Error(`the workspace stopped (${stopped.reason})`);
    try {
      return await realFetch(...args);
    } catch (e) {
      if (e instanceof TypeError) { // a network error; an abort is a DOMException
        await check();
        if (stopped) throw new Error(`the workspace stopped (${stopped.reason})`);
      }
      throw e;
    }
  };

  // check asks whether the launcher is there: it answers its own files
  // (200); a new launcher on this address does not know this page's token
  // (401); nothing answering means it is gone.
  let checking = null;
  function check() {
    checking ??= (async () => {
      for (let i = 0; i < 2; i++) {
        try {
          const r = await realFetch("/favicon.svg", { method: "HEAD", cache: "no-store" });
          if (r.status === 401) return stop({ reason: "another launcher serves this address now", other: true });
          return true;
        } catch {
          await new Promise((res) => setTimeout(res, 400));
        }
      }
      return stop({ reason: "its launcher is gone" });
    })().finally(() => (checking = null));
    return checking;
  }

  function connect() {
    if (stopped) return;
    const ws = new WebSocket(wsURL("/api/launcher"));
    let told = false;
    ws.onopen = () => (retry = 0);
    ws.onmessage = (ev) => {
      const m = JSON.parse(ev.data);
      if (m.type === "hello") dir = m.dir;
      if (m.type === "stopping") {
        told = true;
        stop(m);
      }
    };
    ws.onclose = async () => {
      if (told || stopped) return;
      if ((await check()) === true) setTimeout(connect, Math.min(5000, 250 * 2 ** retry++));
    };
  }

  function stop(why) {
    if (stopped) return;
    stopped = why;
    document.body.classList.add("stopped");
    onStopped(why);
    banner(why);
    // Ended by its user: an app window goes too, unless it holds unsaved
    // work (it stays, saying so). A tab in the user's browser stays.
    if (why.close && appWindow && !unsaved().length) window.close();
  }

  function banner(why) {
    const cmd = dir ? `cove up ${shq(dir)}` : "cove up DIR";
    const kept = unsaved();
    const note = el("span", { class: "stopped-note" });
    const reconnect = el("button", { class: "reconnect", onclick: () => tryReconnect(note, reconnect) }, "Reconnect");
    const copy = el("button", { onclick: () => navigator.clipboard?.writeText(cmd).then(() => (note.textContent = "copied"), () => {}) }, "Copy");
    const how = why.other
      ? ["Use the window that cove opened (or the URL it printed)."]
      : [why.running ? "A window on it again: " : "Start it again: ", el("code", {}, cmd), copy];
    const box = el("div", { id: "stopped", role: "alert" },
      el("div", {}, el("strong", {}, why.running ? "The workspace's launcher stopped" : "The workspace stopped"), ` — ${why.reason}.`),
      el("div", {}, ...how, reconnect, note),
      el("div", { class: "stopped-kept" }, kept.length
        ? `Unsaved changes in ${kept.join(", ")} are kept in this window: copy them out before you close it.`
        : "Nothing was left unsaved."));
    document.body.append(box);
  }

  // tryReconnect reloads once this page's launcher answers again, the
  // unsaved changes stashed for the reloaded page; until then it says
  // what it waits for, and keeps asking.
  let waiting = null;
  async function tryReconnect(note, button) {
    clearTimeout(waiting);
    button.disabled = true;
    note.textContent = "looking for the launcher…";
    const r = await realFetch("/favicon.svg", { method: "HEAD", cache: "no-store" }).catch(() => null);
    if (r && r.ok) {
      stash();
      location.reload();
      return;
    }
    button.disabled = false;
    note.textContent = r && r.status === 401
      ? "a new launcher serves this address: use its window"
      : "not back yet: start it in a terminal; this window reconnects when it can";
    if (!r) waiting = setTimeout(() => tryReconnect(note, button), 3000);
  }

  connect();
  return { stopped: () => stopped };
}
