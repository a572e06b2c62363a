package image

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// OCI layer whiteouts (image-spec layer.md): ".wh.NAME" hides NAME from the
// layers below, ".wh..wh..opq" hides everything below in its directory.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
	whiteoutMeta   = ".wh..wh."
)

// whiteout applies a whiteout entry found in dir. Whiteouts only hide what
// lower layers wrote: paths this layer wrote itself stay, whatever the order
// of entries in the tar stream.
func (e *extractor) whiteout(dir, base string) error {
	if base == whiteoutOpaque {
		e.markUpper(dir)
		dfd, err := e.openDir(dir, false)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("opaque directory: %w", err)
		}
		defer unix.Close(dfd)
		return e.hideChildren(dfd, ".", dir)
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil // other AUFS metadata (.wh..wh.plnk and the like) carries nothing for us
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return fmt.Errorf("%w: invalid whiteout name %q", ErrUnsafeEntry, base)
	}
	pfd, err := e.openDir(dir, false)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil // nothing below to hide
	}
	if err != nil {
		return fmt.Errorf("whiteout parent: %w", err)
	}
	defer unix.Close(pfd)
	return e.hide(pfd, name, path.Join(dir, name))
}

// hide removes name (never following it) unless this layer wrote it, in
// which case only what lower layers left beneath it goes.
func (e *extractor) hide(pfd int, name, rel string) error {
	if !e.upper[rel] {
		err := removeAt(pfd, name)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	return e.hideChildren(pfd, name, rel)
}

func (e *extractor) hideChildren(pfd int, name, rel string) error {
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	d := os.NewFile(uintptr(fd), rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	for _, n := range names {
		if err := e.hide(fd, n, path.Join(rel, n)); err != nil {
			return err
		}
	}
	return nil
}

// removeAt removes name in the directory pfd and, for a directory, all it
// holds. It never follows a symlink, and it makes unreadable directories
// (mode 000 is common in images) readable first so that it works unprivileged.
func removeAt(pfd int, name string) error {
	err := unix.Unlinkat(pfd, name, 0)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if cerr := unix.Fchmodat(pfd, name, 0o700, 0); cerr == nil {
			fd, err = unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	// Unprivileged, entries cannot be unlinked from a directory we cannot write.
	_ = unix.Fchmod(fd, 0o700)
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// RemoveAll removes the directory tree at dir without following symlinks,
// also when the tree holds directories its owner cannot read or write.
func RemoveAll(dir string) error {
	parent, err := os.Open(path.Dir(dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer parent.Close()
	err = removeAt(int(parent.Fd()), path.Base(dir))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}
