// The IDE's commands: each has a title, what it does, and maybe a key,
// as in VS Code. Keys work wherever the focus is, the terminal included
// (it lets them go: see Shell's passKey), and Ctrl+Shift+P (or F1) lists
// every command, to run one by a few letters of its title.
import { el } from "./dom.js";
import { fuzzyFilter, quickPick } from "./quick.js";

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
    quickPick({
      placeholder: "Type a command", label: "Command", className: "palette", initial,
      items: (text) => {
        const q = text.replace(/^>/, "").trim().toLowerCase();
        return q ? fuzzyFilter(q, this.list, (c) => c.title) : this.list;
      },
      row: (c) => [{ "data-command": c.id }, el("span", { class: "name" }, c.title), c.label ? el("kbd", {}, c.label) : ""],
      pick: (c) => c.run(),
    });
  }
}
