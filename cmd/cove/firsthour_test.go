package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
)

// TestNewcomerErrors: a mistyped command, a path that does not exist, a
// file given as a project and a mistyped flag each get one line that says
// what is wrong, last, without a screenful of help above it.
func TestNewcomerErrors(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"upp"}, "cove: unknown command upp (did you mean up?)\n"},
		{[]string{"shel"}, "cove: unknown command shel (did you mean shell?)\n"},
		{[]string{"up", "nowhere"}, "cove: nowhere: no such directory\n"},
		{[]string{"no/such/dir"}, "cove: no/such/dir: no such directory\n"},
		{[]string{"file"}, "cove: file: not a directory (cove works on a project directory)\n"},
		{[]string{"up", "--no-browsr"}, "cove: flag provided but not defined: -no-browsr (cove up --help lists them)\n"},
		{[]string{"--bogus"}, "cove: flag provided but not defined: -bogus (cove --help lists them)\n"},
	} {
		r := cove(t, t.TempDir(), tc.args...)
		if r.code != 1 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("cove %s: status %d, stdout %q, stderr %q; want %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestShellReadsCommandsFromStdin: `echo cmd | cove shell DIR` runs the
// commands as sh -s does (no terminal, no escape codes, the end of input
// ends it, its status is the shell's), and a shell that started the
// workspace says it keeps running.
func TestShellReadsCommandsFromStdin(t *testing.T) {
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root, project := t.TempDir(), t.TempDir()
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspaceName(project)) })
	r := runProc(t, root, "echo piped-$((6*7)) in $PWD\n[ -t 0 ] && echo has-a-terminal\nexit 3\n", "shell", "--image", ref, project)
	if r.code != 3 || r.stdout != "piped-42 in /workspace\n" {
		t.Errorf("echo … | cove shell: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "keeps running (cove stop "+workspaceName(project)) {
		t.Errorf("the shell that started the workspace did not say it keeps running: %q", r.stderr)
	}
	if r := runProc(t, root, "true\n", "shell", project); r.code != 0 || strings.Contains(r.stderr, "keeps running") {
		t.Errorf("a shell in a running workspace: %+v", r)
	}
}
