package task

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
)

// TestProjectTarTakesOnlyWhatIsInside: the carry of a project's .git
// reads its regular files and directories only: a symlink to a host file
// or directory (the project is a workspace's to write) is left out, not
// followed; a FIFO is left out without blocking the carry.
func TestProjectTarTakesOnlyWhatIsInside(t *testing.T) {
	t.Parallel()
	project, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600)
	for _, d := range []string{".git/objects/ab", ".git/refs/heads", ".git/hooks"} {
		os.MkdirAll(filepath.Join(project, d), 0o755)
	}
	files := map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": "0123\n", ".git/objects/ab/cdef": "object", ".git/hooks/post-checkout": "#!/bin/sh\n"}
	for name, content := range files {
		os.WriteFile(filepath.Join(project, name), []byte(content), 0o644)
	}
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(project, ".git/refs/heads/evil"))
	os.Symlink(outside, filepath.Join(project, ".git/objects/out"))
	os.Symlink(outside, filepath.Join(project, ".git/packed-refs"))
	if err := syscall.Mkfifo(filepath.Join(project, ".git/objects/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := projectfs.Open(project)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var b bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- projectTar(d, &b, historyPaths, ".git") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the carry blocked (on the FIFO?)")
	}
	got := map[string]string{}
	tr := tar.NewReader(&b)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(body)
	}
	want := map[string]string{".git/HEAD": files[".git/HEAD"], ".git/refs/": "", ".git/refs/heads/": "", ".git/refs/heads/main": "0123\n",
		".git/objects/": "", ".git/objects/ab/": "", ".git/objects/ab/cdef": "object"}
	if len(got) != len(want) {
		t.Errorf("carried %q, want %q", keys(got), keys(want))
	}
	for name, body := range want {
		if got[name] != body {
			t.Errorf("%s: %q, want %q", name, got[name], body)
		}
	}
	for name, body := range got {
		if strings.Contains(body, "secret") || strings.Contains(name, "hooks") {
			t.Errorf("carried %s: %q", name, body)
		}
	}
}

// TestCreateForCopyNeedsItsOwnGitDir: a worktree's .git file (or none)
// is said, and nothing is made.
func TestCreateForCopyNeedsItsOwnGitDir(t *testing.T) {
	t.Parallel()
	m := &Manager{Project: t.TempDir(), Data: t.TempDir()}
	os.WriteFile(filepath.Join(m.Project, ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	if _, err := m.CreateForCopy("t1", "p"); err == nil || !strings.Contains(err.Error(), "a git repository of its own") {
		t.Errorf("CreateForCopy with a .git file: %v", err)
	}
	if ents, _ := os.ReadDir(m.Data); len(ents) != 0 {
		t.Errorf("a refused task left %d entries", len(ents))
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLastCommitLineOutlastsWarnings: a cluster's exec brings stderr and
// stdout apart, so git's warning may come after the commit the script
// printed last (as it did in CI); the commit is still the one read.
func TestLastCommitLineOutlastsWarnings(t *testing.T) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	for out, want := range map[string]string{
		c + "\n": c,
		"warning: templates not found in /x\n" + c:   c,
		c + "\nwarning: templates not found in /x\n": c,
		"warning: templates not found in /x\n":       "",
		"":                                           "",
		"  " + c + "  \r\n":                          c,
		c + "0\n":                                    "",
	} {
		if got := lastCommitLine([]byte(out)); got != want {
			t.Errorf("lastCommitLine(%q) = %q, want %q", out, got, want)
		}
	}
}
