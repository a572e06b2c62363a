// The user's editor settings, from ~/.config/cove/settings.json on the
// launcher's side (GET /api/settings: {"editor": {"fontSize": N,
// "tabSize": N, "wordWrap": BOOL}, "version": V}), so that a change
// applies to open editors live: the page asks again with ?wait=V, which
// the launcher answers once the settings are no longer V (or after a
// while, unchanged), and when the window comes back.
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
  let version = "";
  async function load(wait = "") {
    const r = await fetch(`/api/settings${wait ? `?wait=${encodeURIComponent(wait)}` : ""}`).catch(() => null);
    if (!r || !r.ok) return false;
    const { editor = {}, error, path, version: v = "" } = await r.json();
    version = v;
    const key = JSON.stringify([editor, error]);
    if (key === last) return true;
    last = key;
    if (error) status(`settings: ${String(error).slice(0, 300)}`);
    current = editor || {};
    apply(current, path);
    return true;
  }
  // follow asks again as soon as each answer comes (the launcher holds
  // it until the settings change); a launcher before ?wait (no version),
  // gone or refusing is asked again after a pause.
  async function follow() {
    for (;;) {
      if (document.body.classList.contains("stopped")) return;
      const ok = await load(version || "-");
      if (!ok || !version) await new Promise((res) => setTimeout(res, 5000));
    }
  }
  load().then(follow);
  addEventListener("focus", () => load());
  return { get: () => current, load: () => load() };
}
