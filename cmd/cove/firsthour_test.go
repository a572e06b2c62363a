package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
