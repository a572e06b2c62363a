package userns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// builtin are the helper's own tasks.
var builtin = map[string]Task{
	"rm": func(args []string, _ io.Reader, out io.Writer) error {
		for _, dir := range args {
			if err := removeTree(dir); err != nil {
				return err
			}
		}
		return nil
	},
	"du": func(args []string, _ io.Reader, out io.Writer) error {
		var n int64
		for _, dir := range args {
			k, _ := usage(dir)
			n += k
		}
		_, err := fmt.Fprintln(out, n)
		return err
	},
}

// RemoveAll deletes the tree at dir without following a symlink. What the
// user cannot delete alone (files of their subordinate ids in directories
// of those ids: what a container, a build step or an extraction made) is
// deleted in the mapped user namespace, as `podman unshare rm` does. A dir
// that does not exist is not an error.
func RemoveAll(ctx context.Context, dir string) error {
	err := removeTree(dir)
	if err == nil || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EPERM)) {
		return err
	}
	m := Current()
	if !m.Helps() {
		return err
	}
	if _, herr := Run(context.WithoutCancel(ctx), m, "rm", dir); herr != nil {
		return fmt.Errorf("%w; in a user namespace with your subordinate ids: %v", err, herr)
	}
	return nil
}

// Usage is the bytes of regular files under the paths (a file with
// several links counted once), read in the mapped user namespace where
// that sees more than the user does.
func Usage(ctx context.Context, paths ...string) int64 {
	var n int64
	denied := false
	for _, p := range paths {
		k, d := usage(p)
		n, denied = n+k, denied || d
	}
	if m := Current(); denied && m.Helps() {
		if out, err := Run(ctx, m, "du", paths...); err == nil {
			if k, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
				return k
			}
		}
	}
	return n
}

// usage is Usage here; denied says some of it could not be read.
func usage(p string) (n int64, denied bool) {
	seen := map[[2]uint64]bool{}
	filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			denied = denied || errors.Is(err, fs.ErrPermission)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := fi.Sys().(*unix.Stat_t); ok && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		n += fi.Size()
		return nil
	})
	return n, denied
}

// removeTree removes the tree at dir without following symlinks, making
// the directories it owns but cannot read or write (mode 000 is common in
// images) open first.
func removeTree(dir string) error {
	parent, err := os.Open(filepath.Dir(dir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	defer parent.Close()
	err = removeAt(int(parent.Fd()), filepath.Base(dir))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

func removeAt(pfd int, name string) error {
	err := unix.Unlinkat(pfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("%s: %w", name, err)
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		if cerr := unix.Fchmodat(pfd, name, 0o700, 0); cerr == nil {
			fd, err = unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	// Entries cannot be unlinked from a directory we cannot write.
	_ = unix.Fchmod(fd, 0o700)
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, n := range names {
		if err := removeAt(fd, n); err != nil {
			return fmt.Errorf("%s/%w", name, err)
		}
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Retire moves dir into trash under a fresh name and returns that name.
// After it, dir is free (a new workspace or container starts empty there)
// whatever becomes of the files. A dir that does not exist gives "".
func Retire(dir, trash string) (string, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return "", fmt.Errorf("remove %s: %w", dir, err)
	}
	var b [6]byte
	rand.Read(b[:])
	to := filepath.Join(trash, filepath.Base(dir)+"-"+hex.EncodeToString(b[:]))
	if err := os.Rename(dir, to); err != nil {
		return "", fmt.Errorf("remove %s: %w", dir, err)
	}
	return to, nil
}

// Sweep deletes everything in trash (what an earlier removal could not
// delete) and returns the first error.
func Sweep(ctx context.Context, trash string) error {
	entries, err := os.ReadDir(trash)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var first error
	for _, e := range entries {
		if err := RemoveAll(ctx, filepath.Join(trash, e.Name())); err != nil && first == nil {
			first = err
		}
	}
	return first
}
