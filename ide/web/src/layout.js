// The panels around the editor: the side bar (files, search) on the left,
// the agent on the right, the terminals below. Each is resized by
// dragging its edge (or with the arrow keys on it) and hidden and shown
// again (Ctrl+B, Ctrl+Alt+B, Ctrl+J); sizes and what is hidden are
// remembered in localStorage. The editor keeps room to work: in a narrow
// window the side panels shrink to what they need, and the agent's folds
// away until the window is wider or it is asked for.
import { el } from "./dom.js";

const KEY = "cove-layout";
const STATUS = 22; // the status bar's height
// Each panel: its default size, the least it is dragged to, and the
// least it shrinks to when the window is narrow.
const panels = {
  side: { def: 240, min: 120, squeeze: 150 },
  agent: { def: 340, min: 200, squeeze: 220 },
  bottom: { min: 60 },
};
const editorMin = { w: 360, h: 120 };

export function startLayout(app, { onResize = () => {} } = {}) {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(KEY) || "{}") || {};
  } catch {}
  const state = {
    side: saved.side ?? panels.side.def,
    agent: saved.agent ?? panels.agent.def,
    bottom: saved.bottom ?? null, // px; by default 38% of the height
    hidden: { side: false, agent: false, bottom: false, ...saved.hidden },
  };
  const shown = { side: 0, agent: 0, bottom: 0 }; // sizes as laid out
  let folded = false; // the agent's panel folded for want of room (not remembered)

  const save = () => localStorage.setItem(KEY, JSON.stringify(state));
  // keep remembers the sizes as laid out after a resize (what could be,
  // not what was asked; the other panel as it gave way), so that a reload
  // lays out the same.
  const keep = () => {
    for (const p of ["side", "agent", "bottom"]) if (shown[p]) state[p] = shown[p];
    save();
  };

  // apply lays the panels out for the window's size; the panel being
  // dragged (first) gets its size, the other side one gives way.
  function apply(first) {
    const W = app.clientWidth;
    const H = app.clientHeight - STATUS;
    let side = state.hidden.side ? 0 : clamp(state.side, panels.side.min, W * 0.5);
    let agent = state.hidden.agent ? 0 : clamp(state.agent, panels.agent.min, W * 0.6);
    const room = W - Math.min(editorMin.w, W * 0.45);
    if (side + agent > room) {
      const squeeze = (v, p) => Math.min(v, panels[p].squeeze);
      if (first === "side" && agent) {
        agent = Math.max(squeeze(agent, "agent"), room - side);
        side = Math.max(squeeze(side, "side"), Math.min(side, room - agent));
      } else if (first === "agent" && side) {
        side = Math.max(squeeze(side, "side"), room - agent);
        agent = Math.max(squeeze(agent, "agent"), Math.min(agent, room - side));
      } else {
        // Shrink both alike, each down to what it needs.
        const scale = room / (side + agent);
        side = side && Math.max(squeeze(side, "side"), side * scale);
        agent = agent && Math.max(squeeze(agent, "agent"), agent * scale);
      }
    }
    // Still too wide: the agent's folds away.
    folded = agent > 0 && side + agent > room + 0.5;
    if (folded) agent = 0;
    const bottom = state.hidden.bottom ? 0 : clamp(state.bottom ?? H * 0.38, panels.bottom.min, H - editorMin.h);
    Object.assign(shown, { side: Math.round(side), agent: Math.round(agent), bottom: Math.round(bottom) });
    app.style.setProperty("--side", `${shown.side}px`);
    app.style.setProperty("--agent", `${shown.agent}px`);
    app.style.setProperty("--bottom", `${shown.bottom}px`);
    for (const p of ["side", "agent", "bottom"]) app.classList.toggle(`no-${p}`, !shown[p]);
    onResize();
  }

  // A handle on each panel's inner edge.
  const gutter = (panel, dir) => {
    const g = el("div", { class: `gutter gutter-${panel}`, role: "separator", tabindex: "0", "data-panel": panel,
      "aria-orientation": dir === "x" ? "vertical" : "horizontal", title: "Drag to resize; double-click for the default size" });
    app.append(g);
    // Which way the size grows: right for the side bar, left for the
    // agent's, up for the terminals.
    const sign = panel === "side" ? 1 : -1;
    g.addEventListener("pointerdown", (ev) => {
      if (ev.button !== 0) return;
      ev.preventDefault();
      g.setPointerCapture(ev.pointerId);
      const start = dir === "x" ? ev.clientX : ev.clientY;
      const from = shown[panel];
      app.classList.add("resizing");
      const move = (e) => {
        state[panel] = from + sign * ((dir === "x" ? e.clientX : e.clientY) - start);
        apply(panel);
      };
      const up = () => {
        g.removeEventListener("pointermove", move);
        g.removeEventListener("pointerup", up);
        g.removeEventListener("pointercancel", up);
        app.classList.remove("resizing");
        keep();
      };
      g.addEventListener("pointermove", move);
      g.addEventListener("pointerup", up);
      g.addEventListener("pointercancel", up);
    });
    g.addEventListener("dblclick", () => {
      state[panel] = panel === "bottom" ? null : panels[panel].def;
      apply();
      save();
    });
    g.addEventListener("keydown", (ev) => {
      const step = ev.shiftKey ? 50 : 10;
      const d = { ArrowLeft: -step, ArrowRight: step, ArrowUp: -step, ArrowDown: step }[ev.key];
      if (d == null || (dir === "x") !== (ev.key === "ArrowLeft" || ev.key === "ArrowRight")) return;
      ev.preventDefault();
      state[panel] = shown[panel] + (panel === "side" ? d : -d);
      apply(panel);
      keep();
    });
  };
  gutter("side", "x");
  gutter("agent", "x");
  gutter("bottom", "y");
  addEventListener("resize", apply);
  apply();

  return {
    // shown says whether a panel is on screen.
    shown: (panel) => shown[panel] > 0,
    size: (panel) => shown[panel],
    // toggle hides a panel, or shows it (visible: force one way).
    toggle(panel, visible = !(shown[panel] > 0)) {
      state.hidden[panel] = !visible;
      if (visible && panel === "agent" && folded) {
        // Asked for in a narrow window: room is made on the left.
        state.hidden.side = true;
      }
      apply();
      save();
      return visible;
    },
    reset() {
      Object.assign(state, { side: panels.side.def, agent: panels.agent.def, bottom: null, hidden: { side: false, agent: false, bottom: false } });
      apply();
      save();
    },
  };
}

const clamp = (v, lo, hi) => Math.max(lo, Math.min(v, Math.max(lo, hi)));
