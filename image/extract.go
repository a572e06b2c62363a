package image

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxSize is the default cap on the data one image may extract (64 GiB).
// Tar headers declare sizes, so a tiny compressed layer can claim a huge or
// sparse file; the cap turns that into an error before anything is written.
const DefaultMaxSize int64 = 64 << 30

// ErrUnsafeEntry is wrapped by errors about tar entries that try to leave the
// root filesystem or to replace it.
var ErrUnsafeEntry = errors.New("unsafe layer entry")

// ErrTooLarge is wrapped when extraction would pass the size cap.
var ErrTooLarge = errors.New("image too large")

// Stats counts what extraction wrote and what it had to leave out.
type Stats struct {
	Files        int   `json:"files"`
	Bytes        int64 `json:"bytes"`
	DroppedOwner int   `json:"dropped_owner,omitempty"` // entries whose uid/gid could not be kept (rootless)
	SkippedDev   int   `json:"skipped_devices,omitempty"`
	SkippedXattr int   `json:"skipped_xattrs,omitempty"`
}

// extractor applies layers, in order, to one root filesystem directory.
//
// Every entry is resolved inside the root afresh (openat2 RESOLVE_IN_ROOT via
// pathrs-lite, with its fallback on older kernels): nothing is cached across
// entries, because a later entry may swap a directory for a symlink
// (CVE-2025-47290). The last path component is never followed: all writes go
// through *at syscalls with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW on the parent's fd.
type extractor struct {
	root      *os.File // O_PATH handle on the rootfs directory
	rootFd    int
	noOpenat2 bool // the kernel lacks openat2: resolve through pathrs-lite
	maxSize   int64
	euid      int
	egid      int

	stats   Stats
	upper   map[string]bool // paths (and their parents) the current layer wrote
	dirMeta map[string]dirMeta
	buf     []byte
	zeroes  []byte
}

// dirMeta is applied after all layers: writing children changes a
// directory's mtime, and rootless extraction must keep directories writable
// until the end.
type dirMeta struct {
	mode  uint32
	atime time.Time
	mtime time.Time
}

func newExtractor(rootDir string, maxSize int64) (*extractor, error) {
	root, err := os.OpenFile(rootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	return &extractor{
		root:    root,
		rootFd:  int(root.Fd()),
		maxSize: maxSize,
		euid:    os.Geteuid(),
		egid:    os.Getegid(),
		dirMeta: make(map[string]dirMeta),
		buf:     make([]byte, 1<<20),
		zeroes:  make([]byte, sparseBlock),
	}, nil
}

func (e *extractor) Close() error { return e.root.Close() }

// applyLayer reads one uncompressed layer tar stream and applies it.
func (e *extractor) applyLayer(r io.Reader) error {
	e.upper = make(map[string]bool)
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := e.applyEntry(tr, hdr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
}

// cleanName turns a tar entry name into a path relative to the root.
// Absolute names are taken relative to the root, as tar does; any ".."
// component is refused outright rather than clamped, since no honest image
// needs one.
func cleanName(name string) (string, error) {
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("%w: path contains \"..\"", ErrUnsafeEntry)
		}
	}
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/"), nil
}

// splitRel splits a root-relative path into its directory ("." for the
// root itself, which pathrs-lite wants rather than "") and last component.
func splitRel(rel string) (dir, base string) {
	dir, base = path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	return dir, base
}

func (e *extractor) markUpper(rel string) {
	for rel != "" && rel != "." {
		if e.upper[rel] {
			return
		}
		e.upper[rel] = true
		rel = path.Dir(rel)
		if rel == "." {
			return
		}
	}
}

func (e *extractor) applyEntry(tr *tar.Reader, hdr *tar.Header) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader, tar.TypeXHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
		return nil
	}
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" {
		if hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%w: refusing to replace the root directory with a non-directory", ErrUnsafeEntry)
		}
		return nil
	}
	dir, base := splitRel(rel)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return e.whiteout(dir, base)
	}
	e.markUpper(rel)

	pfd, err := e.openDir(dir, true)
	if err != nil {
		return fmt.Errorf("parent directory: %w", err)
	}
	defer unix.Close(pfd)

	var st unix.Stat_t
	exists := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	isDir := exists && st.Mode&unix.S_IFMT == unix.S_IFDIR

	switch hdr.Typeflag {
	case tar.TypeDir:
		if exists && !isDir {
			if err := removeAt(pfd, base); err != nil {
				return err
			}
		}
		if !isDir {
			if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
				return fmt.Errorf("mkdir: %w", err)
			}
		}
		return e.finishDir(pfd, base, rel, hdr)

	case tar.TypeReg, tar.TypeGNUSparse, tar.TypeCont:
		if exists {
			if err := removeAt(pfd, base); err != nil {
				return err
			}
		}
		return e.writeFile(pfd, base, tr, hdr)

	case tar.TypeSymlink:
		if exists {
			if err := removeAt(pfd, base); err != nil {
				return err
			}
		}
		// The target is stored exactly as written: it is only ever resolved
		// inside the root (by us here, or by the container at run time).
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return fmt.Errorf("symlink: %w", err)
		}
		if err := e.chown(pfd, base, hdr); err != nil {
			return err
		}
		e.stats.Files++
		return setTimesAt(pfd, base, hdr)

	case tar.TypeLink:
		return e.link(pfd, base, rel, exists, hdr)

	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return e.mknod(pfd, base, exists, hdr)
	}
	return nil // unknown types (e.g. Solaris extensions) carry no file data for us
}

func (e *extractor) finishDir(pfd int, base, rel string, hdr *tar.Header) error {
	fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer unix.Close(fd)
	if err := e.fchown(fd, hdr); err != nil {
		return err
	}
	mode := uint32(hdr.Mode & 0o7777)
	// Keep the directory writable for us until the end: a rootless extraction
	// could not add children to a 0555 directory otherwise.
	if err := unix.Fchmod(fd, mode|0o700); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := e.setXattrs(fd, hdr); err != nil {
		return err
	}
	e.dirMeta[rel] = dirMeta{mode: mode, atime: accessTime(hdr), mtime: hdr.ModTime}
	return nil
}

const sparseBlock = 64 << 10

func (e *extractor) writeFile(pfd int, base string, r io.Reader, hdr *tar.Header) error {
	if hdr.Size < 0 {
		return fmt.Errorf("%w: negative size", ErrUnsafeEntry)
	}
	if e.stats.Bytes+hdr.Size > e.maxSize {
		return fmt.Errorf("%w: extracting %d more bytes would pass the limit of %s", ErrTooLarge, hdr.Size, humanSize(e.maxSize))
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer unix.Close(fd)
	n, err := e.copySparse(fd, r, hdr.Size)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if n != hdr.Size {
		return fmt.Errorf("short file data: %d of %d bytes", n, hdr.Size)
	}
	e.stats.Bytes += n
	e.stats.Files++
	if err := e.fchown(fd, hdr); err != nil {
		return err
	}
	// chmod after chown: chown clears setuid and setgid.
	if err := unix.Fchmod(fd, uint32(hdr.Mode&0o7777)); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := e.setXattrs(fd, hdr); err != nil {
		return err
	}
	ts := []unix.Timespec{toTimespec(accessTime(hdr)), toTimespec(hdr.ModTime)}
	if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

// copySparse copies size bytes, seeking over all-zero blocks so that sparse
// files (and files of zeroes) stay sparse on disk.
func (e *extractor) copySparse(fd int, r io.Reader, size int64) (int64, error) {
	var n int64
	holeAtEnd := false
	for n < size {
		want := int64(len(e.buf))
		if size-n < want {
			want = size - n
		}
		m, err := io.ReadFull(r, e.buf[:want])
		chunk := e.buf[:m]
		for len(chunk) > 0 {
			b := chunk
			if len(b) > sparseBlock {
				b = b[:sparseBlock]
			}
			if len(b) == sparseBlock && bytes.Equal(b, e.zeroes) {
				if _, serr := unix.Seek(fd, int64(len(b)), io.SeekCurrent); serr != nil {
					return n, serr
				}
				holeAtEnd = true
			} else {
				if werr := writeAll(fd, b); werr != nil {
					return n, werr
				}
				holeAtEnd = false
			}
			n += int64(len(b))
			chunk = chunk[len(b):]
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	if holeAtEnd {
		if err := unix.Ftruncate(fd, n); err != nil {
			return n, err
		}
	}
	return n, nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (e *extractor) link(pfd int, base, rel string, exists bool, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return fmt.Errorf("hardlink target: %w", err)
	}
	if target == "" {
		return fmt.Errorf("%w: hardlink to the root directory", ErrUnsafeEntry)
	}
	if target == rel {
		return nil
	}
	tdir, tbase := splitRel(target)
	tpfd, err := e.openDir(tdir, false)
	if err != nil {
		return fmt.Errorf("hardlink target %q: %w", hdr.Linkname, err)
	}
	defer unix.Close(tpfd)
	if exists {
		if err := removeAt(pfd, base); err != nil {
			return err
		}
	}
	// linkat without AT_SYMLINK_FOLLOW links the symlink itself, never what
	// it points to. No metadata is applied: it belongs to the target inode,
	// and chmod through a link to a symlink changed host files in
	// CVE-2021-32760.
	if err := unix.Linkat(tpfd, tbase, pfd, base, 0); err != nil {
		return fmt.Errorf("hardlink to %q: %w", hdr.Linkname, err)
	}
	e.stats.Files++
	return nil
}

func (e *extractor) mknod(pfd int, base string, exists bool, hdr *tar.Header) error {
	var mode uint32
	switch hdr.Typeflag {
	case tar.TypeChar:
		mode = unix.S_IFCHR
	case tar.TypeBlock:
		mode = unix.S_IFBLK
	default:
		mode = unix.S_IFIFO
	}
	if mode != unix.S_IFIFO {
		if e.euid != 0 {
			e.stats.SkippedDev++
			return nil
		}
		if hdr.Devmajor < 0 || hdr.Devmajor > 0xfff || hdr.Devminor < 0 || hdr.Devminor > 0xfffff {
			return fmt.Errorf("%w: device number %d:%d out of range", ErrUnsafeEntry, hdr.Devmajor, hdr.Devminor)
		}
	}
	if exists {
		if err := removeAt(pfd, base); err != nil {
			return err
		}
	}
	dev := unix.Mkdev(uint32(hdr.Devmajor), uint32(hdr.Devminor))
	if err := unix.Mknodat(pfd, base, mode|0o600, int(dev)); err != nil {
		if errors.Is(err, unix.EPERM) && mode != unix.S_IFIFO {
			// Root in a user namespace may not create devices.
			e.stats.SkippedDev++
			return nil
		}
		return fmt.Errorf("mknod: %w", err)
	}
	e.stats.Files++
	if err := e.chown(pfd, base, hdr); err != nil {
		return err
	}
	// The node was created just now by us and is not a symlink, so the
	// symlink-following fchmodat is safe here.
	if err := unix.Fchmodat(pfd, base, uint32(hdr.Mode&0o7777), 0); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	return setTimesAt(pfd, base, hdr)
}

// chown sets the owner of a path without following it.
func (e *extractor) chown(pfd int, base string, hdr *tar.Header) error {
	return e.ownerDo(hdr, func(uid, gid int) error {
		return unix.Fchownat(pfd, base, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	})
}

func (e *extractor) fchown(fd int, hdr *tar.Header) error {
	return e.ownerDo(hdr, func(uid, gid int) error { return unix.Fchown(fd, uid, gid) })
}

// ownerDo keeps the entry's owner where we can. Unprivileged, or when an id
// has no mapping in our user namespace, the file stays ours and is counted.
func (e *extractor) ownerDo(hdr *tar.Header, do func(uid, gid int) error) error {
	if hdr.Uid < 0 || hdr.Gid < 0 || hdr.Uid > 1<<32-2 || hdr.Gid > 1<<32-2 {
		return fmt.Errorf("%w: owner %d:%d out of range", ErrUnsafeEntry, hdr.Uid, hdr.Gid)
	}
	if e.euid != 0 {
		if hdr.Uid != e.euid || hdr.Gid != e.egid {
			e.stats.DroppedOwner++
		}
		return nil
	}
	err := do(hdr.Uid, hdr.Gid)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
		e.stats.DroppedOwner++
		return nil
	}
	if err != nil {
		return fmt.Errorf("chown: %w", err)
	}
	return nil
}

// setXattrs applies the PAX xattr records, dropping the ones a container
// must not carry (trusted.* is the host admin's namespace, and an image's
// SELinux labels mean nothing here).
func (e *extractor) setXattrs(fd int, hdr *tar.Header) error {
	for k, v := range hdr.PAXRecords {
		name, ok := strings.CutPrefix(k, "SCHILY.xattr.")
		if !ok {
			continue
		}
		if strings.HasPrefix(name, "trusted.") || name == "security.selinux" {
			e.stats.SkippedXattr++
			continue
		}
		if err := unix.Fsetxattr(fd, name, []byte(v), 0); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EACCES) {
				e.stats.SkippedXattr++
				continue
			}
			return fmt.Errorf("set xattr %s: %w", name, err)
		}
	}
	return nil
}

// finish applies directory modes and times once all layers are in place.
// Order does not matter: setting a child's times leaves its parent's alone.
func (e *extractor) finish() error {
	for rel, m := range e.dirMeta {
		dir, base := splitRel(rel)
		pfd, err := e.openDir(dir, false)
		if err != nil {
			continue // hidden by a later whiteout
		}
		err = func() error {
			defer unix.Close(pfd)
			fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil // replaced by a non-directory later
			}
			defer unix.Close(fd)
			if err := unix.Fchmod(fd, m.mode); err != nil {
				return fmt.Errorf("chmod %s: %w", rel, err)
			}
			ts := []unix.Timespec{toTimespec(m.atime), toTimespec(m.mtime)}
			if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
				return fmt.Errorf("set times %s: %w", rel, err)
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func accessTime(hdr *tar.Header) time.Time {
	if hdr.AccessTime.IsZero() {
		return hdr.ModTime
	}
	return hdr.AccessTime
}

func timespecTime(ts unix.Timespec) time.Time { return time.Unix(ts.Unix()) }

func toTimespec(t time.Time) unix.Timespec {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return unix.Timespec{}
	}
	return unix.NsecToTimespec(t.UnixNano())
}

func setTimesAt(pfd int, base string, hdr *tar.Header) error {
	ts := []unix.Timespec{toTimespec(accessTime(hdr)), toTimespec(hdr.ModTime)}
	if err := unix.UtimesNanoAt(pfd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
