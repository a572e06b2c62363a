package agent

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The agent's own state in a project (.cove/: sessions, checkpoints, the
// output it saves) is the project owner's, like the project's files: a
// launcher running as root (sudo cove) writes it for a user, who must be
// able to read and remove it. (Edits go through projectfs, which does the
// same.)

// projectOwner is the owner of project when this process is root and the
// owner is someone else; nil when there is nothing to hand over.
func projectOwner(project string) *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(project)
	if err != nil {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	return &syscall.Credential{Uid: st.Uid, Gid: st.Gid}
}

// handOver gives paths, and with tree set everything under them, to
// owner (nil: nothing to do). Entries that are the owner's already are
// left alone; symlinks themselves change, never what they point to.
func handOver(owner *syscall.Credential, tree bool, paths ...string) {
	if owner == nil {
		return
	}
	give := func(p string, fi fs.FileInfo) {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid != owner.Uid || st.Gid != owner.Gid) {
			os.Lchown(p, int(owner.Uid), int(owner.Gid))
		}
	}
	for _, p := range paths {
		if !tree {
			if fi, err := os.Lstat(p); err == nil {
				give(p, fi)
			}
			continue
		}
		filepath.Walk(p, func(q string, fi fs.FileInfo, err error) error {
			if err == nil {
				give(q, fi)
			}
			return nil
		})
	}
}
