package task

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tarWith makes a tar of headers, each regular file's body its Linkname
// field's text (then cleared).
func tarWith(t *testing.T, hdrs ...tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hdrs {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	return b.Bytes()
}

// A base is extracted only when it holds what a checkout holds; a name a
// layer would take for a whiteout, a device, a hard link leave the task
// to a checkout in its workspace (ErrNoBase), and nothing is followed.
func TestUnpackCheckoutTakesOnlyACheckout(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	good := tarWith(t,
		tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "abc"}},
		tar.Header{Typeflag: tar.TypeDir, Name: "lib/", Mode: 0o755, ModTime: when},
		tar.Header{Typeflag: tar.TypeReg, Name: "lib/a.txt", Mode: 0o644, Linkname: "a\n", ModTime: when},
		tar.Header{Typeflag: tar.TypeReg, Name: "run.sh", Mode: 0o755, Linkname: "#!/bin/sh\n", ModTime: when},
		tar.Header{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd", ModTime: when},
		tar.Header{Typeflag: tar.TypeReg, Name: "link", Mode: 0o644, Linkname: "not through the link\n", ModTime: when},
	)
	dir := t.TempDir()
	if _, err := unpackCheckout(bytes.NewReader(good), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "lib", "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("lib/a.txt: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(when) {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "link")); err != nil || string(b) != "not through the link\n" {
		t.Errorf("a file over a symlink of the same name: %q %v", b, err)
	}

	for name, bad := range map[string][]byte{
		"a whiteout's name": tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: "a.txt", Mode: 0o644, Linkname: "a"}, tar.Header{Typeflag: tar.TypeReg, Name: ".wh.a.txt", Mode: 0o644}),
		"an opaque dir's":   tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: "d/.wh..wh..opq", Mode: 0o644}),
		"a device":          tarWith(t, tar.Header{Typeflag: tar.TypeChar, Name: "disk", Mode: 0o666, Devmajor: 8}),
		"a hard link":       tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644, Linkname: "a"}, tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "a"}),
		"a FIFO":            tarWith(t, tar.Header{Typeflag: tar.TypeFifo, Name: "f", Mode: 0o644}),
	} {
		dir := t.TempDir()
		if _, err := unpackCheckout(bytes.NewReader(bad), dir); !errors.Is(err, ErrNoBase) {
			t.Errorf("%s: %v, want ErrNoBase", name, err)
		}
	}
	if _, err := unpackCheckout(bytes.NewReader(good[:len(good)/2]), t.TempDir()); err == nil {
		t.Error("a tar cut short: no error")
	}
}

// A task's copy of the base: files, modes, times and symlinks as the
// base has them; what the tree has already (its .devcontainer) kept; and
// a tree a workspace had before (a first start that failed) cannot make
// the copy follow a symlink it put there.
func TestCloneTreeCopiesAndFollowsNothing(t *testing.T) {
	src, dst, outside := t.TempDir(), t.TempDir(), t.TempDir()
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	os.MkdirAll(filepath.Join(src, "lib", "deep"), 0o755)
	os.WriteFile(filepath.Join(src, "lib", "deep", "a.txt"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(src, "kept.json"), []byte("base's\n"), 0o644)
	os.Symlink("lib/deep/a.txt", filepath.Join(src, "link"))
	os.Chtimes(filepath.Join(src, "run.sh"), when, when)
	os.WriteFile(filepath.Join(dst, "kept.json"), []byte("the tree's\n"), 0o644)

	s, err := cloneTree(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if s.Files != 2 || s.Bytes != int64(len("a\n#!/bin/sh\n")) {
		t.Errorf("stats %+v: want 2 files of 12 bytes, the tree's own left", s)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "lib", "deep", "a.txt")); string(b) != "a\n" {
		t.Errorf("lib/deep/a.txt: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(dst, "run.sh")); err != nil || fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(when) {
		t.Errorf("run.sh: %v %v", fi, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "lib/deep/a.txt" {
		t.Errorf("link: %q %v", l, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "kept.json")); string(b) != "the tree's\n" {
		t.Errorf("the tree's own file: %q", b)
	}

	// A tree where the base has lib/, as a symlink out.
	dst2 := t.TempDir()
	os.Symlink(outside, filepath.Join(dst2, "lib"))
	os.Symlink(filepath.Join(outside, "planted"), filepath.Join(dst2, "run.sh"))
	if _, err := cloneTree(src, dst2); err == nil || !strings.Contains(err.Error(), "lib") {
		t.Errorf("a symlink where the base has a directory: %v, want an error naming lib", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the copy wrote through a symlink: %v", ents)
	}
}

// On a file system that shares extents (XFS here, on a loop device), a
// task's copy of the base takes no space for its files' data, and a task
// writing a file changes its copy alone.
func TestCloneTreeSharesDataOnXFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a file system on a loop device")
	}
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		t.Skip("no mkfs.xfs (Debian's xfsprogs) here")
	}
	img := filepath.Join(t.TempDir(), "xfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v %s", err, out)
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	src := filepath.Join(mnt, "base")
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	var want int64
	for i := range 8 {
		b := make([]byte, 4<<20)
		rand.Read(b)
		want += int64(len(b))
		if err := os.WriteFile(filepath.Join(src, "d", string(rune('a'+i))), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	free := func() int64 {
		unix.Sync()
		var st unix.Statfs_t
		if err := unix.Statfs(mnt, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bfree) * st.Bsize
	}
	before := free()
	for _, task := range []string{"t1", "t2", "t3"} {
		dst := filepath.Join(mnt, task)
		os.Mkdir(dst, 0o755)
		s, err := cloneTree(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		if s.Files != 8 || s.Shared != 8 || s.Bytes != want {
			t.Errorf("%s: %+v, want 8 files sharing their data, %d bytes", task, s, want)
		}
	}
	if used := before - free(); used > 2<<20 {
		t.Errorf("three copies of %d MiB took %d KiB", want>>20, used>>10)
	}
	// A task's write is its own.
	if err := os.WriteFile(filepath.Join(mnt, "t2", "d", "a"), []byte("t2's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "d", "a")); len(b) != 4<<20 {
		t.Errorf("a task's write reached the base: %d bytes", len(b))
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "t1", "d", "a")); len(b) != 4<<20 {
		t.Errorf("a task's write reached another task: %d bytes", len(b))
	}
}

// git archive pads its tar to a whole record after the end, and may still
// be writing that when the end has been read: the base's reader reads it,
// so that git does not die of a closed pipe (exit 141, which once left
// every task of a busy machine to a checkout).
func TestUnpackCheckoutReadsThePadding(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	body := tarWith(t, tar.Header{Typeflag: tar.TypeReg, Name: "a", Mode: 0o644, Linkname: "a\n"})
	wrote := make(chan error, 1)
	go func() {
		_, err := w.Write(body)
		if err == nil {
			time.Sleep(100 * time.Millisecond) // git still writing the record's padding
			_, err = w.Write(make([]byte, 8<<10))
		}
		w.Close()
		wrote <- err
	}()
	if _, err := unpackCheckout(r, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := <-wrote; err != nil {
		t.Errorf("the archive's writer: %v", err)
	}
}

// The checkouts of bases no task is on, and what a killed cove left half
// made, go when a base is next made; the one a task is on stays.
func TestDropUnusedBases(t *testing.T) {
	m := &Manager{Project: "/p", Data: t.TempDir()}
	on, off := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for _, d := range []string{on, off, on[:12] + ".new-123", "lock-not-a-dir"} {
		if err := os.MkdirAll(filepath.Join(m.BaseDir(on), "..", d, "f"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.save(Record{Name: "t1", Project: "/p", Base: on}); err != nil {
		t.Fatal(err)
	}
	m.dropUnusedBases()
	for d, want := range map[string]bool{on: true, off: false, on[:12] + ".new-123": false, "lock-not-a-dir": true} {
		if _, err := os.Stat(filepath.Join(m.BaseDir(on), "..", d)); (err == nil) != want {
			t.Errorf("%s: kept %v, want %v", d, err == nil, want)
		}
	}
}
