package projectfs

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func ownerOf(t *testing.T, p string) int {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestFilesStayTheOwners: as root (sudo cove, the agent writing for a
// user's project), what is written, made or rewritten belongs to the
// project's owner, or keeps the owner it had.
func TestFilesStayTheOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const user, other = 12345, 23456
	project := t.TempDir()
	os.Chown(project, user, user)
	os.WriteFile(filepath.Join(project, "theirs.txt"), []byte("a\n"), 0o600)
	os.Chown(filepath.Join(project, "theirs.txt"), other, other)
	d, err := Open(project)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFile("new/deep/file.go", []byte("package x\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("theirs.txt", []byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if err := d.Create("made.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := d.Create("dirs/made", true); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]int{"new": user, "new/deep": user, "new/deep/file.go": user, "theirs.txt": other,
		"made.txt": user, "dirs": user, "dirs/made": user} {
		if got := ownerOf(t, filepath.Join(project, p)); got != want {
			t.Errorf("%s is owned by %d, want %d", p, got, want)
		}
	}
	if fi, _ := os.Stat(filepath.Join(project, "theirs.txt")); fi.Mode().Perm() != 0o600 {
		t.Errorf("theirs.txt's mode became %v", fi.Mode().Perm())
	}
}
