// The Ports view, in a tab beside the terminals (as VS Code's): the TCP
// ports that processes in the workspace listen on, and those published
// with it (cove up -p, devcontainer.json's forwardPorts), from GET
// /api/ports (ide/forward.go). Forward puts one on this machine's
// 127.0.0.1 (the launcher tunnels each connection through the
// workspace's server), Open opens it, Stop ends the forward. A process's
// name is the workspace's to choose: every field is shown as text, never
// as HTML.
import { el } from "./dom.js";

const SHOWN_EVERY = 1500; // ms between polls while the view is shown
const HIDDEN_EVERY = 5000; // and while not: the tab's count stays true

// openable is a forward's address as the launcher gave it, if it is one
// to open: http on an IP address of this machine.
function openable(url) {
  try {
    const u = new URL(url);
    return u.protocol === "http:" && /^(\d+\.\d+\.\d+\.\d+|\[[0-9a-f:.]+\])$/i.test(u.hostname) ? u.href : "";
  } catch {
    return "";
  }
}

const SOURCES = {
  "-p": ["-p", "published with cove up -p"],
  forwardPorts: ["forwardPorts", "published from devcontainer.json's forwardPorts"],
  forwarded: ["forwarded", "forwarded on request, until you stop it or the workspace stops"],
};

// startPorts follows the ports into pane, counting them on tab; shown
// says whether the view is on screen; stopped says the workspace
// stopped (no more polling).
export function startPorts({ pane, tab, shown, stopped }) {
  const list = el("div", { class: "ports-list", role: "table", "aria-label": "Ports" });
  const note = el("div", { class: "ports-note", role: "status" });
  const input = el("input", { type: "text", inputmode: "numeric", placeholder: "port", "aria-label": "Port to forward", size: "6", spellcheck: "false" });
  const add = el("form", { class: "ports-add", onsubmit: (ev) => { ev.preventDefault(); forward(input.value.trim()); } },
    "Forward a port of the workspace: ", input, el("button", { type: "submit" }, "Forward"));
  pane.append(add, note, list);
  let last = "";
  let timer = 0;

  async function request(method, url, body) {
    const r = await fetch(url, { method, headers: body ? { "Content-Type": "application/json" } : {}, body: body ? JSON.stringify(body) : undefined });
    if (!r.ok) throw new Error((await r.text()).trim() || `${r.status}`);
    return r.status === 204 ? null : r.json();
  }

  async function forward(port) {
    if (!/^\d{1,5}$/.test(port) || +port < 1 || +port > 65535) {
      note.textContent = `${port}: a port is a number from 1 to 65535`;
      return;
    }
    try {
      const r = await request("POST", "/api/ports/forward", { port: +port });
      note.textContent = `Port ${r.port} of the workspace is at ${r.host}`;
      input.value = "";
    } catch (e) {
      note.textContent = `Port ${port}: ${e.message}`;
    }
    refresh();
  }

  async function unforward(port) {
    try {
      await request("DELETE", `/api/ports/forward?port=${port}`);
      note.textContent = `Port ${port} is no longer forwarded`;
    } catch (e) {
      note.textContent = `Port ${port}: ${e.message}`;
    }
    refresh();
  }

  function render({ ports = [], error = "" }) {
    const key = JSON.stringify([ports, error]);
    tab.textContent = ports.length ? `Ports (${ports.length})` : "Ports";
    if (key === last) return;
    last = key;
    const head = el("div", { class: "ports-row head", role: "row" },
      ...["Port", "Process", "Listening on", "On this machine", ""].map((h) => el("span", { role: "columnheader" }, h)));
    const rows = ports.map((p) => {
      const port = Number(p.port) || 0;
      const url = openable(String(p.url || ""));
      const src = SOURCES[p.source];
      const where = el("span", { role: "cell", class: "where" });
      if (url) where.append(el("a", { href: url, target: "_blank", rel: "noopener noreferrer", class: "open", title: `Open ${url} in the browser` }, String(p.host || url)));
      if (src) where.append(" ", el("span", { class: `source ${p.source === "forwarded" ? "forwarded" : "declared"}`, title: src[1] }, src[0]));
      if (p.error) where.append(el("div", { class: "error" }, String(p.error)));
      const actions = el("span", { role: "cell", class: "actions" });
      if (!url) actions.append(el("button", { class: "forward", title: "Forward it to 127.0.0.1 on this machine", onclick: () => forward(String(port)) }, "Forward"));
      if (url) actions.append(el("a", { href: url, target: "_blank", rel: "noopener noreferrer", class: "open-link" }, "Open"));
      if (p.source === "forwarded") actions.append(el("button", { class: "unforward", title: "Stop forwarding it", onclick: () => unforward(port) }, "Stop"));
      return el("div", { class: `ports-row${p.listening ? "" : " idle"}`, role: "row", "data-port": String(port) },
        el("span", { role: "cell", class: "port" }, String(port)),
        el("span", { role: "cell", class: "process" }, String(p.process || (p.listening ? "" : "nothing listens yet"))),
        el("span", { role: "cell", class: "addrs" }, (p.addresses || []).map(String).join(", ")),
        where, actions);
    });
    const empty = ports.length ? [] : [el("div", { class: "ports-empty" }, "No process in the workspace listens on a TCP port yet. Start a server (a dev server, python3 -m http.server) and it shows here.")];
    list.replaceChildren(head, ...rows, ...empty);
    if (error) note.textContent = String(error);
  }

  async function refresh() {
    clearTimeout(timer);
    if (stopped()) return;
    try {
      render(await request("GET", "/api/ports"));
    } catch (e) {
      note.textContent = `Ports: ${e.message}`;
    }
    timer = setTimeout(refresh, shown() ? SHOWN_EVERY : HIDDEN_EVERY);
  }
  refresh();
  return { refresh, focus: () => input.focus() };
}
