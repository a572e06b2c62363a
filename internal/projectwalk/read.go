package projectwalk

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MaxFileSize caps the files search and replace read whole: larger ones
// are skipped (a 2 GiB sparse file must not become 2 GiB of memory).
const MaxFileSize = 8 << 20

var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("too large")
)

// ReadFile reads the file at rel (relative to the root) whole, if it is a
// regular file of at most MaxFileSize bytes: a symlink is not followed
// (an error), a FIFO or device is refused without blocking.
func (t *Tree) ReadFile(rel string) ([]byte, error) {
	comps, err := split(rel)
	if err != nil || len(comps) == 0 {
		return nil, fmt.Errorf("read %s: %w", rel, errOutside)
	}
	return readBounded(t.root, comps, MaxFileSize)
}

// readBounded opens the file comps beneath the directory d, one
// component at a time, following no symlink (O_NOFOLLOW), without
// blocking on a FIFO (O_NONBLOCK), and reads it if it is a regular file
// of at most max bytes.
func readBounded(d *os.File, comps []string, max int64) ([]byte, error) {
	if len(comps) == 0 {
		return nil, fmt.Errorf("read %s: %w", d.Name(), errNotRegular)
	}
	name := filepath.Join(comps...)
	fd := int(d.Fd())
	for i, c := range comps {
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(comps)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK
		}
		next, err := unix.Openat(fd, c, flags, 0)
		if i > 0 {
			unix.Close(fd)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		fd = next
	}
	return readOpened(os.NewFile(uintptr(fd), name), max)
}

// readHostFile reads a file of the host user's (their global excludes,
// which may well be a symlink into their dotfiles) with the same bounds.
func readHostFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return readOpened(f, max)
}

// readOpened reads f, then closes it, if it is a regular file of at most
// max bytes; a file that grows past max while read is refused too.
func readOpened(f *os.File, max int64) ([]byte, error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", f.Name(), errNotRegular)
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("read %s: %w (%d bytes, at most %d)", f.Name(), errTooLarge, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: %w (it grew past %d bytes)", f.Name(), errTooLarge, max)
	}
	return b, nil
}

// Binary is whether b looks binary: a NUL in its first 8000 bytes, as git
// decides. Search and replace skip such files.
func Binary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }
