package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHistoryPath(t *testing.T) {
	for _, tc := range []struct{ state, home, want string }{
		{"/s", "/h", "/s/cove/agent_history"},
		{"", "/h", "/h/.local/state/cove/agent_history"},
		{"relative", "/h", "/h/.local/state/cove/agent_history"}, // ignored, as XDG says
		{"", "", ""},
	} {
		env := map[string]string{"XDG_STATE_HOME": tc.state, "HOME": tc.home}
		if got := historyPath(func(k string) string { return env[k] }); got != tc.want {
			t.Errorf("XDG_STATE_HOME=%q HOME=%q: %q, want %q", tc.state, tc.home, got, tc.want)
		}
	}
}

// TestPromptHistoryFile: the file is made 0600 (its directory 0700), keeps
// the last historyMax lines, takes in what another chat added meanwhile,
// and skips blank lines and a line repeated.
func TestPromptHistoryFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "cove", "agent_history")
	h, err := loadHistory(path)
	if err != nil || h.Len() != 0 {
		t.Fatalf("a missing file: %d entries, %v", h.Len(), err)
	}
	for _, l := range []string{"first", "  ", "", "second", "second", "first"} {
		if err := h.add(l); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "first\nsecond\nfirst\n" {
		t.Errorf("file %q", b)
	}
	if h.Len() != 3 || h.At(0) != "first" || h.At(1) != "second" {
		t.Errorf("entries %q", h.entries)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode(), err, want)
		}
	}

	// A long history, left by others (and readable by all): the last
	// historyMax lines are read, and kept when one is added.
	var long []string
	for i := range historyMax + 50 {
		long = append(long, fmt.Sprintf("prompt %d", i))
	}
	os.WriteFile(path, []byte(strings.Join(long, "\n\n")+"\n"), 0o644)
	os.Chmod(path, 0o644)
	h, err = loadHistory(path)
	if err != nil || h.Len() != historyMax || h.At(0) != long[len(long)-1] || h.At(historyMax-1) != long[50] {
		t.Fatalf("loaded %d entries (%v), latest %q", h.Len(), err, h.At(0))
	}
	other, _ := loadHistory(path)
	other.add("from another chat")
	h.add("mine")
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	want := append(slices.Clone(long[52:]), "from another chat", "mine")
	if !slices.Equal(lines, want) {
		t.Errorf("%d lines, ending %q; want %d ending %q", len(lines), lines[len(lines)-3:], len(want), want[len(want)-3:])
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("rewritten as %v", fi.Mode())
	}
}
