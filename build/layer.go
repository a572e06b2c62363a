package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/userns"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"
)

// layerFile is a layer written by a step: its files as a directory (a
// lower layer for the next RUN, in overlayfs's own whiteout format) and as
// a gzip'd OCI tar for the image.
type layerFile struct {
	Dir    string  `json:"-"`
	Blob   string  `json:"-"`
	Digest v1.Hash `json:"digest"`
	DiffID v1.Hash `json:"diff_id"`
	Size   int64   `json:"size"`
	// CreatedBy is the instruction, for the image's history.
	CreatedBy string `json:"created_by"`
}

// idMap turns a host owner into the owner root inside the build's
// containers sees: identity as root, and in the user namespace helper
// (rootless with subordinate ids: the helper sees the ids as the
// containers do); rootless without ranges, the user namespace's mapping
// (our ids are 0). Unprivileged, a file of ours (root's inside) may carry
// the owner a COPY --chown gave it in an xattr.
type idMap struct {
	identity bool
	m        userns.IDMap
	xattrUID int // owner whose files' ownerXattr counts (-1: none)
	// chown makes ownerXattr's owner the file's own (in the helper, which
	// may), so that the next steps' containers see it too, as root's do.
	chown bool
}

// hostIDs is the mapping for this process, outside the helper.
func hostIDs() idMap {
	if os.Geteuid() == 0 {
		return idMap{identity: true, xattrUID: -1}
	}
	m := userns.Current()
	return idMap{m: m, xattrUID: m.UID}
}

func (m idMap) owner(uid, gid int) (int, int) {
	if m.identity {
		return uid, gid
	}
	return m.m.ToContainer(uid, gid)
}

// LayerTask is the helper's task name for writing a layer: Layer.
const LayerTask = "layer"

// makeLayer is writeLayer where the layer's files can all be read:
// rootless with subordinate ids, in the user namespace helper, since a
// RUN leaves files of the image's users there (apt's 0700
// /var/cache/apt/archives/partial is _apt's) that the user cannot read.
func makeLayer(ctx context.Context, dir, blob string, epoch *time.Time) (layerFile, error) {
	m := userns.Current()
	if !m.Helps() {
		return writeLayer(dir, blob, hostIDs(), epoch)
	}
	ep := ""
	if epoch != nil {
		ep = strconv.FormatInt(epoch.Unix(), 10)
	}
	out, err := userns.Run(ctx, m, LayerTask, dir, blob, ep)
	if err != nil {
		return layerFile{Dir: dir, Blob: blob}, err
	}
	var lf layerFile
	if err := json.Unmarshal(out, &lf); err != nil {
		return lf, fmt.Errorf("layer from %s: the helper said %q: %w", dir, out, err)
	}
	lf.Dir, lf.Blob = dir, blob
	return lf, nil
}

// Layer is the helper's task (LayerTask): args are the layer's directory,
// the blob to write and SOURCE_DATE_EPOCH or ""; it prints the layer's
// record as JSON. Root in the namespace is the user: ownerXattr counts
// on root's files.
func Layer(args []string, _ io.Reader, out io.Writer) error {
	if len(args) != 3 {
		return fmt.Errorf("layer: want DIR BLOB EPOCH, got %q", args)
	}
	var epoch *time.Time
	if args[2] != "" {
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return err
		}
		t := time.Unix(n, 0).UTC()
		epoch = &t
	}
	lf, err := writeLayer(args[0], args[1], idMap{identity: true, xattrUID: 0, chown: true}, epoch)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(lf)
}

// writeLayer turns dir (a RUN's upper directory, or a tree COPY made) into
// an OCI layer at blob. overlayfs's whiteouts (a 0/0 character device, or
// a file marked with an overlay.whiteout xattr) become .wh.NAME entries and
// its opaque directories (overlay.opaque=y, trusted. as root, user. in a
// user namespace) get a .wh..wh..opq entry; overlay's own xattrs are not
// carried. Entries come in name order, so equal trees give equal layers.
//
// With epoch (SOURCE_DATE_EPOCH), no entry's time is later than it: the
// same steps give the same layer whenever they run.
func writeLayer(dir, blob string, ids idMap, epoch *time.Time) (layerFile, error) {
	lf := layerFile{Dir: dir, Blob: blob}
	f, err := os.Create(blob)
	if err != nil {
		return lf, err
	}
	defer f.Close()
	compressed := &countingHash{h: sha256.New()}
	gz := gzip.NewWriter(io.MultiWriter(f, compressed))
	uncompressed := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(gz, uncompressed))
	w := &layerWriter{tw: tw, root: dir, ids: ids, links: map[[2]uint64]string{}, epoch: epoch}
	if err := w.walk(""); err != nil {
		return lf, fmt.Errorf("layer from %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return lf, err
	}
	if err := gz.Close(); err != nil {
		return lf, err
	}
	if err := f.Sync(); err != nil {
		return lf, err
	}
	lf.Digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.h.Sum(nil))}
	lf.DiffID = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))}
	lf.Size = compressed.n
	return lf, nil
}

type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

type layerWriter struct {
	tw    *tar.Writer
	root  string
	ids   idMap
	links map[[2]uint64]string // dev, inode → first name, for hardlinks
	epoch *time.Time           // clamp times to this (nil: keep them)
}

// mtime is a file's time in the layer.
func (w *layerWriter) mtime(t time.Time) time.Time {
	if w.epoch != nil && t.After(*w.epoch) {
		return *w.epoch
	}
	return t
}

func (w *layerWriter) walk(rel string) error {
	names, err := sortedNames(os.Open(filepath.Join(w.root, rel)))
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := w.entry(filepath.Join(rel, n)); err != nil {
			return err
		}
	}
	return nil
}

func (w *layerWriter) entry(rel string) error {
	full := filepath.Join(w.root, rel)
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return err
	}
	fi, err := os.Lstat(full)
	if err != nil {
		return err
	}
	if isWhiteout(full, &st) {
		dir, base := filepath.Split(rel)
		return w.tw.WriteHeader(&tar.Header{Name: dir + ".wh." + base, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: w.mtime(fi.ModTime()), Format: tar.FormatPAX})
	}
	link := ""
	if fi.Mode()&os.ModeSymlink != 0 {
		if link, err = os.Readlink(full); err != nil {
			return err
		}
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	hdr.Name = rel
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uid, hdr.Gid = w.ids.owner(int(st.Uid), int(st.Gid))
	if int(st.Uid) == w.ids.xattrUID {
		// A rootless COPY --chown's owner, unless a RUN has since
		// given the file another.
		if uid, gid, ok := ownerFromXattr(full); ok {
			hdr.Uid, hdr.Gid = uid, gid
			if w.ids.chown {
				if err := takeXattrOwner(full, fi, uid, gid); err != nil {
					return fmt.Errorf("%s: %w", rel, err)
				}
			}
		}
	}
	hdr.Uname, hdr.Gname = "", ""
	hdr.Format = tar.FormatPAX
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{} // not part of the layer: equal trees, equal layers
	hdr.ModTime = w.mtime(hdr.ModTime)
	hdr.PAXRecords = xattrRecords(full)
	if fi.Mode().IsRegular() && st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := w.links[key]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
			return w.tw.WriteHeader(hdr)
		}
		w.links[key] = rel
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 && fi.Mode()&os.ModeNamedPipe == 0 {
		return nil // a device a RUN made: not carried (nor could it be made unprivileged)
	}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	switch {
	case fi.Mode().IsRegular():
		f, err := os.Open(full)
		if err != nil {
			return err
		}
		_, err = io.Copy(w.tw, f)
		f.Close()
		return err
	case fi.IsDir():
		if opaque(full) {
			if err := w.tw.WriteHeader(&tar.Header{Name: rel + "/.wh..wh..opq", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: w.mtime(fi.ModTime()), Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		return w.walk(rel)
	}
	return nil
}

// isWhiteout says whether an upper directory's entry hides the name below.
func isWhiteout(full string, st *unix.Stat_t) bool {
	if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
		return true
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 0 {
		for _, x := range []string{"trusted.overlay.whiteout", "user.overlay.whiteout"} {
			if _, err := unix.Lgetxattr(full, x, nil); err == nil {
				return true
			}
		}
	}
	return false
}

func opaque(dir string) bool {
	for _, x := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(dir, x, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// xattrRecords carries a file's xattrs (security.capability and the like)
// except overlayfs's bookkeeping.
func xattrRecords(full string) map[string]string {
	size, err := unix.Llistxattr(full, nil)
	if err != nil || size <= 0 {
		return nil
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(full, buf); err != nil {
		return nil
	}
	var out map[string]string
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" || strings.HasPrefix(name, "trusted.overlay.") || strings.HasPrefix(name, "user.overlay.") || name == "security.selinux" || name == ownerXattr {
			continue
		}
		vs, err := unix.Lgetxattr(full, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vs)
		if vs, err = unix.Lgetxattr(full, name, val); err != nil {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out["SCHILY.xattr."+name] = string(val[:vs])
	}
	return out
}

// storedLayer is a layer of the built image: one this build wrote (its
// blob on disk), or one of the base image, which the store already holds
// flattened and never reads again (Import starts from the stored base).
type storedLayer struct {
	digest, diffID v1.Hash
	size           int64
	blob           string // "" for a base layer
}

func (l *storedLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *storedLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *storedLayer) Size() (int64, error)     { return l.size, nil }
func (l *storedLayer) MediaType() (types.MediaType, error) {
	return types.OCILayer, nil
}

func (l *storedLayer) Compressed() (io.ReadCloser, error) {
	if l.blob == "" {
		return nil, fmt.Errorf("base layer %s is no longer stored: pull the base image again (cove pull) and rebuild", l.digest)
	}
	return os.Open(l.blob)
}

func (l *storedLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, f}, nil
}

// sortedNames lists the directory d just opened (open's results, passed
// as they come) by name, and closes it: a walk in name order makes the
// same tree give the same layer.
func sortedNames(d *os.File, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// takeXattrOwner gives the file at full the owner its ownerXattr names,
// its mode back (chown clears setuid and setgid) and drops the xattr.
func takeXattrOwner(full string, fi os.FileInfo, uid, gid int) error {
	var st unix.Stat_t
	if err := unix.Lstat(full, &st); err != nil {
		return err
	}
	if err := unix.Lchown(full, uid, gid); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		// The file is the layer's own, just made by COPY, not a symlink:
		// the path-following chmod is safe.
		if err := unix.Fchmodat(unix.AT_FDCWD, full, st.Mode&0o7777, 0); err != nil {
			return err
		}
	}
	return unix.Lremovexattr(full, ownerXattr)
}
