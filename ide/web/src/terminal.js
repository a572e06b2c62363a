import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { WebLinksAddon } from "@xterm/addon-web-links";
import { SearchAddon } from "@xterm/addon-search";
import { Unicode11Addon } from "@xterm/addon-unicode11";
import { OP } from "./protocol.js";

const enc = new TextEncoder();
const ACK_EVERY = 32 * 1024;

// Shell is one terminal tab: a PTY in the workspace that outlives this
// page; after a reload or a dropped connection it replays what was missed.
export class Shell {
  constructor(host, { id = null, theme, onTitle, onExit, passKey = () => false } = {}) {
    this.passKey = passKey;
    this.id = id;
    this.shown = 0; // output offset written to the screen
    this.acked = 0;
    this.exited = false;
    this.onExit = onExit || (() => {});
    this.term = new Terminal({
      fontFamily: '"JetBrains Mono", "Fira Code", ui-monospace, Menlo, Consolas, monospace',
      fontSize: 13,
      // A steady cursor, as VS Code's terminal has by default: a blinking
      // one is drawn again twice a second for as long as the window is
      // open (an idle page's largest cost after the polls were gone).
      cursorBlink: false,
      allowProposedApi: true,
      scrollback: 10000,
      theme,
    });
    this.fit = new FitAddon();
    this.search = new SearchAddon();
    this.term.loadAddon(this.fit);
    this.term.loadAddon(this.search);
    this.term.loadAddon(new WebLinksAddon());
    this.term.loadAddon(new Unicode11Addon());
    this.term.unicode.activeVersion = "11";
    this.term.open(host);
    // The GPU renderer comes once the page is up: making a WebGL context
    // and its glyph atlas is the slowest part of opening a terminal, and
    // the DOM renderer shows the first prompt meanwhile.
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 50));
    idle(() => import("@xterm/addon-webgl").then(({ WebglAddon }) => {
      try {
        const gl = new WebglAddon();
        gl.onContextLoss(() => gl.dispose());
        this.term.loadAddon(gl);
      } catch {
        // no WebGL: xterm's DOM renderer does the work
      }
    }).catch(() => {}), { timeout: 1000 }); // not loaded (the launcher went): the same
    this.findBar(host);
    this.term.onTitleChange((t) => onTitle && onTitle(t));
    this.term.onData((d) => this.send(OP.input, enc.encode(d)));
    this.term.onResize(({ cols, rows }) => this.send(OP.resize, enc.encode(JSON.stringify({ cols, rows }))));
    new ResizeObserver(() => this.resize()).observe(host);
    this.connect();
  }

  // findBar is Ctrl+F in the terminal, as in VS Code: a box over the
  // top right; Enter finds the next match up the scrollback, Shift+Enter
  // the one below, Escape closes it and gives the keys back to the shell.
  findBar(host) {
    const box = document.createElement("input");
    box.className = "term-find";
    box.type = "search";
    box.placeholder = "Find (Enter: previous, Shift+Enter: next)";
    box.hidden = true;
    host.append(box);
    this.term.attachCustomKeyEventHandler((ev) => {
      // The IDE's keys (Ctrl+P, Ctrl+B, Ctrl+Shift+`…) are not the
      // shell's: xterm lets them go up to the page.
      if (this.passKey(ev)) return false;
      if (ev.type === "keydown" && (ev.ctrlKey || ev.metaKey) && !ev.shiftKey && ev.key === "f") {
        ev.preventDefault();
        box.hidden = false;
        box.focus();
        box.select();
        return false;
      }
      return true;
    });
    box.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        const found = ev.shiftKey ? this.search.findNext(box.value) : this.search.findPrevious(box.value);
        box.classList.toggle("none", !found);
      } else if (ev.key === "Escape") {
        box.hidden = true;
        this.search.clearDecorations();
        this.term.clearSelection();
        this.term.focus();
      }
    });
  }

  resize() {
    try {
      this.fit.fit();
    } catch {}
  }

  connect() {
    if (this.halted) return;
    const path = this.id ? `${this.id}?offset=${this.shown}` : "new";
    const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/term/${path}`);
    ws.binaryType = "arraybuffer";
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 0;
      this.resize();
      const { cols, rows } = this.term;
      this.send(OP.resize, enc.encode(JSON.stringify({ cols, rows })));
    };
    ws.onmessage = (ev) => this.frame(new Uint8Array(ev.data));
    ws.onclose = (ev) => {
      if (this.exited || this.closed || this.halted) return;
      if (ev.code === 4404) {
        // The workspace no longer has that shell (it restarted): a new one.
        this.term.write("\r\n\x1b[2m[that shell is gone (the workspace restarted); here is a new one]\x1b[0m\r\n");
        this.id = null;
        this.shown = this.acked = 0;
        this.connect();
        return;
      }
      // The shell lives on in the workspace: come back for the rest.
      const wait = Math.min(5000, 250 * 2 ** (this.retry++ || 0));
      setTimeout(() => this.connect(), wait);
    };
  }

  frame(b) {
    const payload = b.subarray(1);
    switch (b[0]) {
      case OP.hello:
        this.id = JSON.parse(new TextDecoder().decode(payload)).id;
        break;
      case OP.output: {
        const off = Number(new DataView(payload.buffer, payload.byteOffset, 8).getBigUint64(0));
        let data = payload.subarray(8);
        if (off + data.length <= this.shown) return; // already on screen
        if (off < this.shown) data = data.subarray(this.shown - off);
        const end = Math.max(off, this.shown) + data.length;
        this.term.write(data, () => {
          this.shown = end;
          if (this.shown - this.acked >= ACK_EVERY) this.ack();
        });
        // Keep a trickle of acks flowing even for small outputs.
        clearTimeout(this.ackTimer);
        this.ackTimer = setTimeout(() => this.ack(), 50);
        break;
      }
      case OP.exit: {
        this.exited = true;
        const { code } = JSON.parse(new TextDecoder().decode(payload));
        this.term.write(`\r\n\x1b[2m[the shell exited with status ${code}; press Enter for a new one]\x1b[0m\r\n`);
        const sub = this.term.onData((d) => {
          if (d === "\r") {
            sub.dispose();
            this.restart();
          }
        });
        this.onExit(code);
        break;
      }
    }
  }

  ack() {
    if (this.shown === this.acked) return;
    const b = new Uint8Array(9);
    b[0] = OP.ack;
    new DataView(b.buffer).setBigUint64(1, BigInt(this.shown));
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(b);
      this.acked = this.shown;
    }
  }

  restart() {
    this.id = null;
    this.shown = this.acked = 0;
    this.exited = false;
    this.term.reset();
    this.connect();
  }

  send(op, data) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || this.exited) return;
    const b = new Uint8Array(1 + data.length);
    b[0] = op;
    b.set(data, 1);
    this.ws.send(b);
  }

  focus() {
    this.term.focus();
  }

  // halt is for a workspace that stopped: no more reconnecting, and no
  // keys taken that would go nowhere; what is on the screen stays.
  halt(why) {
    if (this.halted) return;
    this.halted = true;
    clearTimeout(this.ackTimer);
    if (this.ws) this.ws.close();
    this.term.options.disableStdin = true;
    this.term.options.cursorBlink = false;
    this.term.write(`\r\n\x1b[2m[the workspace stopped: ${why}]\x1b[0m\r\n`);
  }

  dispose() {
    this.closed = true;
    if (this.ws) this.ws.close();
    this.term.dispose();
  }
}
