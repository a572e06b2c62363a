// Package insideexe gives the program cove runs inside containers
// (cmd/cove-inside, built into cove compressed) a file to run it from:
// written out once per build, to cove's own data directory, which no
// workspace reaches, and taken from there on every start.
//
// A program of its own, not cove re-executed, because a container's init
// and a workspace's IDE server are started on every start: cove's package
// initialisers (the Kubernetes client, the builder, the MCP SDK) cost
// ~16 ms and ~750 page faults in each of them, the inside program's 3 ms.
package insideexe

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// A Program is the inside program as the build embedded it.
type Program struct {
	Zst  []byte // zstd of the executable (scripts/packinside)
	Sum  string // hex SHA-256 of the executable
	Size int64  // its size
}

// Parse makes a Program of the build's two files: the compressed
// executable, and its sum file ("SHA256 SIZE").
func Parse(zst []byte, sum string) (Program, error) {
	f := strings.Fields(sum)
	if len(f) != 2 || len(f[0]) != 64 {
		return Program{}, fmt.Errorf("the inside program's sum file says %q, not SHA256 SIZE", sum)
	}
	size, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || size <= 0 || size > maxSize {
		return Program{}, fmt.Errorf("the inside program's sum file gives the size %q", f[1])
	}
	return Program{Zst: zst, Sum: f[0], Size: size}, nil
}

// ErrNone is Path's error for a cove built without the inside program.
var ErrNone = errors.New("this cove was built without its inside program (scripts/build.sh builds it in)")

// maxSize bounds the program's size: it is ~10 MB.
const maxSize = 256 << 20

// Path returns the path of the program in dir, writing it there first
// when no file of this build is there yet. A file found there is taken
// only as this process could have written it: a regular file of its
// user, no one else's to write, of the program's size, executable (a
// noexec mount is refused here, not at the container's start); else it
// is written again. Its bytes are checked as they are written, not on
// each start (that is 10 ms): whoever could change the file afterwards
// is this user, who can change cove itself too.
func (p Program) Path(dir string) (string, error) {
	if len(p.Zst) == 0 || len(p.Sum) != 64 {
		return "", ErrNone
	}
	size := p.Size
	name := filepath.Join(dir, "cove-inside-"+p.Sum[:20])
	if usable(name, size) == nil {
		return name, nil
	}
	if err := ownDir(dir); err != nil {
		return "", err
	}
	if err := p.write(dir, name); err != nil {
		return "", fmt.Errorf("write cove's inside program to %s: %w", dir, err)
	}
	if err := usable(name, size); err != nil {
		return "", fmt.Errorf("cove's inside program %s: %w", name, err)
	}
	sweep(dir, name, time.Now().Add(-staleAfter))
	return name, nil
}

// staleAfter is how long another build's program is kept once this one
// is written. A running container needs no file (its mounts and its init
// hold what they run); a cove of that build still in use writes its own
// again when it next starts a container.
const staleAfter = time.Hour

// sweep removes the programs of other builds in dir written before
// before, and temporary files a killed write left.
func sweep(dir, keep string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if filepath.Join(dir, n) == keep || !(strings.HasPrefix(n, "cove-inside-") || strings.HasPrefix(n, ".cove-inside-")) {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(before) {
			os.Remove(filepath.Join(dir, n))
		}
	}
}

// usable says why the file at name is not one Path may hand out.
func usable(name string, size int64) error {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		return err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return errors.New("not a regular file")
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d, not this user", st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("writable by others (mode %o)", st.Mode&0o7777)
	case st.Size != size:
		return fmt.Errorf("%d bytes, not this build's", st.Size)
	}
	if err := unix.Access(name, unix.X_OK); err != nil {
		return fmt.Errorf("cannot be executed (a noexec mount?): %w", err)
	}
	return nil
}

// ownDir makes dir if need be and checks that nobody else may add or
// replace a file in it.
func ownDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: not a directory of this user's that only it may write", dir)
	}
	return nil
}

// write decompresses the program into a new file beside name, checks its
// sum, and renames it over name: a reader sees the whole file or none.
func (p Program) write(dir, name string) error {
	f, err := os.CreateTemp(dir, ".cove-inside-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	defer f.Close()
	zr, err := zstd.NewReader(bytes.NewReader(p.Zst), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer zr.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(zr, p.Size+1))
	if err != nil {
		return fmt.Errorf("the program built into cove is damaged: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.Sum {
		return fmt.Errorf("the program built into cove is damaged: %d bytes of SHA-256 %s, not %s", n, got, p.Sum)
	}
	if err := f.Chmod(0o555); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
