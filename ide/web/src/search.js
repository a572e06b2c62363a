// The project's search (Ctrl+Shift+F, as you type; match case, regular
// expressions, replace in files) and quick open (Ctrl+P). Both run on the
// launcher, where git is sure to be, so .gitignore counts.
import { $, el } from "./dom.js";
import { fuzzyFilter, quickPick } from "./quick.js";

// startSearch wires the search box; openFile shows a hit, status says
// what happened, docs are the open files (quick open offers them first).
export function startSearch({ openFile, status, docs, palette }) {
  // The search box's options, and what it found last (for replace).
  const searchOpts = { re: false, case: false };
  let lastSearch = null;

  // replaceAll replaces what the search found with the replace box's text,
  // in every file, after asking; open editors follow the files on disk.
  async function replaceAll() {
    const q = $("#search").value.trim();
    if (!q) return;
    if (!lastSearch || lastSearch.q !== q) await search(q);
    const { matches, more } = lastSearch;
    if (!matches.length) return status("nothing to replace");
    const files = new Set(matches.map((m) => m.path)).size;
    const withText = $("#replace").value;
    if (!confirm(`Replace ${matches.length}${more ? "+" : ""} match${matches.length === 1 ? "" : "es"} in ${files}${more ? "+" : ""} file${files === 1 ? "" : "s"} with "${withText}"?`)) return;
    const r = await fetch("/api/replace", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ q, re: searchOpts.re, case: searchOpts.case, with: withText }) });
    if (!r.ok) return status(`replace: ${await r.text()}`);
    const done = await r.json();
    // Open editors take the new text now: the watcher, coming later,
    // then finds nothing new to say over what the replace says.
    await Promise.all([...new Set(matches.map((m) => m.path))].map(async (p) => {
      const d = docs.get(p);
      if (!d || d.doc.dirty()) return;
      const f = await fetch(`/api/file?path=${encodeURIComponent(p)}`);
      if (f.ok) d.doc.reload(await f.text(), f.headers.get("ETag"));
    }));
    status(`replaced ${done.replacements} in ${done.files} file${done.files === 1 ? "" : "s"}`);
    await search(q);
  }

  // search shows q's matches in place of the tree (the tree comes back
  // when the box is emptied).
  async function search(q) {
    const box = $("#search-results");
    if (!q) {
      box.hidden = true;
      $("#tree").hidden = false;
      return;
    }
    const r = await fetch(`/api/search?q=${encodeURIComponent(q)}${searchOpts.re ? "&re=1" : ""}${searchOpts.case ? "&case=1" : ""}`);
    box.replaceChildren();
    box.hidden = false;
    $("#tree").hidden = true;
    if (!r.ok) return box.append(el("div", { class: "search-note" }, await r.text()));
    const { matches, more } = await r.json();
    lastSearch = { q, matches, more };
    box.append(el("div", { class: "search-note" }, matches.length ? `${matches.length}${more ? "+" : ""} matches` : "no matches"));
    let file = null;
    for (const m of matches) {
      if (m.path !== file) {
        file = m.path;
        box.append(el("div", { class: "search-file", title: m.path }, m.path));
      }
      box.append(el("div", { class: "search-hit", "data-path": m.path, "data-line": m.line, onclick: () => openFile(m.path, m.line, true, m) },
        el("span", { class: "ln" }, String(m.line)), ...hitText(m)));
    }
  }

  // hitText is a hit's line as shown, its match marked: the line without
  // its indentation, the match kept in sight.
  function hitText({ text, col = 0, len = 0 }) {
    const lead = text.length - text.trimStart().length;
    let from = Math.max(0, col - lead);
    const line = text.trim();
    const cut = from > 60 ? from - 20 : 0; // a match far along the line
    from -= cut;
    const shown = (cut ? "…" : "") + line.slice(cut, cut + 200);
    from += cut ? 1 : 0;
    if (!len || from >= shown.length) return [shown];
    return [shown.slice(0, from), el("mark", {}, shown.slice(from, from + len)), shown.slice(from + len)];
  }

  // Quick open (Ctrl+P); ">" first turns it into the command palette.

  let projectFiles = null; // fetched when the box opens
  async function quickOpen() {
    let files = projectFiles || [];
    const picker = quickPick({
      placeholder: "Go to file (type part of its name)", label: "File",
      items: (text) => {
        const q = text.trim().toLowerCase().replace(/\s+/g, "");
        return (q ? fuzzyFilter(q, files, (f) => f) : [...docs.keys(), ...files.filter((f) => !docs.has(f))]).slice(0, 50);
      },
      row: (f) => {
        const name = f.slice(f.lastIndexOf("/") + 1);
        return [{ "data-path": f }, el("span", { class: "name" }, name), el("span", { class: "dir" }, f.slice(0, f.length - name.length))];
      },
      pick: (f, { side }) => openFile(f, 0, true, { side }),
      onInput: (text) => text.startsWith(">") && palette ? (setTimeout(() => palette(text)), true) : false,
    });
    const r = await fetch("/api/files").catch(() => null);
    projectFiles = files = r && r.ok ? (await r.json()).files : files;
    if (!picker.closed) picker.redraw();
  }

  $("#search").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") {
      clearTimeout(searchTimer);
      search(ev.target.value.trim()).catch((e) => status(`search: ${e.message}`));
    }
    if (ev.key === "Escape") {
      ev.target.value = "";
      search("");
    }
  });
  for (const [id, key] of [["#search-case", "case"], ["#search-re", "re"]]) {
    $(id).addEventListener("click", () => {
      searchOpts[key] = !searchOpts[key];
      $(id).setAttribute("aria-pressed", String(searchOpts[key]));
      search($("#search").value.trim()).catch((e) => status(`search: ${e.message}`));
    });
  }
  $("#search-replace").addEventListener("click", () => {
    const row = $("#replace-row");
    row.hidden = !row.hidden;
    $("#search-replace").setAttribute("aria-pressed", String(!row.hidden));
    if (!row.hidden) $("#replace").focus();
  });
  $("#replace-all").addEventListener("click", () => replaceAll().catch((e) => status(`replace: ${e.message}`)));
  $("#replace").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter") replaceAll().catch((e) => status(`replace: ${e.message}`));
  });
  // Search as you type, once typing pauses; Enter searches at once.
  let searchTimer;
  $("#search").addEventListener("input", (ev) => {
    clearTimeout(searchTimer);
    const q = ev.target.value.trim();
    searchTimer = setTimeout(() => search(q).catch((e) => status(`search: ${e.message}`)), q.length < 3 ? 600 : 250);
  });
  return {
    quickOpen,
    focus() {
      $("#search").focus();
      $("#search").select();
    },
  };
}
