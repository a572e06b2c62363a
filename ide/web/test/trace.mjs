// What the browser tests' pages did on the network, kept for a failure's
// message: a page that waits for its first shell in vain says nothing
// else (was the script run? did its WebSockets open, close, fail? did the
// page find its launcher gone?).
//   traceContext(ctx): records every page of the browser context ctx,
//     those opened later (a popup) too;
//   traced(): the record, a line per event, the token taken out;
//   shellState(page): what the page says of its terminals, and whether
//     the launcher and the workspace's server answer it now, for a message;
//   firstShellWait: how long a page may take to show its first terminal.
// A page starts in about a second on a quiet machine (3.3 s of Chromium's
// CPU, its start included); under CI's load (16 runnable on 2 cores) a
// start's share of the CPU is an eighth, so the wait is two minutes: a
// page that hangs still fails, and says why.
export const firstShellWait = 120000;
import { readFileSync } from "node:fs";

const events = [];
const start = Date.now();
const MAX = 400;

const short = (u) => {
  try {
    const url = new URL(u);
    url.searchParams.delete("token");
    return url.pathname + (url.search || "");
  } catch {
    return String(u);
  }
};

function note(page, what) {
  events.push(`${((Date.now() - start) / 1000).toFixed(2)}s ${page.traceName} ${what}`);
  if (events.length > MAX) events.splice(0, events.length - MAX);
}

let pages = 0;

// sockets is each WebSocket's last state, by page and path, for the one
// line a failure's message starts its record with: a run's log may keep
// only the first lines of a message (scripts/testreport), and which
// socket never got a frame says where a page waits.
const sockets = new Map();
const socketState = (page, u, state) => sockets.set(`${page.traceName} ${u}`, `${state} at ${((Date.now() - start) / 1000).toFixed(1)}s`);

function tracePage(page) {
  if (page.traceName) return;
  page.traceName = `page${++pages}`;
  note(page, "opened");
  page.on("framenavigated", (f) => f === page.mainFrame() && note(page, `at ${short(f.url())}`));
  page.on("load", () => note(page, "load"));
  page.on("pageerror", (e) => note(page, `pageerror ${e.message}`));
  page.on("console", (m) => (m.type() === "error" || m.type() === "warning") && !m.text().includes("GL Driver Message") && note(page, `console.${m.type()} ${m.text()}`));
  page.on("requestfailed", (r) => note(page, `request failed ${r.method()} ${short(r.url())}: ${r.failure()?.errorText}`));
  page.on("response", (r) => r.status() >= 400 && note(page, `${r.status()} ${r.request().method()} ${short(r.url())}`));
  page.on("websocket", (ws) => {
    const u = short(ws.url());
    note(page, `ws ${u} connecting`);
    socketState(page, u, "connecting");
    let first = true;
    ws.on("framereceived", () => first && ((first = false), note(page, `ws ${u} first frame`), socketState(page, u, "first frame")));
    ws.on("socketerror", (e) => (note(page, `ws ${u} error ${e}`), socketState(page, u, `error ${e}`)));
    ws.on("close", () => (note(page, `ws ${u} closed`), socketState(page, u, "closed")));
  });
  page.on("crash", () => note(page, "CRASHED"));
  page.on("close", () => note(page, "closed"));
}

export function traceContext(ctx) {
  ctx.pages().forEach(tracePage);
  ctx.on("page", tracePage);
}

// The machine's load goes with the record: a page that was slow on a
// machine running sixteen things at once is not a page that hung.
const load = () => {
  try {
    return `load average ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}`;
  } catch {
    return "";
  }
};

export const traced = () => [
  `${load()}; at ${((Date.now() - start) / 1000).toFixed(1)}s the WebSockets: ${[...sockets].map(([k, v]) => `${k} ${v}`).join("; ") || "none"}`,
  events.length ? `the pages' events (seconds since the script started):\n  ${events.join("\n  ")}` : "no page events",
].join("\n");

export async function shellState(page) {
  const s = await page.evaluate(() => ({
    ready: document.readyState,
    loaded: !!window.cove,
    stopped: document.querySelector("#stopped")?.textContent ?? null,
    status: document.querySelector("#status")?.textContent ?? null,
    shells: window.cove?.shells.map(({ shell: s }) => ({ id: s.id, ws: s.ws?.readyState, retry: s.retry, halted: !!s.halted, exited: s.exited })),
  })).catch((e) => ({ error: e.message }));
  return `${JSON.stringify(s)}; asked now: ${await probe(page)}`;
}

// probe asks, from the page as it would (its fetch, its token), the
// launcher for a file of its own, the launcher for the settings it serves
// itself, and the workspace's server through the launcher's proxy, each
// for up to 5 s: which of them answers says where a page that waits
// waits.
async function probe(page) {
  return page.evaluate(async () => {
    const ask = async (name, path, method = "GET") => {
      const t0 = performance.now();
      try {
        const r = await fetch(path, { method, cache: "no-store", signal: AbortSignal.timeout(5000) });
        return `${name} ${r.status} in ${Math.round(performance.now() - t0)} ms`;
      } catch (e) {
        return `${name} ${e.name === "TimeoutError" ? "no answer" : e.message} after ${Math.round(performance.now() - t0)} ms`;
      }
    };
    return (await Promise.all([
      ask("the launcher", "/favicon.svg", "HEAD"),
      ask("its settings", "/api/settings"),
      ask("the workspace's server", "/api/ports/listening"),
    ])).join(", ");
  }).catch((e) => `(the page did not run it: ${e.message})`);
}
