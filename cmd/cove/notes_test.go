package main

import (
	"os/exec"
	"strings"
	"testing"

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
