package task

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tarOf(t *testing.T, entries ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range entries {
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(h.Name))
		}
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			body := []byte(h.Name)
			if int64(len(body)) < h.Size {
				body = append(body, make([]byte, h.Size-int64(len(body)))...)
			}
			tw.Write(body[:h.Size])
		}
	}
	tw.Close()
	return b.Bytes()
}

// TestExtractConfigTakesOnlyTheConfig: the project's workspace made the
// archive; only .devcontainer's plain files and directories come out of
// it, and anything else in it is refused with nothing written outside.
func TestExtractConfigTakesOnlyTheConfig(t *testing.T) {
	t.Parallel()
	tree := t.TempDir()
	ok := tarOf(t,
		&tar.Header{Name: ".devcontainer/", Typeflag: tar.TypeDir, Mode: 0o755},
		&tar.Header{Name: ".devcontainer/devcontainer.json", Typeflag: tar.TypeReg, Mode: 0o644},
		&tar.Header{Name: ".devcontainer/init.sh", Typeflag: tar.TypeReg, Mode: 0o4755},
		&tar.Header{Name: ".devcontainer/link", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
	)
	if err := extractConfig(tree, ok); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(tree, ".devcontainer/devcontainer.json")); string(b) != ".devcontainer/devcontainer.json" {
		t.Errorf("devcontainer.json: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(tree, ".devcontainer/init.sh")); err != nil || fi.Mode() != 0o755 {
		t.Errorf("init.sh: %v %v (no setuid)", fi.Mode(), err)
	}
	if _, err := os.Lstat(filepath.Join(tree, ".devcontainer/link")); err == nil {
		t.Error("a symlink was made")
	}
	for _, bad := range []*tar.Header{
		{Name: "../escape", Typeflag: tar.TypeReg},
		{Name: ".devcontainer/../../escape", Typeflag: tar.TypeReg},
		{Name: "/etc/cron.d/x", Typeflag: tar.TypeReg},
		{Name: "Makefile", Typeflag: tar.TypeReg},
		{Name: ".devcontainer/big", Typeflag: tar.TypeReg, Size: maxConfigFile + 1},
	} {
		dir := t.TempDir()
		tree := filepath.Join(dir, "tree")
		os.Mkdir(tree, 0o755)
		err := extractConfig(tree, tarOf(t, bad))
		if err == nil || !(strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "over")) {
			t.Errorf("%s: %v", bad.Name, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%s: something was written beside the tree", bad.Name)
		}
	}
}

func TestCheckName(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"t1", "fix-login", "a"} {
		if err := CheckName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"", "-x", "A", "a/b", "..", "a b", strings.Repeat("a", 41), "x\n"} {
		if CheckName(n) == nil {
			t.Errorf("%q taken as a task's name", n)
		}
	}
}
