// Package projectfs reads and writes the files of a project directory
// without ever leaving it, for the agent's tools and the IDE's file API.
package projectfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Dir is a project directory whose paths are confined to it: os.Root
// refuses any path, symlinks included, that leads outside.
type Dir struct {
	Root string
	root *os.Root
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
	return &Dir{Root: abs, root: r}, nil
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

// ReadFile reads a file inside the workspace.
func (w *Dir) ReadFile(p string) ([]byte, error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	return w.root.ReadFile(r)
}

// WriteFile replaces a file inside the workspace atomically, keeping its
// permissions (0644 for a new one).
func (w *Dir) WriteFile(p string, data []byte) error {
	r, err := w.Rel(p)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	uid, gid := -1, -1
	if fi, err := w.root.Stat(r); err == nil {
		mode = fi.Mode().Perm()
		uid, gid = owner(fi)
	}
	if err := w.mkdirAll(filepath.Dir(r)); err != nil {
		return err
	}
	if uid < 0 {
		uid, gid = w.ownerOf(filepath.Dir(r))
	}
	tmp := filepath.Join(filepath.Dir(r), fmt.Sprintf(".%s.cove-%d", filepath.Base(r), os.Getpid()))
	if err := w.root.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := w.root.Chmod(tmp, mode); err != nil {
		w.root.Remove(tmp)
		return err
	}
	if err := w.chown(tmp, uid, gid); err != nil {
		w.root.Remove(tmp)
		return err
	}
	if err := w.root.Rename(tmp, r); err != nil {
		w.root.Remove(tmp)
		return err
	}
	return nil
}

// FS is the directory as an fs.FS (for walking).
func (w *Dir) FS() fs.FS { return w.root.FS() }

// Stat describes a path inside the directory, following symlinks inside.
func (w *Dir) Stat(p string) (fs.FileInfo, error) {
	r, err := w.Rel(p)
	if err != nil {
		return nil, err
	}
	return w.root.Stat(r)
}

// Create makes a new empty file (0644), or a directory (0755) if dir, and
// the directories above it; it fails if something is there already.
func (w *Dir) Create(p string, dir bool) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	if err := w.mkdirAll(filepath.Dir(r)); err != nil {
		return err
	}
	uid, gid := w.ownerOf(filepath.Dir(r))
	if dir {
		if err := w.root.Mkdir(r, 0o755); err != nil {
			return err
		}
		return w.chown(r, uid, gid)
	}
	f, err := w.root.OpenFile(r, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	return w.chown(r, uid, gid)
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
}

// Remove deletes a file, or a directory and all it holds (a symlink
// itself, not what it points to).
func (w *Dir) Remove(p string) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	if _, err := w.root.Lstat(r); err != nil {
		return err
	}
	return w.root.RemoveAll(r)
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

// Files stay the project's owner's: a launcher running as root (sudo
// cove) writes for the agent, and what it makes or rewrites would be
// root's otherwise (a rewrite renames a new file over the old one). As
// anyone else, files are the writer's anyway.

// owner is a file's owner, as ids.
func owner(fi fs.FileInfo) (int, int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

// ownerOf is the owner of the directory dir (relative), or -1s.
func (w *Dir) ownerOf(dir string) (int, int) {
	fi, err := w.root.Stat(dir)
	if err != nil {
		return -1, -1
	}
	return owner(fi)
}

// chown gives name to uid:gid when running as root and they are known.
func (w *Dir) chown(name string, uid, gid int) error {
	if os.Geteuid() != 0 || uid < 0 {
		return nil
	}
	return w.root.Lchown(name, uid, gid)
}

// mkdirAll makes dir (relative) and what is missing above it, each new
// directory owned as the one it is made in.
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
	parent := filepath.Dir(dir)
	if err := w.mkdirAll(parent); err != nil {
		return err
	}
	if err := w.root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	uid, gid := w.ownerOf(parent)
	return w.chown(dir, uid, gid)
}

// Chmod sets the permission bits (mode.Perm(); never setuid, setgid or
// sticky) of a file or directory inside the directory, as a checkpoint's
// rewind gives a file its mode back.
func (w *Dir) Chmod(p string, mode fs.FileMode) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	return w.root.Chmod(r, mode.Perm())
}

// Symlink makes p a symbolic link to target, which is stored as given and
// never followed here (a link pointing out of the project is refused by
// every other method of Dir when used). The link, and directories made
// above it, are owned as the directory they are in.
func (w *Dir) Symlink(target, p string) error {
	r, err := w.changeable(p)
	if err != nil {
		return err
	}
	if err := w.mkdirAll(filepath.Dir(r)); err != nil {
		return err
	}
	uid, gid := w.ownerOf(filepath.Dir(r))
	if err := w.root.Symlink(target, r); err != nil {
		return err
	}
	return w.chown(r, uid, gid)
}
