// The IDE's commands: each has a title, what it does, and maybe a key,
// as in VS Code. Keys work wherever the focus is, the terminal included
// (it lets them go: see Shell's passKey), and Ctrl+Shift+P (or F1) lists
// every command, to run one by a few letters of its title.
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

// parseKey reads "Ctrl+Shift+`" into what keydown events say.
function parseKey(spec) {
  const parts = spec.split("+");
  const key = parts.pop() || "+";
  return { ctrl: parts.includes("Ctrl"), shift: parts.includes("Shift"), alt: parts.includes("Alt"), key };
}

// keyMatches says whether ev is the key k (parsed). Letters go by what
// the key types (the layout's letter); the backquote by where it is:
// with Shift held it types "~" (a US layout) or something else, so it is
// known by its code.
function keyMatches(k, ev) {
  if ((ev.ctrlKey || ev.metaKey) !== k.ctrl || ev.shiftKey !== k.shift || ev.altKey !== k.alt) return false;
  if (k.key === "`") return ev.code === "Backquote";
  if (/^[A-Z]$/.test(k.key)) return /^[a-z]$/i.test(ev.key) ? ev.key.toUpperCase() === k.key : ev.code === `Key${k.key}`;
  return ev.key === k.key;
}

export class Commands {
  constructor() {
    this.list = [];
  }

  // add registers a command. key: "Ctrl+Shift+P"; keys: more than one;
  // inTerminal false leaves the key to the terminal's program when the
  // terminal has the focus (Alt+N is readline's, Ctrl+S saves only from
  // the editor).
  add(id, title, run, { key, keys = key ? [key] : [], inTerminal = true } = {}) {
    this.list.push({ id, title, run, keys: keys.map(parseKey), label: keys[0] || "", inTerminal });
    return this;
  }

  get(id) {
    return this.list.find((c) => c.id === id);
  }

  run(id) {
    return this.get(id).run();
  }

  match(ev) {
    if (ev.type !== "keydown") return null;
    return this.list.find((c) => c.keys.some((k) => keyMatches(k, ev))) || null;
  }

  // passKey says whether the terminal should let ev go to the page: a key
  // of a command it does not keep for its program.
  passKey(ev) {
    const c = this.match(ev);
    return !!c && c.inTerminal;
  }

  // handle runs the command ev is the key of, if any (from the document's
  // keydown listener).
  handle(ev) {
    if (ev.defaultPrevented) return false;
    const c = this.match(ev);
    if (!c) return false;
    if (!c.inTerminal && ev.target.closest?.(".xterm")) return false;
    ev.preventDefault();
    c.run();
    return true;
  }

  // palette opens the command palette: type to filter, arrows to choose,
  // Enter runs, Escape goes back to where the focus was.
  palette(initial = "") {
    document.getElementById("quick")?.remove();
    const back = document.activeElement;
    const box = el("input", { type: "text", placeholder: "Type a command", spellcheck: "false", "aria-label": "Command" });
    box.value = initial;
    const list = el("div", { class: "quick-list", role: "listbox" });
    const quick = el("div", { id: "quick", class: "palette" }, box, list);
    document.body.append(quick);
    box.focus();
    let shown = [];
    let sel = 0;
    const draw = () => {
      const q = box.value.replace(/^>/, "").trim().toLowerCase();
      shown = q
        ? this.list.map((c) => [fuzzyScore(q, c.title), c]).filter(([s]) => s >= 0).sort((a, b) => b[0] - a[0]).map(([, c]) => c)
        : this.list;
      sel = Math.min(sel, Math.max(0, shown.length - 1));
      list.replaceChildren(...shown.map((c, i) => el("div", { class: `quick-item${i === sel ? " selected" : ""}`, "data-command": c.id, role: "option",
        onmousedown: (ev) => (ev.preventDefault(), pick(c)) }, el("span", { class: "name" }, c.title), c.label ? el("kbd", {}, c.label) : "")));
      list.querySelector(".selected")?.scrollIntoView({ block: "nearest" });
    };
    let done = false;
    const close = (refocus) => {
      if (done) return;
      done = true;
      quick.remove();
      if (refocus && back && back.isConnected) back.focus();
    };
    const pick = (c) => {
      close(true);
      c.run();
    };
    box.addEventListener("input", () => ((sel = 0), draw()));
    box.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
        ev.preventDefault();
        sel = (sel + (ev.key === "ArrowDown" ? 1 : -1) + shown.length) % Math.max(1, shown.length);
        draw();
      } else if (ev.key === "Enter") {
        ev.preventDefault();
        if (shown[sel]) pick(shown[sel]);
      } else if (ev.key === "Escape") {
        ev.stopPropagation();
        close(true);
      }
    });
    box.addEventListener("blur", () => setTimeout(() => close(false), 100));
    draw();
  }
}
