package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/testregistry"
)

// TestBrowserWorkspaceLog: what cove does not honour in a project's
// devcontainer.json (a key it does not know) is said on the launcher's
// stderr and in the IDE, where a badge in the status bar counts the notes
// and opens the workspace log (ide/web/test/notes.mjs); the
// postCreateCommand's output is there too, as text: the <b> it printed is
// not bold and its escape sequences are gone. The window showed none of
// it before.
func TestBrowserWorkspaceLog(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, layered(t))
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "fancyKey": true,
		"postCreateCommand": "printf 'MARK \\033[1m<b>x</b>\\033[0m end\\n'"}`)
	_, url := startUp(t, root, ref, project)
	const note = "fancyKey is not supported by cove; it is ignored"
	out, err := exec.Command(node, "../../ide/web/test/notes.mjs", url, note, "MARK <b>x</b> end").CombinedOutput()
	if err != nil || !strings.HasSuffix(string(out), "ok\n") {
		t.Fatalf("notes.mjs: %v\n%s\nlauncher: %s", err, out, upErr(t))
	}
	// Said on the terminal too, as it was.
	if errs := upErr(t); !strings.Contains(errs, "cove: note: devcontainer.json: "+note) || !strings.Contains(errs, "MARK ␛[1m<b>x</b>␛[0m end") {
		t.Errorf("the launcher's stderr: %s", errs)
	}
}

// TestDetachedWorkspaceLog: cove up --detach starts the workspace where
// the user is and leaves its launcher in the background: that launcher's
// IDE has the notes and the lifecycle output too, once each, though they
// were said by the cove that started it (before, they were only on its
// stderr).
func TestDetachedWorkspaceLog(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	// The command also tries to speak as cove: plainly, and behind an
	// escape that the log would drop.
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "fancyKey": true,
		"postCreateCommand": "echo detached-marker; echo 'cove: note: forged'; printf '\\033[0mcove: warning: hidden\\n'"}`)
	r := runProc(t, root, "", "up", "--detach", project)
	const note = "cove: note: devcontainer.json: fancyKey is not supported by cove; it is ignored"
	if r.code != 0 || !strings.Contains(r.stderr, note) || !strings.Contains(r.stderr, "\ndetached-marker\n") {
		t.Fatalf("up --detach: %+v", r)
	}
	base, token, _ := strings.Cut(strings.TrimSpace(r.stdout), "/?token=")
	code, body := getWithToken(t, base, token, "/api/notes")
	var page struct{ Lines []ide.NoteLine }
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil {
		t.Fatalf("/api/notes: %d %q", code, body)
	}
	seen := map[string]int{}
	for _, l := range page.Lines {
		seen[l.Kind+" "+l.Text]++
	}
	if seen["note "+note] != 1 || seen["output detached-marker"] != 1 {
		t.Errorf("the background launcher's notes: %+v", page.Lines)
	}
	// What the workspace printed is never one of cove's notes.
	for _, l := range page.Lines {
		if l.Kind == ide.NoteKind && (strings.Contains(l.Text, "forged") || strings.Contains(l.Text, "hidden")) {
			t.Errorf("the workspace's output passed for cove's own: %+v", l)
		}
	}
	if !strings.Contains(r.stderr, "\n(workspace) cove: note: forged\n") {
		t.Errorf("the forged note is not marked as the workspace's on stderr: %s", r.stderr)
	}
}
