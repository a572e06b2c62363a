// Package projectfs is the one way the host side touches a project
// directory: the agent's tools, the IDE's host routes and rewinds read and
// write through it. The project is the workspace's to write, so every path
// is resolved beneath the root (os.Root: no symlink, .. or race leads out),
// only regular files are read, opened without blocking (a FIFO planted in
// the project cannot hang the launcher) and up to a size cap, and a
// launcher running as root acts as the project's owner rather than as
// root.
package projectfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxReadSize is the most ReadFile reads: a file planted in the project
// (a 2 GiB sparse one) must not make the launcher hold it all.
const MaxReadSize = 32 << 20

// ErrTooLarge is returned for a file over the size read whole.
var ErrTooLarge = errors.New("file too large to read whole")

// ErrNotRegular is returned for a FIFO, socket, device or directory where
// a file's contents were asked for.
var ErrNotRegular = errors.New("not a regular file")

// Dir is a project directory whose paths are confined to it: os.Root
// refuses any path, symlinks included, that leads outside.
type Dir struct {
	Root string
	root *os.Root
	// uid and gid are the owner's the launcher acts as (its file system
	// identity, setfsuid) when it runs as root for someone else's
	// project (sudo cove); -1 otherwise.
	uid, gid int
}

// Open opens dir. Close it when done.
func Open(dir string) (*Dir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	d := &Dir{Root: abs, root: r, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		if fi, err := r.Stat("."); err == nil {
			if uid, gid := owner(fi); uid > 0 {
				d.uid, d.gid = uid, gid
			}
		}
	}
	return d, nil
}

// Close releases the directory.
func (w *Dir) Close() error { return w.root.Close() }

// Rel turns a path the model gave (relative, or absolute inside the
// workspace, as /workspace/x) into one relative to the root.
func (w *Dir) Rel(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("no path given")
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(w.Root, p)
		if err != nil || strings.HasPrefix(r, "..") {
			return "", fmt.Errorf("%s is outside the workspace (%s)", p, w.Root)
		}
		p = r
	}
	return filepath.Clean(p), nil
}

// ReadFile reads a regular file inside the directory, at most MaxReadSize
// bytes.
func (w *Dir) ReadFile(p string) ([]byte, error) { return w.ReadFileLimit(p, MaxReadSize) }

// ReadFileLimit reads a regular file inside the directory, refusing one
// over limit bytes with ErrTooLarge and anything else (a FIFO, a device)
// with ErrNotRegular, without ever blocking on it.
func (w *Dir) ReadFileLimit(p string, limit int64) ([]byte, error) {
	f, fi, err := w.OpenRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%w (%d bytes, the limit is %d)", ErrTooLarge, fi.Size(), limit)}
	}
	// The file may grow while it is read: the limit holds anyway.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, &fs.PathError{Op: "read", Path: p, Err: ErrTooLarge}
	}
	return b, err
}

// OpenRegular opens a regular file inside the directory to read, as its
// owner, refusing anything else (a FIFO, a device, a directory) with
// ErrNotRegular without ever blocking on it; fi is what was opened. For
// a reader of any size (ReadFileLimit holds a file whole).
func (w *Dir) OpenRegular(p string) (f *os.File, fi fs.FileInfo, err error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, nil, err
	}
	err = w.asOwner(func() error {
		f, err = w.root.OpenFile(r, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
		err = &fs.PathError{Op: "read", Path: p, Err: ErrNotRegular}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// WriteFile replaces a file inside the workspace atomically, keeping its
// permissions (0644 for a new one) and its owner.
func (w *Dir) WriteFile(p string, data []byte) error {
	r, err := w.Rel(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		mode := os.FileMode(0o644)
		uid, gid := -1, -1
		if fi, err := w.root.Stat(r); err == nil {
			if !fi.Mode().IsRegular() {
				return &fs.PathError{Op: "write", Path: p, Err: ErrNotRegular}
			}
			mode = fi.Mode().Perm()
			uid, gid = owner(fi)
		}
		if err := w.mkdirAll(filepath.Dir(r)); err != nil {
			return err
		}
		tmp := filepath.Join(filepath.Dir(r), fmt.Sprintf(".%s.cove-%d", filepath.Base(r), os.Getpid()))
		w.root.Remove(tmp) // one a crash left
		f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
		if err != nil {
			return err
		}
		err = writeAll(f, data, mode)
		if err == nil && uid >= 0 {
			err = w.keepOwner(f, uid, gid)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = w.root.Rename(tmp, r)
		}
		if err != nil {
			w.root.Remove(tmp)
		}
		return err
	})
}

func writeAll(f *os.File, data []byte, mode os.FileMode) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Chmod(mode) // the umask may have taken bits away
}

// keepOwner gives the new file f, by its descriptor, the owner the file
// it replaces had (a rewrite is a new file renamed over the old one).
func (w *Dir) keepOwner(f *os.File, uid, gid int) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if u, g := owner(fi); u == uid && g == gid {
		return nil
	}
	if os.Geteuid() != 0 {
		return nil // ours, as anything we write
	}
	return w.asRoot(func() error { return f.Chown(uid, gid) })
}

// FS is the directory as an fs.FS (for walking).
func (w *Dir) FS() fs.FS { return w.root.FS() }

// OpenDir opens a directory inside the project (symlinks followed inside
// only), for a reader that confines itself to it: a build context handed
// on as /proc/self/fd/N names exactly this directory, whatever the
// workspace renames or links meanwhile. Close it when done.
func (w *Dir) OpenDir(p string) (*os.File, error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = w.asOwner(func() error {
		f, err = w.root.OpenFile(r, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
		return err
	})
	return f, err
}

// Stat describes a path inside the directory, following symlinks inside.
func (w *Dir) Stat(p string) (fs.FileInfo, error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	return w.root.Stat(r)
}

// Lstat describes a path inside the directory, a symlink itself.
func (w *Dir) Lstat(p string) (fs.FileInfo, error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	return w.root.Lstat(r)
}

// Create makes a new empty file (0644), or a directory (0755) if dir, and
// the directories above it; it fails if something is there already.
func (w *Dir) Create(p string, dir bool) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		if err := w.mkdirAll(filepath.Dir(r)); err != nil {
			return err
		}
		if dir {
			return w.root.Mkdir(r, 0o755)
		}
		f, err := w.root.OpenFile(r, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	})
}

// Rename moves a file or directory (a symlink itself, not what it points
// to) inside the directory; it never replaces what is at to.
func (w *Dir) Rename(from, to string) error {
	rf, err := w.changeable(from)
	if err != nil {
		return err
	}
	rt, err := w.changeable(to)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		if _, err := w.root.Lstat(rf); err != nil {
			return err
		}
		if _, err := w.root.Lstat(rt); err == nil {
			return fmt.Errorf("%s: %w", to, fs.ErrExist)
		}
		if err := w.mkdirAll(filepath.Dir(rt)); err != nil {
			return err
		}
		return w.root.Rename(rf, rt)
	})
}

// Remove deletes a file, or a directory and all it holds (a symlink
// itself, not what it points to).
func (w *Dir) Remove(p string) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		if _, err := w.root.Lstat(r); err != nil {
			return err
		}
		return w.root.RemoveAll(r)
	})
}

// RemoveEmptyDir deletes the directory at p if it is empty, as a file
// sync tidies what a deletion left.
func (w *Dir) RemoveEmptyDir(p string) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		fi, err := w.root.Lstat(r)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "rmdir", Path: p, Err: syscall.ENOTDIR}
		}
		return w.root.Remove(r)
	})
}

// Symlink makes a symlink at p holding target as written (it is never
// followed here), for a rewind bringing one back.
func (w *Dir) Symlink(target, p string) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error {
		if err := w.mkdirAll(filepath.Dir(r)); err != nil {
			return err
		}
		return w.root.Symlink(target, r)
	})
}

// Readlink returns the target of the symlink at p, as written (it is not
// followed).
func (w *Dir) Readlink(p string) (string, error) {
	r, err := w.Rel(p)
	if err != nil {
		return "", err
	}
	return w.root.Readlink(r)
}

// Chmod sets the permission bits (mode.Perm(): never setuid, setgid or
// sticky) of a file inside the directory, as a rewind gives a file its
// mode back.
func (w *Dir) Chmod(p string, mode os.FileMode) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.asOwner(func() error { return w.root.Chmod(r, mode.Perm()) })
}

// changeable is Rel for a path that may be created, moved or removed: not
// the directory itself.
func (w *Dir) changeable(p string) (string, error) {
	r, err := w.Rel(p)
	if err != nil {
		return "", err
	}
	if r == "." || strings.HasPrefix(r, "../") || r == ".." {
		return "", fmt.Errorf("%s: not a path inside the project", p)
	}
	return r, nil
}

// owner is a file's owner, as ids.
func owner(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// mkdirAll makes dir (relative) and what is missing above it.
func (w *Dir) mkdirAll(dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	if fi, err := w.root.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s: not a directory", dir)
		}
		return nil
	}
	if err := w.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := w.root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// What the launcher makes or changes in a project stays the owner's, and
// what the owner could not do, the launcher does not do for the
// workspace: a launcher running as root (sudo cove) does its file work
// with the owner's file system identity (setfsuid), so permission checks
// are theirs and new files are theirs from the start, with nothing
// chowned by path afterwards. The identity is per thread, so the
// goroutine is locked to its thread meanwhile.

// asOwner runs fn as the project's owner, if that is someone else.
func (w *Dir) asOwner(fn func() error) error {
	if w.uid < 0 {
		return fn()
	}
	runtime.LockOSThread()
	if !setFSIDs(w.uid, w.gid) {
		// An owner this namespace cannot name (the in-container server
		// with an unmapped owner): as before, as ourselves.
		if setFSIDs(0, 0) {
			runtime.UnlockOSThread()
		}
		return fn()
	}
	err := fn()
	if setFSIDs(0, 0) {
		runtime.UnlockOSThread()
	} // else the thread stays locked and ends with the goroutine
	return err
}

// asRoot runs fn with root's file system identity again, inside asOwner
// (to give a file we hold open its former owner).
func (w *Dir) asRoot(fn func() error) error {
	if w.uid < 0 {
		return fn()
	}
	if !setFSIDs(0, 0) {
		return errors.New("cannot act as root again")
	}
	err := fn()
	if !setFSIDs(w.uid, w.gid) {
		return errors.New("cannot act as the project's owner again")
	}
	return err
}

// setFSIDs sets this thread's file system ids and says whether both took.
func setFSIDs(uid, gid int) bool {
	unix.SetfsgidRetGid(gid)
	unix.SetfsuidRetUid(uid)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	return u == uid && g == gid
}
