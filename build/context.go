package build

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The build context and its Dockerfile may be a project a workspace
// writes: the Dockerfile inside the context is read confined to it, as
// COPY's sources are (a Dockerfile that is a symlink to ~/.ssh/id_rsa
// would show its first line in the parse error), and nothing of the
// context is opened in a way that blocks (a FIFO planted as
// .dockerignore, a Dockerfile or a COPY source would hang the build).

const (
	// maxDockerfile is the most of a Dockerfile read: real ones are a
	// few KiB.
	maxDockerfile = 1 << 20
	// maxDockerignore is the most of a .dockerignore read.
	maxDockerignore = 1 << 20
)

// errNotRegular is the error for a FIFO, device or directory where a
// file's contents are read.
var errNotRegular = errors.New("not a regular file")

// openRegular opens rel in root, without blocking, and returns it only if
// it is a regular file of at most limit bytes (no limit if negative).
func openRegular(root *os.Root, rel string, limit int64) (*os.File, error) {
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(f, limit); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRegular(f *os.File, limit int64) error {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return errNotRegular
	case limit >= 0 && fi.Size() > limit:
		return fmt.Errorf("larger than %d bytes", limit)
	}
	return nil
}

// readDockerfile reads the Dockerfile at path (absolute): through the
// context's root when it is in the context dir, so that a symlink there
// leads nowhere outside it; one named elsewhere (-f) as it is.
func readDockerfile(dir, path string) ([]byte, error) {
	f, err := openBesideContext(dir, path, maxDockerfile, "the Dockerfile")
	if err != nil {
		return nil, fmt.Errorf("read the Dockerfile %s: %w (give one with -f)", path, err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxDockerfile))
}

// openDockerfileIgnore opens the Dockerfile's own ignore file, as
// BuildKit reads it: <Dockerfile>.dockerignore beside it, which the build
// uses instead of the context's .dockerignore. It is nil if there is none.
func openDockerfileIgnore(dir, dockerfile string) (*os.File, error) {
	p := dockerfile + ".dockerignore"
	f, err := openBesideContext(dir, p, maxDockerignore, "the Dockerfile's ignore file")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return f, nil
}

// openBesideContext opens the regular file at path (absolute, what names
// it): through the context's root when it is in the context dir, so that
// a symlink there leads nowhere outside it; one elsewhere as it is.
func openBesideContext(dir, path string, limit int64, what string) (*os.File, error) {
	rel, err := filepath.Rel(dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			if err = checkRegular(f, limit); err != nil {
				f.Close()
				return nil, err
			}
		}
		return f, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	defer root.Close()
	f, err := openRegular(root, rel, limit)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errNotRegular) {
		if fi, lerr := root.Lstat(rel); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s %s is a symlink that leads out of the build context: the context may be a workspace's to write, so a file in it is read only from it; copy the file into the context, or name a Dockerfile outside it with -f", what, rel)
		}
	}
	return f, err
}
