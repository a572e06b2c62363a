// Package insideexe gives the programs cove runs inside containers a
// file to run them from: cmd/cove-init (a container's init and its
// helpers) and cmd/cove-inside (what runs in a workspace: its IDE server,
// a Pod's file sync, the MCP relay). The build appends each to cove's
// executable, compressed (Append); cove writes each out once per build to
// its own data directory, which no workspace reaches, and takes it from
// there on every start (Path).
//
// Programs of their own, not cove re-executed, because a container's init
// and a workspace's IDE server are started on every start: cove's package
// initialisers (the Kubernetes client, the builder, the MCP SDK) cost
// ~16 ms and ~750 page faults in each of them. The init is apart from the
// IDE server because it is executed up to three times per start (once as
// root): without net/http, the IDE and the file sync its start is 8 ms,
// not 13. Appended rather than embedded (go:embed) so that each build has
// its own: an embedded file is one path in the source tree, which two
// builds at once (two architectures, a test's and a release's) would
// share.
package insideexe

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// The names of the programs the build appends.
const (
	Init   = "cove-init"
	Inside = "cove-inside"
)

// The end of an executable with programs appended, each as
//
//	zstd of the program | SUM SIZE ZSTLEN NAME\n | magic
//
// the last appended last. SUM is the program's SHA-256 in hex, SIZE its
// length and ZSTLEN the compressed length, each 16 hex digits, NAME its
// name padded to 16 bytes.
//
// Each is compressed with cove's own executable (the bytes before the
// first program) as its zstd dictionary, as `zstd --patch-from` does: the
// programs share most of their code with cove (the runtime, the standard
// library, package container), and the file holds that once. cove-inside
// compresses to 1.3 MB so, not 3.9; cove-init to 0.6, not 1.6.
const (
	magic       = "\ncove-program-v2\n"
	nameLen     = 16
	trailerLen  = 64 + 1 + 16 + 1 + 16 + 1 + nameLen + 1 + int64(len(magic))
	maxAppended = 8     // programs Open looks through before it gives up
	dictID      = 0xc0e // the dictionary's id in each zstd frame
)

// A Program is one of the programs the build appended to an executable.
type Program struct {
	exe      string // the executable it is appended to
	base     int64  // where the executable proper ends: its dictionary
	off, zst int64  // where its compressed bytes are, and how many
	Name     string // Init or Inside
	Sum      string // hex SHA-256 of the program
	Size     int64  // its size
}

// ErrNone is Open's error for a cove built without the program asked for.
var ErrNone = errors.New("this cove was built without its inside programs (plain go build; scripts/build.sh builds them in)")

// maxSize bounds a program's size: cove-inside is ~10 MB.
const maxSize = 256 << 20

// Append compresses program (zstd at its best ratio, one encoder
// goroutine, so that one input always gives the same bytes; the
// executable itself its dictionary) and appends it to the executable exe
// as name, with the trailer that Open reads.
func Append(exe, name string, program []byte) error {
	if name == "" || len(name) > nameLen || strings.ContainsAny(name, " \n") {
		return fmt.Errorf("append %q: a program's name is 1 to %d bytes, no space", name, nameLen)
	}
	f, err := os.OpenFile(exe, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if err := appendTo(f, name, program); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// appendTo appends program to the executable open in f (see Append).
func appendTo(f *os.File, name string, program []byte) error {
	_, base, err := find(f, "")
	if err != nil {
		return err
	}
	dict := make([]byte, base)
	if _, err := f.ReadAt(dict, 0); err != nil {
		return err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderDictRaw(dictID, dict), zstd.WithWindowSize(window(base, int64(len(program)))))
	if err != nil {
		return err
	}
	z := enc.EncodeAll(program, nil)
	trailer := fmt.Sprintf("%x %016x %016x %-*s\n%s", sha256.Sum256(program), len(program), len(z), nameLen, name, magic)
	_, err = f.Write(append(z, trailer...))
	return err
}

// window is the zstd window that lets a program of size bytes refer to
// all of a dictionary of dict bytes: a power of two, at least 1 MB.
func window(dict, size int64) int {
	w := 1 << 20
	for int64(w) < dict+size && w < zstd.MaxWindowSize {
		w <<= 1
	}
	return w
}

// Open finds the program name appended to the executable at exe
// ("/proc/self/exe": the one running, whatever replaced its path since).
// It reads the trailers only.
func Open(exe, name string) (Program, error) {
	f, err := os.Open(exe)
	if err != nil {
		return Program{}, err
	}
	defer f.Close()
	p, base, err := find(f, name)
	if err != nil {
		return Program{}, fmt.Errorf("%s: %w", exe, err)
	}
	if p.Name == "" {
		return Program{}, ErrNone
	}
	p.exe, p.base = exe, base
	return p, nil
}

// find walks f's trailers from its end: the program name among them (no
// Name if it is not), and where the first program starts, the end of the
// executable proper.
func find(f *os.File, name string) (Program, int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return Program{}, 0, err
	}
	var found Program
	end := fi.Size()
	for range maxAppended {
		p, err := readTrailer(f, end)
		if err != nil || p.Name == "" {
			return found, end, err
		}
		if p.Name == name && found.Name == "" {
			found = p
		}
		end = p.off
	}
	return Program{}, 0, errors.New("more programs appended than cove makes")
}

// readTrailer reads the trailer that ends at end in f: a Program without
// a Name when there is none.
func readTrailer(f *os.File, end int64) (Program, error) {
	if end < trailerLen {
		return Program{}, nil
	}
	t := make([]byte, trailerLen)
	if _, err := f.ReadAt(t, end-trailerLen); err != nil {
		return Program{}, err
	}
	if string(t[trailerLen-int64(len(magic)):]) != magic {
		return Program{}, nil
	}
	fields := strings.Fields(string(t[:trailerLen-int64(len(magic))]))
	if len(fields) != 4 || len(fields[0]) != 64 {
		return Program{}, errors.New("an inside program's trailer is damaged")
	}
	size, err1 := strconv.ParseInt(fields[1], 16, 64)
	zst, err2 := strconv.ParseInt(fields[2], 16, 64)
	off := end - trailerLen - zst
	if err1 != nil || err2 != nil || size <= 0 || size > maxSize || zst <= 0 || off < 0 {
		return Program{}, fmt.Errorf("%s's trailer is damaged", fields[3])
	}
	return Program{off: off, zst: zst, Name: fields[3], Sum: fields[0], Size: size}, nil
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
	name := filepath.Join(dir, p.Name+"-"+p.Sum[:20])
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
	sweep(dir, p.Name, name, time.Now().Add(-staleAfter))
	return name, nil
}

// Installed returns the path of the program in dir, a directory of
// root's where root wrote it for every user (cove system write-programs,
// which install.sh runs): taken only as root's, no one else's to write,
// in directories only root may write up to /, of the program's size and
// executable. A rootless container maps no id that may write it, so its
// init runs it in one exec fewer (container.exeProtected), and what the
// host runs of it (the network and log helpers) is nothing a workspace
// could have changed.
func (p Program) Installed(dir string) (string, error) {
	if p.exe == "" {
		return "", ErrNone
	}
	if err := RootOnly(dir); err != nil {
		return "", err
	}
	name := filepath.Join(dir, p.Name+"-"+p.Sum[:20])
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		return "", err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 || st.Mode&0o022 != 0:
		return "", fmt.Errorf("%s: not a file of root's that only root may write", name)
	case st.Size != p.Size:
		return "", fmt.Errorf("%s: %d bytes, not this build's", name, st.Size)
	}
	if err := unix.Access(name, unix.X_OK); err != nil {
		return "", fmt.Errorf("%s cannot be executed: %w", name, err)
	}
	return name, nil
}

// RootOnly says why dir, or a directory above it, could be written by
// someone other than root (a file in it replaced): each must be a
// directory of root's that no group or other may write.
func RootOnly(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s: not an absolute path", dir)
	}
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
			return fmt.Errorf("%s: not a directory only root may write", d)
		}
		if d == "/" {
			return nil
		}
	}
}

// staleAfter is how long another build's program is kept once this one
// is written. A running container needs no file (its mounts and its init
// hold what they run); a cove of that build still in use writes its own
// again when it next starts a container.
const staleAfter = time.Hour

// sweep removes the programs of that name of other builds in dir
// written before before, and temporary files a killed write left.
func sweep(dir, program, keep string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if filepath.Join(dir, n) == keep || !(strings.HasPrefix(n, program+"-") || strings.HasPrefix(n, "."+program+"-")) {
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
	f, err := os.CreateTemp(dir, "."+p.Name+"-*")
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
	// The dictionary is the executable mapped, not read: its pages are in
	// memory already (it is running), where a 47 MB buffer of new memory
	// took 220-380 ms to fill here (fresh pages of a VM's memory). An
	// executable running cannot be written (ETXTBSY), so the mapping
	// does not change under the decoder.
	dict, err := unix.Mmap(int(exe.Fd()), 0, int(p.base), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(dict)
	z := make([]byte, p.zst)
	if _, err := exe.ReadAt(z, p.off); err != nil {
		return err
	}
	// DecodeAll, not a streaming reader: a stream copies the dictionary
	// into a history buffer of the window's size (64 MB); DecodeAll reads
	// matches in the dictionary where it lies.
	// (Its memory bound is the window's: the decoder holds a frame's
	// window to it, though DecodeAll allocates only the output.)
	w := uint64(window(p.base, p.Size))
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderDictRaw(dictID, dict),
		zstd.WithDecoderMaxWindow(w), zstd.WithDecoderMaxMemory(w))
	if err != nil {
		return err
	}
	defer dec.Close()
	prog, err := dec.DecodeAll(z, make([]byte, 0, p.Size))
	if err != nil {
		return fmt.Errorf("the program built into cove is damaged: %w", err)
	}
	sum := sha256.Sum256(prog)
	if got := hex.EncodeToString(sum[:]); got != p.Sum || int64(len(prog)) != p.Size {
		return fmt.Errorf("the program built into cove is damaged: %d bytes of SHA-256 %s, not %d of %s", len(prog), got, p.Size, p.Sum)
	}
	if _, err := f.Write(prog); err != nil {
		return err
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
