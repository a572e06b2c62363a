// Package fdtree holds what the walks that copy a tree by file descriptor
// (an image's clone and layer snapshots, a volume's copy-up) share:
// listing a directory they hold open, and copying a file's xattrs.
package fdtree

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// DirNames lists the directory fd without taking it over: an *os.File
// made from a borrowed fd would close it when collected.
func DirNames(fd int) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(dup), "")
	defer d.Close()
	if _, err := d.Seek(0, 0); err != nil {
		return nil, err
	}
	return d.Readdirnames(-1)
}

// CopyXattrs copies what xattrs of src dst may have: those of a namespace
// this process may not set (trusted.*, unprivileged) or a file system
// without them are left out; any other failure is an error.
func CopyXattrs(src, dst int) error {
	size, err := unix.Flistxattr(src, nil)
	if err != nil || size == 0 {
		return nil // no xattrs, or a file system without them
	}
	buf := make([]byte, size)
	if size, err = unix.Flistxattr(src, buf); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:size]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		vsize, err := unix.Fgetxattr(src, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsize)
		if vsize, err = unix.Fgetxattr(src, name, val); err != nil {
			continue
		}
		if err := unix.Fsetxattr(dst, name, val[:vsize], 0); err != nil &&
			!errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("xattr %s: %w", name, err)
		}
	}
	return nil
}
