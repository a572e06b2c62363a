package filesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/projectwalk"
)

// Sum is the content sum an Entry of a file holds.
func Sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// Dir is a side that is a directory on this machine: read and written
// through projectfs (never following a symlink out of it, keeping
// owners), listed through projectwalk (the project's ignore rules).
type Dir struct {
	fs   *projectfs.Dir
	walk *projectwalk.Tree

	mu   sync.Mutex
	sums map[string]cachedSum // a file's sum while its size, mtime, ctime and inode stay
}

type cachedSum struct {
	size, mtime int64
	// ctime moves with a chmod or chown too: a file made unreadable
	// is read again, and found so, not listed from memory.
	ctime int64
	ino   uint64
	sum   string
}

// OpenDir opens dir as a side. opts are the ignore rules' options.
func OpenDir(dir string, opts *projectwalk.Options) (*Dir, error) {
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	w, err := projectwalk.Open(dir, opts)
	if err != nil {
		d.Close()
		return nil, err
	}
	return &Dir{fs: d, walk: w, sums: map[string]cachedSum{}}, nil
}

// Close releases the directory.
func (d *Dir) Close() error {
	d.walk.Close()
	return d.fs.Close()
}

// Scan lists the files, symlinks and directories the ignore rules let
// through, and what it could not read: a directory it may not open or
// list, a file it may not stat or read. Files are hashed again only when
// their size, mtime, ctime or inode changed.
func (d *Dir) Scan(ctx context.Context) (Listing, error) {
	l, err := d.walk.FilesAndDirs(ctx, "")
	if err != nil {
		return Listing{}, err
	}
	files, dirs := slices.DeleteFunc(l.Files, notSynced), slices.DeleteFunc(l.Dirs, notSynced)
	out := Listing{Entries: make(map[string]Entry, len(files)+len(dirs))}
	for _, u := range l.Unreadable {
		if !notSynced(u.Path) {
			out.Unreadable = append(out.Unreadable, Unreadable{Path: u.Path, Dir: u.Dir, Why: u.Err.Error()})
		}
	}
	unreadable := func(p string, dir bool, err error) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said beside it
		}
		out.Unreadable = append(out.Unreadable, Unreadable{Path: p, Dir: dir, Why: err.Error()})
	}
	for _, p := range dirs {
		fi, err := d.fs.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the walk
		}
		if err != nil {
			unreadable(p, true, err)
			continue
		}
		if fi.IsDir() {
			out.Entries[p] = Entry{Mode: fs.ModeDir | dirPerm(fi.Mode())}
		}
	}
	seen := make(map[string]bool, len(files))
	for _, p := range files {
		fi, err := d.fs.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the walk
		}
		if err == nil {
			var e Entry
			e, err = d.entry(p, fi)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err == nil {
				out.Entries[p] = e
				seen[p] = true
				continue
			}
		}
		unreadable(p, false, err)
	}
	slices.SortFunc(out.Unreadable, func(a, b Unreadable) int { return strings.Compare(a.Path, b.Path) })
	d.mu.Lock()
	for p := range d.sums {
		if !seen[p] {
			delete(d.sums, p)
		}
	}
	d.mu.Unlock()
	return out, nil
}

func (d *Dir) entry(p string, fi fs.FileInfo) (Entry, error) {
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := d.fs.Readlink(p)
		if err != nil {
			return Entry{}, err
		}
		return Entry{Mode: fs.ModeSymlink | 0o777, Size: int64(len(target)), Sum: target}, nil
	}
	e := Entry{Mode: filePerm(fi.Mode()), Size: fi.Size()}
	if e.Size > MaxFileSize {
		return e, nil // not read: it is not carried
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	key := cachedSum{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st != nil {
		key.ino, key.ctime = st.Ino, st.Ctim.Nano()
	}
	d.mu.Lock()
	c, ok := d.sums[p]
	d.mu.Unlock()
	if ok && c.size == key.size && c.mtime == key.mtime && c.ctime == key.ctime && c.ino == key.ino {
		e.Sum = c.sum
		return e, nil
	}
	data, err := d.fs.ReadFileLimit(p, MaxFileSize)
	if err != nil {
		return e, err
	}
	e.Size, e.Sum = int64(len(data)), Sum(data)
	key.sum = e.Sum
	d.mu.Lock()
	d.sums[p] = key
	d.mu.Unlock()
	return e, nil
}

// notSynced says whether a Dir never lists p, whatever the ignore rules:
// node_modules anywhere (a walk outside git skips it; in a git project it
// would be carried one way and not back, then deleted as gone), and the
// file system's own lost+found, which mkfs puts at a volume's root (the
// Pod's copy is one).
func notSynced(p string) bool {
	if p == "lost+found" || strings.HasPrefix(p, "lost+found/") {
		return true
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == "node_modules" {
			return true
		}
	}
	return false
}

// Hider returns a predicate saying whether this side's rules hide p (a
// directory if isDir), for the paths the other side lists that this one
// does not: the Syncer lets this machine's rules decide for both sides.
// It reads each directory's rules once: make one for each round.
func (d *Dir) Hider() func(p string, isDir bool) bool {
	hides := d.walk.Ignorer()
	return func(p string, isDir bool) bool { return notSynced(p) || hides(p, isDir) }
}

// filePerm is a file's permissions as synchronised: the owner may always
// read it, or a file the other side made unreadable would fail every
// scan here (for a user who is not root) and hold the sync up.
func filePerm(m fs.FileMode) fs.FileMode { return m.Perm() | 0o400 }

// dirPerm is a directory's permissions as synchronised: the owner's
// always all there, so that neither side locks itself (or the sync) out
// of a directory the other made.
func dirPerm(m fs.FileMode) fs.FileMode { return m.Perm() | 0o700 }

// Read returns a file's bytes or a symlink's target.
func (d *Dir) Read(_ context.Context, p string) ([]byte, error) {
	if err := d.checkAbove(p); err != nil {
		return nil, err
	}
	fi, err := d.fs.Lstat(p)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := d.fs.Readlink(p)
		return []byte(t), err
	}
	return d.fs.ReadFileLimit(p, MaxFileSize)
}

// Write puts e at p: a file replaced atomically with its permissions, a
// symlink, or a directory with its permissions. A file, symlink or empty
// directory in the way goes first; a directory that holds something is
// never removed for it.
func (d *Dir) Write(_ context.Context, p string, e Entry, data []byte) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if err := d.checkAbove(p); err != nil {
		return err
	}
	fi, err := d.fs.Lstat(p)
	there := err == nil
	switch {
	case e.dir():
		if there && !fi.IsDir() {
			if err := d.fs.Remove(p); err != nil {
				return err
			}
			there = false
		}
		if !there {
			if err := d.fs.Create(p, true); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		return d.fs.Chmod(p, dirPerm(e.Mode))
	case there && (e.symlink() || !fi.Mode().IsRegular()):
		if err := d.clear(p, fi); err != nil {
			return err
		}
	}
	if e.symlink() {
		return d.fs.Symlink(string(data), p)
	}
	if err := d.fs.WriteFile(p, data); err != nil {
		return err
	}
	return d.fs.Chmod(p, filePerm(e.Mode))
}

// clear removes what is at p (described by fi) to put something else
// there: a directory only if empty.
func (d *Dir) clear(p string, fi fs.FileInfo) error {
	if fi.IsDir() {
		if err := d.fs.RemoveEmptyDir(p); err != nil {
			return fmt.Errorf("a directory is in the way (it holds files the sync does not carry?): %w", err)
		}
		return nil
	}
	return d.fs.Remove(p)
}

// Remove deletes p: a file or symlink, or a directory if it is empty (one
// that still holds something, files the ignore rules keep among them,
// stays; the next scan says so).
func (d *Dir) Remove(_ context.Context, p string) error {
	if err := checkPath(p); err != nil {
		return err
	}
	if err := d.checkAbove(p); err != nil {
		return err
	}
	fi, err := d.fs.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		d.fs.RemoveEmptyDir(p)
		return nil
	}
	if err := d.fs.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// checkAbove refuses a path with a symlink above it: projectfs follows
// links that stay inside the project, and the other side's link g -> .git
// would take a write to g/hooks/pre-commit into the host's .git. A walk
// never lists a path under a symlink, so none is a file either side has.
func (d *Dir) checkAbove(p string) error {
	for dir := path.Dir(p); dir != "." && dir != "/"; dir = path.Dir(dir) {
		fi, err := d.fs.Lstat(dir)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("sync: refused path %q: %s is a symlink", p, dir)
		}
	}
	return nil
}

// checkPath refuses a path that is not a clean relative one, or one in a
// .git directory: the other side's answers are not trusted (a workspace
// names what it has), and the host never receives a .git the workspace
// wrote (git on the host runs its hooks and config).
func checkPath(p string) error {
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || len(p) >= 3 && p[:3] == "../" || len(p) > 4096 {
		return fmt.Errorf("sync: refused path %q", p)
	}
	for c := range strings.SplitSeq(p, "/") {
		if c == ".git" {
			return fmt.Errorf("sync: refused path %q: the sync never carries .git", p)
		}
	}
	for i := 0; i < len(p); i++ {
		if p[i] == 0 {
			return fmt.Errorf("sync: refused path %q", p)
		}
	}
	return nil
}
