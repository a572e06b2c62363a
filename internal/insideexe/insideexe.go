// Package insideexe gives the program cove runs inside containers
// (cmd/cove-inside) a file to run it from. The build appends it to cove's
// executable, compressed (Append); cove writes it out once per build to
// its own data directory, which no workspace reaches, and takes it from
// there on every start (Path).
//
// A program of its own, not cove re-executed, because a container's init
// and a workspace's IDE server are started on every start: cove's package
// initialisers (the Kubernetes client, the builder, the MCP SDK) cost
// ~16 ms and ~750 page faults in each of them, the inside program's 3 ms.
// Appended rather than embedded (go:embed) so that each build has its
// own: an embedded file is one path in the source tree, which two builds
// at once (two architectures, a test's and a release's) would share.
package insideexe

import (
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

// The end of an executable with the program appended:
//
//	… ELF … | zstd of the program | SUM SIZE ZSTLEN\n | magic
//
// SUM is the program's SHA-256 in hex, SIZE its length and ZSTLEN the
// compressed length, each 16 hex digits.
const (
	magic      = "\ncove-inside-v1\n"
	trailerLen = 64 + 1 + 16 + 1 + 16 + 1 + int64(len(magic))
)

// A Program is the inside program as the build appended it to an
// executable.
type Program struct {
	exe      string // the executable it is appended to
	off, zst int64  // where its compressed bytes are, and how many
	Sum      string // hex SHA-256 of the program
	Size     int64  // its size
}

// ErrNone is Open's error for a cove built without the inside program.
var ErrNone = errors.New("this cove was built without cove-inside (plain go build; scripts/build.sh builds it in)")

// maxSize bounds the program's size: it is ~10 MB.
const maxSize = 256 << 20

// Append compresses program (zstd at its best ratio, one encoder
// goroutine, so that one input always gives the same bytes) and appends
// it to the executable exe, with the trailer that Open reads.
func Append(exe string, program []byte) error {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	z := enc.EncodeAll(program, nil)
	f, err := os.OpenFile(exe, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	trailer := fmt.Sprintf("%x %016x %016x\n%s", sha256.Sum256(program), len(program), len(z), magic)
	if _, err := f.Write(append(z, trailer...)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Open finds the program appended to the executable at exe
// ("/proc/self/exe": the one running, whatever replaced its path since).
// It reads the trailer only.
func Open(exe string) (Program, error) {
	f, err := os.Open(exe)
	if err != nil {
		return Program{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Program{}, err
	}
	if fi.Size() < trailerLen {
		return Program{}, ErrNone
	}
	t := make([]byte, trailerLen)
	if _, err := f.ReadAt(t, fi.Size()-trailerLen); err != nil {
		return Program{}, err
	}
	if string(t[trailerLen-int64(len(magic)):]) != magic {
		return Program{}, ErrNone
	}
	fields := strings.Fields(string(t[:trailerLen-int64(len(magic))]))
	if len(fields) != 3 || len(fields[0]) != 64 {
		return Program{}, fmt.Errorf("%s: cove-inside's trailer is damaged", exe)
	}
	size, err1 := strconv.ParseInt(fields[1], 16, 64)
	zst, err2 := strconv.ParseInt(fields[2], 16, 64)
	off := fi.Size() - trailerLen - zst
	if err1 != nil || err2 != nil || size <= 0 || size > maxSize || zst <= 0 || off < 0 {
		return Program{}, fmt.Errorf("%s: cove-inside's trailer is damaged", exe)
	}
	return Program{exe: exe, off: off, zst: zst, Sum: fields[0], Size: size}, nil
}

// Path returns the path of the program in dir, writing it there first
// when no file of this build is there yet. A file found there is taken
// only as this process could have written it: a regular file of its
// user, no one else's to write, of the program's size, executable (a
// noexec mount is refused here, not at the container's start); else it
// is written again. Its bytes are checked as they are written, not on
// each start (that is 10 ms): whoever could change the file afterwards
// is this user, who can change cove itself too.
func (p Program) Path(dir string) (string, error) {
	if p.exe == "" {
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
	exe, err := os.Open(p.exe)
	if err != nil {
		return err
	}
	defer exe.Close()
	zr, err := zstd.NewReader(io.NewSectionReader(exe, p.off, p.zst), zstd.WithDecoderConcurrency(1))
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
