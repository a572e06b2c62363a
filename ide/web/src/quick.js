// The quick pick that Ctrl+P (files) and Ctrl+Shift+P (commands) open: a
// box above a list, filtered as you type; arrows choose, Enter picks,
// Escape (or a click elsewhere) closes it and gives the focus back.
import { el } from "./dom.js";

// fuzzyScore rates how well query (lower case) matches text: its letters
// in order, better when they run together, start words, or fall in the
// last part (a file's name); -1 if they are not all there.
export function fuzzyScore(query, text) {
  const p = text.toLowerCase();
  const base = p.lastIndexOf("/") + 1;
  let score = 0;
  let at = -1;
  for (const ch of query) {
    const i = p.indexOf(ch, at + 1);
    if (i < 0) return -1;
    score += i === at + 1 ? 5 : 1; // a run
    if (i === 0 || "/._- :".includes(p[i - 1])) score += 3; // a word's start
    if (i >= base) score += 2; // in the name
    at = i;
  }
  return score - p.length / 100; // shorter first among equals
}

// fuzzyFilter ranks items by how well query matches text(item), best
// first, leaving out those it does not match.
export function fuzzyFilter(query, items, text) {
  return items.map((it) => [fuzzyScore(query, text(it)), it]).filter(([s]) => s >= 0).sort((a, b) => b[0] - a[0]).map(([, it]) => it);
}

// quickPick opens the picker. items(query) gives what to list for the
// box's text; row(item) gives an item's attributes and children; pick
// runs on the chosen one once the picker is closed. onInput may take the
// text over (return true), as ">" in quick open turns it into the
// palette. It returns the box, for a caller that fills items later.
export function quickPick({ placeholder, label, className = "", initial = "", items, row, pick, onInput }) {
  document.getElementById("quick")?.remove();
  const back = document.activeElement;
  const box = el("input", { type: "text", placeholder, spellcheck: "false", "aria-label": label });
  box.value = initial;
  const list = el("div", { class: "quick-list", role: "listbox" });
  const quick = el("div", { id: "quick", class: className }, box, list);
  document.body.append(quick);
  box.focus();
  let shown = [];
  let sel = 0;
  let done = false;
  const close = (refocus) => {
    if (done) return;
    done = true;
    quick.remove();
    if (refocus && back && back.isConnected) back.focus();
  };
  // Ctrl+Enter (a file: opened to the side) is told to pick.
  const choose = (it, ev) => (close(true), pick(it, { side: !!(ev?.ctrlKey || ev?.metaKey) }));
  const draw = () => {
    shown = items(box.value);
    sel = Math.min(sel, Math.max(0, shown.length - 1));
    list.replaceChildren(...shown.map((it, i) => {
      const [attrs, ...children] = row(it);
      return el("div", { ...attrs, class: `quick-item${i === sel ? " selected" : ""}`, role: "option",
        onmousedown: (ev) => (ev.preventDefault(), choose(it, ev)) }, ...children);
    }));
    list.querySelector(".selected")?.scrollIntoView({ block: "nearest" });
  };
  box.addEventListener("input", () => {
    if (onInput?.(box.value)) return close(false);
    sel = 0;
    draw();
  });
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      sel = (sel + (ev.key === "ArrowDown" ? 1 : -1) + shown.length) % Math.max(1, shown.length);
      draw();
    } else if (ev.key === "Enter") {
      ev.preventDefault();
      if (shown[sel]) choose(shown[sel], ev);
    } else if (ev.key === "Escape") {
      ev.stopPropagation();
      close(true);
    }
  });
  box.addEventListener("blur", () => setTimeout(() => close(false), 100));
  draw();
  return { redraw: draw, get closed() { return done; } };
}
