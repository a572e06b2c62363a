package build

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// xattr is one extended attribute of a file COPY copies.
type xattr struct {
	name  string
	value []byte
}

// carriedXattr says whether COPY and ADD carry an xattr of a source to
// its copy, as BuildKit's and buildah's copies do: user.* attributes and
// file capabilities. Not cove's own owner record (user.cove.*: a context
// file must not be able to name its owner in a rootless layer) nor
// overlayfs's (user.overlay.*: whiteouts and opaque directories are the
// layer's own).
func carriedXattr(name string) bool {
	if name == "security.capability" {
		return true
	}
	return strings.HasPrefix(name, "user.") && !strings.HasPrefix(name, "user.cove.") && !strings.HasPrefix(name, "user.overlay.")
}

// carriedXattrs reads the xattrs of the open file f that a copy carries,
// sorted by name.
func carriedXattrs(f *os.File) ([]xattr, error) {
	fd := int(f.Fd())
	size, err := unix.Flistxattr(fd, nil)
	if errors.Is(err, unix.ENOTSUP) || size == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: list xattrs: %w", f.Name(), err)
	}
	buf := make([]byte, size)
	if size, err = unix.Flistxattr(fd, buf); err != nil {
		return nil, fmt.Errorf("%s: list xattrs: %w", f.Name(), err)
	}
	var out []xattr
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		if name == "" || !carriedXattr(name) {
			continue
		}
		n, err := unix.Fgetxattr(fd, name, nil)
		if err != nil {
			continue // gone since listed
		}
		val := make([]byte, n)
		if n, err = unix.Fgetxattr(fd, name, val); err != nil {
			continue
		}
		out = append(out, xattr{name, val[:n]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// hashXattrs writes attrs into a copy's hash: a changed attribute is a
// changed file.
func hashXattrs(h io.Writer, attrs []xattr) {
	for _, x := range attrs {
		fmt.Fprintf(h, "xattr\x00%s\x00%d:%s\x00", x.name, len(x.value), x.value)
	}
}

// setXattrs gives the open file f attrs. As BuildKit's copy, one the file
// system or the caller cannot set (capabilities rootless, user xattrs on
// a file system without them) is left out, not an error.
func setXattrs(f *os.File, attrs []xattr) error {
	for _, x := range attrs {
		err := unix.Fsetxattr(int(f.Fd()), x.name, x.value, 0)
		if err != nil && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%s: set xattr %s: %w", f.Name(), x.name, err)
		}
	}
	return nil
}

// copyXattrs gives out the carried xattrs of in, and writes them into h
// (nil: none). out nil: hash only.
func copyXattrs(in, out *os.File, h io.Writer) error {
	attrs, err := carriedXattrs(in)
	if err != nil || len(attrs) == 0 {
		return err
	}
	if h != nil {
		hashXattrs(h, attrs)
	}
	if out == nil {
		return nil
	}
	return setXattrs(out, attrs)
}

// copyDirXattrs is copyXattrs for the directory from in src and to in
// dst (nil: hash only). The source is opened as a directory only: a FIFO
// put in its place is never opened.
func copyDirXattrs(src *os.Root, from string, dst *os.Root, to string, h io.Writer) error {
	in, err := src.OpenFile(from, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	var out *os.File
	if dst != nil {
		if out, err = dst.OpenFile(to, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0); err != nil {
			return err
		}
		defer out.Close()
	}
	return copyXattrs(in, out, h)
}
