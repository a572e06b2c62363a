// The Outline: the symbols of the file in front, as its language server
// in the workspace gives them (textDocument/documentSymbol), nested as
// they are in the code; a click puts the cursor on the symbol's name.
// Shown only for a file that has a language server. What a server names
// is shown as text, cut short (languages.js cleans it).
import { el } from "./dom.js";

// Letters for LSP's SymbolKind, as VS Code's icons mean them.
const kinds = {
  2: ["module", "M"], 3: ["namespace", "N"], 4: ["package", "P"], 5: ["class", "C"], 6: ["method", "m"], 7: ["property", "p"], 8: ["field", "f"],
  9: ["constructor", "c"], 10: ["enum", "E"], 11: ["interface", "I"], 12: ["function", "ƒ"], 13: ["variable", "v"], 14: ["constant", "K"],
  22: ["enum member", "e"], 23: ["struct", "S"], 26: ["type parameter", "T"],
};

// startOutline fills box (in section) with the symbols of current()'s
// file ({doc} or null), from languages.symbols.
export function startOutline({ section, box, languages, current }) {
  let seq = 0;
  let timer = null;
  async function refresh(retry = 0) {
    clearTimeout(timer);
    const my = ++seq;
    const d = current();
    if (!d?.doc.lspClient) return void (section.hidden = true);
    section.hidden = false;
    let failed = null;
    const list = await languages.symbols(d.doc).catch((e) => ((failed = e), null));
    if (my !== seq) return; // another file came to the front meanwhile
    box.dataset.path = d.doc.path;
    // A server still loading the project refuses: asked again, less
    // and less often.
    if (failed && retry < 8) timer = setTimeout(() => refresh(retry + 1), Math.min(10000, 500 * 2 ** retry));
    if (!list?.length) {
      const why = failed ? `No outline yet: ${String(failed.message ?? failed).slice(0, 200)}` : list ? "No symbols in this file." : "The language server gives no outline.";
      return box.replaceChildren(el("p", { class: "empty" }, why));
    }
    box.replaceChildren(...list.map((s) => {
      const [kind, letter] = kinds[s.kind] || ["symbol", "·"];
      return el("button", { class: "outline-item", style: `padding-left:${4 + Math.min(s.depth, 20) * 12}px`, title: `${kind} ${s.name}${s.detail ? `: ${s.detail}` : ""} (line ${s.line})`,
        "data-line": String(s.line), "data-depth": String(s.depth), onclick: () => d.doc.goto(s.line, s.col, s.name.length) },
      el("span", { class: `outline-kind k-${s.kind}` }, letter), s.name);
    }));
  }
  return {
    refresh,
    // changed redraws a little after the text stops changing.
    changed: () => (clearTimeout(timer), (timer = setTimeout(() => refresh(), 500))),
  };
}
