package workspace

import (
	"strings"
	"testing"

	"github.com/cove-sh/cove/workspace/filesync"
)

// TestSyncNotesSayUnreadable: a path a side cannot read is said with why,
// that it is left alone, and the command that makes it readable, on this
// machine's path or the Pod's, quoted for the shell when it needs it.
func TestSyncNotesSayUnreadable(t *testing.T) {
	var b strings.Builder
	SyncNotes(&b, "/home/u/proj", filesync.Report{
		UnreadableLocal:  []filesync.Unreadable{{Path: "keep/sub", Dir: true, Why: "permission denied"}, {Path: "my notes.txt", Why: "permission denied"}},
		UnreadableRemote: []filesync.Unreadable{{Path: "out", Dir: true, Why: "input/output error"}},
	}, nil)
	want := "cove: keep/sub cannot be read here (permission denied): it is left as it is on both sides, not synchronised, until it can be; make it readable: chmod -R u+rX /home/u/proj/keep/sub\n" +
		"cove: my notes.txt cannot be read here (permission denied): it is left as it is on both sides, not synchronised, until it can be; make it readable: chmod u+r '/home/u/proj/my notes.txt'\n" +
		"cove: out cannot be read in the workspace (input/output error): it is left as it is on both sides, not synchronised, until it can be; make it readable there: chmod -R u+rX /workspace/out\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
