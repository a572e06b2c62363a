// The status bar's right side: the git branch, the cursor's line and
// column, the file's language. The branch is read from .git/HEAD through
// the workspace's file API (no git runs anywhere for it); what the file
// says is the workspace's, shown as text and cut short.
import { $ } from "./dom.js";
import { languageName } from "./editor.js";

// branchOf reads a HEAD file: a branch's name, a detached commit's short
// id, or null for what is neither.
export function branchOf(head) {
  const s = head.trim();
  let m = /^ref: refs\/heads\/(\S+)$/.exec(s);
  if (m) return { name: m[1].slice(0, 80) };
  m = /^ref: (\S+)$/.exec(s);
  if (m) return { name: m[1].slice(0, 80) };
  if (/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(s)) return { name: s.slice(0, 7), detached: true };
  return null;
}

// headFile reads the project's HEAD: in .git, or where a .git file points
// (a worktree's, a submodule's) when that is inside the project.
async function headFile() {
  const r = await fetch("/api/file?path=.git/HEAD");
  if (r.ok) return r.text();
  const link = await fetch("/api/file?path=.git");
  if (!link.ok) return null;
  const m = /^gitdir: (.+)$/m.exec((await link.text()).slice(0, 4096));
  if (!m || m[1].startsWith("/")) return null;
  const parts = [];
  for (const p of m[1].trim().split("/")) {
    if (p === "..") {
      if (!parts.length) return null; // out of the project
      parts.pop();
    } else if (p && p !== ".") parts.push(p);
  }
  const h = await fetch(`/api/file?path=${encodeURIComponent([...parts, "HEAD"].join("/"))}`);
  return h.ok ? h.text() : null;
}

export function startStatusBar() {
  const branch = $("#st-branch");
  const pos = $("#st-pos");
  const lang = $("#st-lang");

  async function refreshBranch() {
    const head = await headFile().catch(() => null);
    const b = head == null ? null : branchOf(head.slice(0, 4096));
    branch.hidden = !b;
    if (!b) return;
    branch.textContent = b.detached ? `⎇ ${b.name} (detached)` : `⎇ ${b.name}`;
    branch.title = b.detached ? `HEAD is at ${b.name}, no branch` : `on branch ${b.name}`;
  }
  // A checkout in a terminal changes it: the server's watch says so (a
  // "repo" change; main.js calls refreshBranch), and the bar looks again
  // when the window comes back to the front and every 30 s in case a
  // change went unseen.
  refreshBranch();
  setInterval(() => document.visibilityState === "visible" && !document.body.classList.contains("stopped") && refreshBranch(), 30000);
  addEventListener("focus", refreshBranch);

  return {
    refreshBranch,
    // doc shows the open file's cursor and language (none: nothing open).
    doc(doc) {
      pos.hidden = lang.hidden = !doc;
      if (!doc) return;
      const { line, col } = doc.cursor();
      pos.textContent = `Ln ${line}, Col ${col}`;
      lang.textContent = languageName(doc.path);
    },
  };
}
