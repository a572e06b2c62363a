package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The agent's own state (sessions, checkpoints, saved output) lives in a
// host-only directory of the user's (dirs.Layout.ProjectState), never in
// the project: the workspace can write the project, so anything kept
// there could be forged, or made a symlink to write through. Below that
// directory cove alone writes; still, files are opened with O_NOFOLLOW and
// directories checked, and what a root launcher (sudo cove) makes there
// takes the owner of the directory it is made in, the user's.

// stateOwner is whom a new entry in dir should belong to: dir's owner,
// when this process is root and dir is someone else's; nil otherwise.
func stateOwner(dir string) *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	return &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
}

// mkdirState makes dir (0700) if it is missing, owned as its parent;
// a dir that is there must be a directory, not a symlink to one.
func mkdirState(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s: not a directory", dir)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if o := stateOwner(filepath.Dir(dir)); o != nil {
		return os.Lchown(dir, int(o.Uid), int(o.Gid))
	}
	return nil
}

// openState opens a file of the agent's state with flag (O_NOFOLLOW
// added: a symlink there is refused, never followed); one it creates
// (0600) takes the owner of its directory. It must be a regular file.
func openState(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	if flag&os.O_CREATE != 0 {
		if o := stateOwner(filepath.Dir(path)); o != nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != o.Uid {
				if err := f.Chown(int(o.Uid), int(o.Gid)); err != nil {
					f.Close()
					return nil, err
				}
			}
		}
	}
	return f, nil
}
