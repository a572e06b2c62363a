package projectfs

import (
	"errors"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
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

// TestReadRefusesWhatCouldHangOrBloat: a FIFO planted in the project (a
// .cove/config.json, an AGENTS.md) returns at once instead of hanging the
// launcher, a huge sparse file is refused without being read, and a
// symlink out of the project is not followed.
func TestReadRefusesWhatCouldHangOrBloat(t *testing.T) {
	project := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("host secret\n"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(project, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(project, "sparse"))
	f.Truncate(2 << 30)
	f.Close()
	os.Symlink(outside, filepath.Join(project, "link"))
	d, err := Open(project)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	done := make(chan error, 1)
	go func() { _, err := d.ReadFile("fifo"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("a FIFO read: %v, want ErrNotRegular", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reading a FIFO in the project hangs")
	}
	if b, err := d.ReadFile("sparse"); !errors.Is(err, ErrTooLarge) || b != nil {
		t.Errorf("a 2 GiB file: %d bytes, %v; want ErrTooLarge", len(b), err)
	}
	if b, err := d.ReadFile("link"); err == nil {
		t.Errorf("a symlink out of the project was followed: %q", b)
	}
	if err := d.WriteFile("link", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "host secret\n" {
		t.Errorf("a write through a symlink reached the host: %q", b)
	}
	if err := d.WriteFile("fifo", []byte("x")); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a write over a FIFO: %v", err)
	}
}

// TestRootActsAsTheOwner: a launcher running as root for a user's project
// (sudo cove) can do there only what the user could: it neither reads a
// file the user may not read nor writes into a directory the user may not
// write, though root could.
func TestRootActsAsTheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	const user = 12345
	project := t.TempDir()
	os.Chown(project, user, user)
	os.WriteFile(filepath.Join(project, "roots.txt"), []byte("root only\n"), 0o600)
	os.Mkdir(filepath.Join(project, "rootdir"), 0o755)
	d, err := Open(project)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b, err := d.ReadFile("roots.txt"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("read a file only root may read: %q, %v", b, err)
	}
	if err := d.WriteFile("rootdir/new.txt", []byte("x")); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("wrote into a directory only root may write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(project, "rootdir", "new.txt")); err == nil {
		t.Error("rootdir/new.txt was made")
	}
	// And the launcher is root again afterwards, on every thread.
	for range 20 {
		if err := os.WriteFile(filepath.Join(t.TempDir(), "x"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if u, _ := unix.SetfsuidRetUid(-1); u != 0 {
		t.Errorf("this thread's fsuid is %d after", u)
	}
}
