package image

import (
	"errors"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// openDir returns an O_PATH fd on the directory dir (root-relative),
// resolved inside the root: symlinks, absolute or with "..", are followed
// as if the root were "/". With create, missing directories are made
// (0755). The caller closes the fd.
//
// The fast path is one openat2(RESOLVE_IN_ROOT) call. pathrs-lite, which
// does the same with extra hardening and emulates it on kernels without
// openat2, costs about thirty syscalls a lookup; it is the fallback, used to
// create missing directories safely and where openat2 is missing.
func (e *extractor) openDir(dir string, create bool) (int, error) {
	if !e.noOpenat2 {
		fd, err := unix.Openat2(e.rootFd, dir, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS):
			e.noOpenat2 = true // an old kernel, or a seccomp filter hiding openat2
		case errors.Is(err, unix.EAGAIN):
			// a rename raced with the lookup; let pathrs-lite retry
		case errors.Is(err, unix.ENOENT) && create:
		default:
			return -1, err
		}
	}
	var (
		f interface {
			Fd() uintptr
			Close() error
		}
		err error
	)
	if create {
		f, err = pathrs.MkdirAllHandle(e.root, dir, 0o755)
	} else {
		f, err = pathrs.OpenatInRoot(e.root, dir)
	}
	if err != nil {
		return -1, err
	}
	defer f.Close()
	return unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
}
