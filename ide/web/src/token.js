// The launch's token (see ide/proxy.go). cove opens the page at
// /?token=…; the page keeps the token in sessionStorage, which is this
// origin's (scheme, host and port) and this window's (a popup it opens and
// a duplicated tab get a copy, a new window does not), takes it out of the
// address, and sends it with every request to its own origin: in the
// X-Cove-Token header on fetch, as the subprotocol cove-token.TOKEN on a
// WebSocket (a browser cannot add a header to one). It is never a cookie:
// a browser sends cookies to every port of this host, and a page the
// workspace serves on one of them would be sent it. Imported first by
// main.js, so every module's fetch and WebSocket go through it.
import { el } from "./dom.js";

const KEY = "cove-token";
const params = new URLSearchParams(location.search);
if (params.has("token")) {
  sessionStorage.setItem(KEY, params.get("token"));
  params.delete("token");
  history.replaceState(null, "", location.pathname + (params.size ? `?${params}` : "") + location.hash);
}

/** The token this window holds, or "" when it was opened without one. */
export const token = sessionStorage.getItem(KEY) || "";

const own = (url) => {
  try {
    return new URL(url, location.href).host === location.host;
  } catch {
    return false;
  }
};

// Chromium fails every request in flight when this machine's network
// changes (ERR_NETWORK_CHANGED: a laptop joining another Wi-Fi, a VPN
// coming up, a program adding an interface), to 127.0.0.1 too. A read
// that failed so is asked again, twice at most; a write is not (it may
// have been done), its caller says that it failed.
const readAgain = [250, 1000];

if (token) {
  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init = {}) => {
    const url = input instanceof Request ? input.url : String(input);
    if (!own(url)) return realFetch(input, init);
    const headers = new Headers(init.headers || (input instanceof Request ? input.headers : undefined));
    headers.set("X-Cove-Token", token);
    const method = (init.method || (input instanceof Request ? input.method : "GET")).toUpperCase();
    for (let i = 0; ; i++) {
      try {
        return await realFetch(input, { ...init, headers });
      } catch (e) {
        // A TypeError is the network's failure; an abort is the caller's.
        if ((method !== "GET" && method !== "HEAD") || i >= readAgain.length || !(e instanceof TypeError) || init.signal?.aborted) throw e;
        await new Promise((r) => setTimeout(r, readAgain[i]));
      }
    }
  };
  const RealWebSocket = window.WebSocket;
  window.WebSocket = class extends RealWebSocket {
    constructor(url, protocols) {
      if (own(url) && protocols === undefined) protocols = ["cove", `cove-token.${token}`];
      super(url, protocols);
    }
  };
} else {
  // Opened without its token (an address typed or bookmarked, a new
  // window): nothing of the workspace would answer, so the page says what
  // to do, plainly, and starts nothing (this module's error stops
  // main.js). A module runs once the document is parsed: the body is
  // there.
  document.body.replaceChildren(el("div", { id: "no-token", role: "alert" },
    el("h1", {}, "This window needs the workspace's token"),
    el("p", {}, "Open the URL that cove printed (", el("code", {}, `${location.origin}/?token=…`),
      ") or use the window cove opened; ", el("code", {}, "cove up"), " in the project opens a new one."),
  ));
  throw new Error("cove: this page was opened without its token: open the URL cove printed");
}
