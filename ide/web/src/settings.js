// The user's editor settings, from ~/.config/cove/settings.json on the
// launcher's side (GET /api/settings: {"editor": {"fontSize": N,
// "tabSize": N, "wordWrap": BOOL}}), asked for again now and then and
// when the window comes back, so that a change applies to open editors
// live.
import { EditorView } from "@codemirror/view";
import { EditorState } from "@codemirror/state";

// extensionOf is what settings s make of an editor.
export function extensionOf(s = {}) {
  const ext = [];
  if (s.fontSize) ext.push(EditorView.theme({ "&": { fontSize: `${s.fontSize}px` } }));
  if (s.tabSize) ext.push(EditorState.tabSize.of(s.tabSize));
  if (s.wordWrap) ext.push(EditorView.lineWrapping);
  return ext;
}

// startSettings calls apply(settings) with the editor's settings when
// they are first read and each time they change; status hears of a
// settings file cove cannot take.
export function startSettings({ apply, status }) {
  let last = null;
  let current = {};
  async function load() {
    const r = await fetch("/api/settings").catch(() => null);
    if (!r || !r.ok) return;
    const { editor = {}, error, path } = await r.json();
    const key = JSON.stringify([editor, error]);
    if (key === last) return;
    last = key;
    if (error) status(`settings: ${String(error).slice(0, 300)}`);
    current = editor || {};
    apply(current, path);
  }
  load();
  addEventListener("focus", load);
  setInterval(() => document.visibilityState === "visible" && !document.body.classList.contains("stopped") && load(), 2000);
  return { get: () => current, load };
}
