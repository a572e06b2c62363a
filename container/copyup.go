package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/cove-sh/cove/internal/fdtree"
	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// copyUp fills the new, empty volume b.Source with what the image has at
// b.Target, owners, modes, xattrs and times kept, as Docker does when a
// new named volume is first mounted. It runs in init, before the bind: the
// ids are the container's (rootless, the user namespace's map), so the
// files have the owners they had in the image. Every step is relative to
// a directory handle and follows no symlink: the volume may be shared
// with a container that runs now, the image's tree is the project's.
func (r *rootfs) copyUp(b Bind) error {
	rel := strings.TrimPrefix(path.Clean("/"+b.Target), "/")
	src, err := pathrs.OpenatInRoot(r.root, rel)
	if errors.Is(err, os.ErrNotExist) {
		return nil // nothing there in the image
	}
	if err != nil {
		return fmt.Errorf("volume %s: %w", b.Target, err)
	}
	defer src.Close()
	sfd, err := unix.Open(fdPath(src), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOTDIR) {
		return nil // a file: the bind makes it a directory, as Docker's does
	}
	if err != nil {
		return fmt.Errorf("volume %s: the image's %s: %w", b.Source, b.Target, err)
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(b.Source, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("volume %s: %w", b.Source, err)
	}
	defer unix.Close(dfd)
	if names, err := fdtree.DirNames(dfd); err != nil || len(names) > 0 {
		return err // not empty: what is in it stays as it is
	}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	if err := copyDir(sfd, dfd); err != nil {
		return fmt.Errorf("volume %s: copy the image's %s: %w", b.Source, b.Target, err)
	}
	if err := fdtree.CopyXattrs(sfd, dfd); err != nil {
		return err
	}
	return setMeta(dfd, "", &st)
}

// copyDir copies the entries of the directory sfd into dfd.
func copyDir(sfd, dfd int) error {
	names, err := fdtree.DirNames(sfd)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if err := copyEntry(sfd, dfd, n, &st); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return nil
}

func copyEntry(sfd, dfd int, n string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if err := unix.Mkdirat(dfd, n, 0o700); err != nil {
			return err
		}
		cs, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(cs)
		cd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(cd)
		if err := copyDir(cs, cd); err != nil {
			return err
		}
		if err := fdtree.CopyXattrs(cs, cd); err != nil {
			return err
		}
		return setMeta(cd, "", st) // after its entries: its times stay
	case unix.S_IFREG:
		return copyFile(sfd, dfd, n, st)
	case unix.S_IFLNK:
		target, err := readlinkAt(sfd, n)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, dfd, n); err != nil {
			return err
		}
		if err := unix.Fchownat(dfd, n, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return err
		}
		return unix.UtimesNanoAt(dfd, n, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFIFO:
		if err := unix.Mkfifoat(dfd, n, 0o600); err != nil {
			return err
		}
		fd, err := unix.Openat(dfd, n, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return setMeta(fd, fmt.Sprintf("/proc/self/fd/%d", fd), st)
	}
	return nil // devices and sockets: nothing a volume keeps (the root is nodev)
}

func copyFile(sfd, dfd int, n string, st *unix.Stat_t) error {
	s, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	in := os.NewFile(uintptr(s), n)
	defer in.Close()
	d, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(d), n)
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := fdtree.CopyXattrs(s, d); err != nil {
		return err
	}
	return setMeta(d, "", st)
}

// setMeta gives fd (or, for an O_PATH fd, the path p to it) st's owner,
// mode and times. Owner before mode: a chown clears the set-id bits.
func setMeta(fd int, p string, st *unix.Stat_t) error {
	if p != "" {
		if err := unix.Fchownat(unix.AT_FDCWD, p, int(st.Uid), int(st.Gid), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return err
		}
		if err := unix.Fchmodat(unix.AT_FDCWD, p, st.Mode&0o7777, 0); err != nil {
			return err
		}
		return unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{st.Atim, st.Mtim}, 0)
	}
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, unix.EINVAL) {
		return err // EINVAL: an id the user namespace does not map stays ours
	}
	if err := unix.Fchmod(fd, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), []unix.Timespec{st.Atim, st.Mtim}, 0)
}
