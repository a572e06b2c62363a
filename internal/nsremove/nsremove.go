// Package nsremove deletes a container's files when some of them belong to
// ids the user cannot touch directly: as a user, a container's layer holds
// files owned by the user's subordinate ids (uid 1000 inside is the range's
// start + 999 outside), and the user may not unlink what sits in their
// directories. Like podman's `unshare rm`, the removal then runs in a user
// namespace with the same mapping as the container's, where the user is
// root over those ids.
//
// Removal is in two steps so that a failure never leaves something that
// looks whole: Retire renames the tree into a trash directory (atomic: the
// name is free at once, and nothing reuses the half-removed files), then
// RemoveAll deletes it; Sweep deletes what an earlier failure left there.
package nsremove

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"golang.org/x/sys/unix"
)

// HelperArg is the hidden first argument that makes the cove binary the
// removal helper: main hands such a process to Helper before anything
// else runs.
const HelperArg = "__cove-nsremove"

// mappedArg marks the helper's second stage, re-executed once its user
// namespace has its maps (an exec as the namespace's root is what gives it
// the capabilities to remove).
const mappedArg = "--mapped"

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

// RemoveAll deletes the tree at dir without following a symlink. As a user
// whose containers map subordinate ids (newuidmap, /etc/subuid), what the
// user alone cannot delete is deleted in a user namespace with that
// mapping. A dir that does not exist is not an error.
func RemoveAll(ctx context.Context, dir string) error {
	err := image.RemoveAll(dir)
	if err == nil || os.Geteuid() == 0 || !(errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EPERM)) {
		return err
	}
	m := container.RootlessIDMap()
	if !m.Ranged {
		return err
	}
	if herr := removeMapped(ctx, dir, m); herr != nil {
		return fmt.Errorf("%w; in a user namespace with your subordinate ids: %v", err, herr)
	}
	return nil
}

// removeMapped runs the helper in a new user namespace mapped as a rootless
// container is: 0 is the user, 1…N the subordinate ranges.
func removeMapped(ctx context.Context, dir string, m container.IDMap) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.CommandContext(ctx, exe, HelperArg, dir)
	cmd.Stdin = r
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, Pdeathsig: unix.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the helper: %w", err)
	}
	r.Close()
	p := strconv.Itoa(cmd.Process.Pid)
	for _, c := range [][]string{
		{"newuidmap", p, "0", strconv.Itoa(m.UID), "1", "1", strconv.Itoa(m.UIDSub.Start), strconv.Itoa(m.UIDSub.Count)},
		{"newgidmap", p, "0", strconv.Itoa(m.GID), "1", "1", strconv.Itoa(m.GIDSub.Start), strconv.Itoa(m.GIDSub.Count)},
	} {
		if b, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput(); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return fmt.Errorf("%s: %v: %s", c[0], err, strings.TrimSpace(string(b)))
		}
	}
	w.Write([]byte{1}) // the maps are written: go on
	w.Close()
	if err := cmd.Wait(); err != nil {
		if msg := strings.TrimSpace(out.String()); msg != "" {
			return errors.New(msg)
		}
		return err
	}
	return nil
}

// Helper is the helper process: args are what follows HelperArg. It never
// returns; it exits 0 when the tree is gone, else prints why and exits 1.
func Helper(args []string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch {
	case len(args) == 1:
		// Stage 1: wait for the parent to write the maps, then become the
		// namespace's root by exec.
		var b [1]byte
		if n, _ := os.Stdin.Read(b[:]); n != 1 {
			fail(errors.New("the parent went away before the user namespace was mapped"))
		}
		err := unix.Exec("/proc/self/exe", []string{"cove", HelperArg, mappedArg, args[0]}, []string{})
		fail(fmt.Errorf("re-exec in the user namespace: %w", err))
	case len(args) == 2 && args[0] == mappedArg:
		if err := image.RemoveAll(args[1]); err != nil {
			fail(err)
		}
		os.Exit(0)
	}
	fail(fmt.Errorf("%s: bad arguments %q", HelperArg, args))
}
