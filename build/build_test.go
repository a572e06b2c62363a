package build

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// TestStaleScratchRemoved: what a killed build left (a day old) goes when
// the next build starts; a running build's scratch (recent) stays.
func TestStaleScratchRemoved(t *testing.T) {
	cache := t.TempDir()
	old, recent := filepath.Join(cache, "steps", ".tmp-old"), filepath.Join(cache, ".tmp-recent")
	for _, d := range []string{old, recent} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Now().Add(-25 * time.Hour)
	os.Chtimes(old, day, day)
	b, err := newBuilder(nil, Options{Context: t.TempDir(), CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(b.tmp)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a day-old scratch dir is still there (%v)", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a recent scratch dir was removed: %v", err)
	}
}

// TestHeredocCmdLine: the command the shell gets for RUN heredocs.
func TestHeredocCmdLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		docs [][2]string // name, data
		want string
	}{
		{"lone", []string{"<<EOF"}, [][2]string{{"EOF", "echo a\necho b\n"}}, "echo a\necho b\n"},
		{"fed", []string{"cat > /f <<EOF"}, [][2]string{{"EOF", "x\n"}}, "cat > /f <<EOF\nx\nEOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := shellCmd(tc.in, tc.docs)
			got, all, err := heredocCmdLine(c)
			if err != nil || len(got.CmdLine) != 1 || got.CmdLine[0] != tc.want || len(got.Files) != 0 || all == "" {
				t.Errorf("got %q files %v (%v), want %q", got.CmdLine, got.Files, err, tc.want)
			}
		})
	}
}

func shellCmd(cmd []string, docs [][2]string) instructions.ShellDependantCmdLine {
	c := instructions.ShellDependantCmdLine{CmdLine: cmd, PrependShell: true}
	for _, d := range docs {
		c.Files = append(c.Files, instructions.ShellInlineFile{Name: d[0], Data: d[1]})
	}
	return c
}

// TestHeredocScript: a lone heredoc with #! is a file the shell runs
// (by its #! line), as BuildKit runs it: /bin/sh -c /dev/pipes/EOF.
func TestHeredocScript(t *testing.T) {
	got, all, err := heredocCmdLine(shellCmd([]string{"<<EOF"}, [][2]string{{"EOF", "#!/usr/bin/env python3\nprint(1)\n"}}))
	if err != nil || !got.PrependShell || len(got.CmdLine) != 1 || got.CmdLine[0] != "/dev/pipes/EOF" ||
		len(got.Files) != 1 || got.Files[0].Data != "#!/usr/bin/env python3\nprint(1)\n" || all == "" {
		t.Errorf("got %+v (%v)", got, err)
	}
}
