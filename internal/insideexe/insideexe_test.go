package insideexe

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// program appends b to a stand-in for cove's executable, as
// scripts/build.sh does, and opens it there.
func program(t *testing.T, b []byte) Program {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "cove")
	must(t, os.WriteFile(exe, []byte("\x7fELF cove itself"), 0o755))
	must(t, Append(exe, Inside, b))
	p, err := Open(exe, Inside)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func exe(n int) []byte {
	return bytes.Repeat([]byte("\x7fELF cove-inside "), n)
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestPathWritesOnceThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bin")
	want := exe(40000)
	p := program(t, want)
	name, err := p.Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the program written is %d bytes (%v), want %d", len(got), err, len(want))
	}
	fi, _ := os.Stat(name)
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("mode %v, want r-xr-xr-x (nobody writes it, not even its owner by mistake)", fi.Mode())
	}
	ino := inode(t, name)
	again, err := p.Path(dir)
	if err != nil || again != name || inode(t, again) != ino {
		t.Errorf("a second Path gave %q (%v), inode %d, want the same file %d", again, err, inode(t, again), ino)
	}
	// Another build's program is another file.
	other, err := program(t, exe(3)).Path(dir)
	if err != nil || other == name {
		t.Errorf("another build's program: %q %v", other, err)
	}
}

// A file at the program's name that Path could not have written is not
// run: it is written again.
func TestPathRewritesWhatItCannotTrust(t *testing.T) {
	want := exe(1000)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"writable by others", func(t *testing.T, path string) { os.Chmod(path, 0o777) }},
		{"another size", func(t *testing.T, path string) {
			os.Remove(path)
			os.WriteFile(path, []byte("#!/bin/sh\necho planted\n"), 0o555)
		}},
		{"a symbolic link", func(t *testing.T, path string) {
			real := filepath.Join(t.TempDir(), "real")
			os.WriteFile(real, want, 0o555)
			os.Remove(path)
			os.Symlink(real, path)
		}},
		{"not executable", func(t *testing.T, path string) { os.Chmod(path, 0o444) }},
		// Another cove's sweep removed it while a launcher of this build
		// ran on (it asks for the path at each start).
		{"removed", func(t *testing.T, path string) { os.Remove(path) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := program(t, want)
			name, err := p.Path(dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, name)
			again, err := p.Path(dir)
			if err != nil || again != name {
				t.Fatalf("Path after the file was spoilt: %q %v", again, err)
			}
			fi, err := os.Lstat(name)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o555 {
				t.Fatalf("the file is %v (%v), want a regular r-xr-xr-x file", fi.Mode(), err)
			}
			if got, _ := os.ReadFile(name); !bytes.Equal(got, want) {
				t.Errorf("the file holds %d bytes, not the program's %d", len(got), len(want))
			}
		})
	}
}

func TestPathRefusesADamagedProgram(t *testing.T) {
	dir := t.TempDir()
	p := program(t, exe(500))
	p.Sum = fmt.Sprintf("%x", sha256.Sum256([]byte("another program")))
	_, err := p.Path(dir)
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a program whose bytes are not its sum's: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a damaged program left %d files in the directory (%s…)", len(left), left[0].Name())
	}
	p = program(t, exe(500))
	p.zst /= 2
	if _, err := p.Path(dir); err == nil {
		t.Error("a program cut short was written")
	}
}

// Open finds the program in what the build made, and refuses to guess
// in anything else.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	must(t, os.WriteFile(plain, bytes.Repeat([]byte("go build"), 100), 0o755))
	if _, err := Open(plain, Inside); !errors.Is(err, ErrNone) {
		t.Errorf("an executable with nothing appended: %v, want ErrNone", err)
	}
	want := exe(300)
	p := program(t, want)
	if p.Sum != fmt.Sprintf("%x", sha256.Sum256(want)) || p.Size != int64(len(want)) {
		t.Errorf("Open read sum %s size %d", p.Sum, p.Size)
	}
	// A trailer whose lengths point outside the file.
	b, _ := os.ReadFile(p.exe)
	tr := b[len(b)-int(trailerLen):]
	copy(tr[64+1+16+1:], "7fffffffffffffff")
	bad := filepath.Join(dir, "bad")
	must(t, os.WriteFile(bad, b, 0o755))
	if _, err := Open(bad, Inside); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a trailer that points before the file: %v", err)
	}
}

func TestPathRefusesADirectoryOthersMayWrite(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	if _, err := program(t, exe(5)).Path(dir); err == nil || !strings.Contains(err.Error(), "only it may write") {
		t.Fatalf("a directory anyone may write: %v", err)
	}
}

func TestPathWithoutAProgram(t *testing.T) {
	if _, err := (Program{}).Path(t.TempDir()); !errors.Is(err, ErrNone) {
		t.Fatalf("Path of no program: %v, want ErrNone", err)
	}
}

// A directory mounted noexec is found out when the program is written,
// not when a container's start fails on it.
func TestPathRefusesANoexecMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a noexec tmpfs")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC, "size=4m,mode=755"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	_, err := program(t, exe(5)).Path(dir)
	if err == nil || !strings.Contains(err.Error(), "noexec") {
		t.Fatalf("a program on a noexec mount: %v", err)
	}
}

func TestPathAtOnce(t *testing.T) {
	dir := t.TempDir()
	want := exe(200000) // 3.4 MB: the writes overlap
	p := program(t, want)
	var wg sync.WaitGroup
	names := make([]string, 6)
	errs := make([]error, 6)
	for i := range names {
		wg.Go(func() { names[i], errs[i] = p.Path(dir) })
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || names[i] != names[0] {
			t.Fatalf("Path %d: %q %v (the first: %q)", i, names[i], errs[i], names[0])
		}
	}
	if got, _ := os.ReadFile(names[0]); !bytes.Equal(got, want) {
		t.Errorf("after six writers the file holds %d bytes, want %d", len(got), len(want))
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("%d files in the directory, want the program alone", len(left))
	}
}

// Writing a new build's program removes other builds' once they are an
// hour old (and a killed write's leftovers), nothing else.
func TestPathSweepsOldBuilds(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	files := map[string]time.Time{
		"cove-inside-0123456789abcdef0123": old,
		".cove-inside-4242":                old,
		"cove-inside-fedcba9876543210fedc": time.Now(),
		"notes.txt":                        old,
	}
	for n, mt := range files {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o555)
		os.Chtimes(filepath.Join(dir, n), mt, mt)
	}
	name, err := program(t, exe(7)).Path(dir)
	if err != nil {
		t.Fatal(err)
	}
	for n, gone := range map[string]bool{
		"cove-inside-0123456789abcdef0123": true, ".cove-inside-4242": true,
		"cove-inside-fedcba9876543210fedc": false, "notes.txt": false, filepath.Base(name): false,
	} {
		if _, err := os.Lstat(filepath.Join(dir, n)); (err != nil) != gone {
			t.Errorf("%s: removed %v, want %v", n, err != nil, gone)
		}
	}
}

// Both programs appended, as scripts/build.sh does: each is found by its
// name, written to a file of its own, and writing one never sweeps the
// other's.
func TestTwoPrograms(t *testing.T) {
	exePath := filepath.Join(t.TempDir(), "cove")
	must(t, os.WriteFile(exePath, []byte("\x7fELF cove itself"), 0o755))
	initProg, inside := bytes.Repeat([]byte("init "), 3000), exe(5000)
	must(t, Append(exePath, Inside, inside))
	must(t, Append(exePath, Init, initProg))
	if err := Append(exePath, "a name far too long", initProg); err == nil {
		t.Error("a name longer than the trailer's field was taken")
	}
	dir := t.TempDir()
	// Another build's cove-inside, old: writing cove-init leaves it.
	old := filepath.Join(dir, "cove-inside-0123456789abcdef0123")
	must(t, os.WriteFile(old, []byte("x"), 0o555))
	hour := time.Now().Add(-2 * time.Hour)
	os.Chtimes(old, hour, hour)
	for _, c := range []struct {
		name string
		want []byte
	}{{Init, initProg}, {Inside, inside}} {
		p, err := Open(exePath, c.name)
		if err != nil {
			t.Fatalf("Open %s: %v", c.name, err)
		}
		path, err := p.Path(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(path), c.name+"-") {
			t.Errorf("%s written as %s", c.name, path)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, c.want) {
			t.Errorf("%s: %d bytes written, want %d", c.name, len(got), len(c.want))
		}
		if _, err := os.Lstat(old); (err == nil) != (c.name == Init) {
			t.Errorf("after writing %s, the old cove-inside is there: %v", c.name, err == nil)
		}
	}
	if _, err := Open(exePath, "cove-other"); !errors.Is(err, ErrNone) {
		t.Errorf("a program not appended: %v, want ErrNone", err)
	}
}

// The executable is each program's dictionary: a cove whose own bytes
// changed after the build (a damaged copy) writes no program from them.
func TestPathRefusesAChangedExecutable(t *testing.T) {
	exePath := filepath.Join(t.TempDir(), "cove")
	own := bytes.Repeat([]byte("\x7fELF cove-inside shares this code "), 2000)
	must(t, os.WriteFile(exePath, own, 0o755))
	want := append(bytes.Repeat([]byte("cove-inside shares this code "), 3000), exe(50)...)
	must(t, Append(exePath, Inside, want))
	b, err := os.ReadFile(exePath)
	must(t, err)
	if len(b) > len(own)+len(want)/10 {
		t.Errorf("the program took %d bytes appended: the executable was not its dictionary", len(b)-len(own))
	}
	p, err := Open(exePath, Inside)
	must(t, err)
	if path, err := p.Path(t.TempDir()); err != nil {
		t.Fatal(err)
	} else if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatalf("wrote %d bytes, want %d", len(got), len(want))
	}
	copy(b, bytes.Repeat([]byte("x"), len(own)))
	must(t, os.WriteFile(exePath, b, 0o755))
	dir := t.TempDir()
	if _, err := p.Path(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a program from a changed executable: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left behind", len(left))
	}
}

// Installed takes a program root wrote for every user only where no one
// else could have changed it: the file root's and only root's to write,
// in directories only root may write, up to /.
func TestInstalled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of root's and of another user")
	}
	base, err := os.MkdirTemp("/var/lib", "cove-installed-test-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	dir := filepath.Join(base, "lib", "cove")
	p := program(t, exe(300))
	if _, err := p.Installed(dir); err == nil {
		t.Fatal("a program not written there yet was taken")
	}
	name, err := p.Path(dir)
	must(t, err)
	if got, err := p.Installed(dir); err != nil || got != name {
		t.Fatalf("root's program: %q %v, want %q", got, err, name)
	}
	// Someone else's file; a directory others may write; one above it.
	must(t, os.Chown(name, 1001, 1001))
	if _, err := p.Installed(dir); err == nil {
		t.Error("a file of uid 1001's was taken")
	}
	must(t, os.Chown(name, 0, 0))
	for _, d := range []string{dir, filepath.Dir(dir)} {
		must(t, os.Chmod(d, 0o777))
		if _, err := p.Installed(dir); err == nil || !strings.Contains(err.Error(), "only root may write") {
			t.Errorf("%s writable by anyone: %v", d, err)
		}
		must(t, os.Chmod(d, 0o755))
	}
	if _, err := p.Installed(dir); err != nil {
		t.Fatal(err)
	}
	// Under /tmp (anyone may write it): never.
	tmp := t.TempDir()
	must(t, os.Chmod(tmp, 0o755))
	if _, err := p.Path(tmp); err != nil {
		t.Fatal(err)
	}
	if err := RootOnly(tmp); err == nil {
		t.Errorf("%s is under /tmp, which anyone may write", tmp)
	}
	if _, err := p.Installed(tmp); err == nil {
		t.Error("a program under /tmp was taken")
	}
}
