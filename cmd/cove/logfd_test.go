package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBoundaryLogIsNoHostFile: the workspace's server wrote to the host's
// data/workspaces/NAME/log through its stdout and stderr, a descriptor
// that root in the workspace reopened through /proc/PID/fd and chmod'ed
// (it made the log -rwsrwxrwx with content of its choosing). Now every
// process's standard descriptors in the workspace are a pipe: reopening
// and chmod reach no host file, and the log stays 0600, the launching
// user's, and still gets the server's output.
func TestBoundaryLogIsNoHostFile(t *testing.T) {
	t.Parallel()
	boundaryModes(t, func(t *testing.T, h *hostile) {
		logPath := filepath.Join(h.root, "data", "workspaces", h.name, "log")
		before, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		out := h.inside(`for p in /proc/[0-9]*; do
	for f in $p/fd/0 $p/fd/1 $p/fd/2; do
		[ -e "$f" ] || continue
		echo "$f -> $(readlink $f)"
		chmod 4777 "$f" 2>/dev/null && echo "chmod $f ok"
		(printf '#!/bin/sh\nplanted\n' > "$f") 2>/dev/null && echo "wrote $f"
	done
done; true`)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " -> ") && strings.Contains(line, "/log") {
				t.Errorf("a process in the workspace holds the host's log: %s", line)
			}
		}
		if !strings.Contains(out, "/fd/1 -> pipe:") {
			t.Errorf("no stdout in the workspace is a pipe:\n%s", out)
		}
		after, err := os.Stat(logPath)
		if err != nil {
			t.Fatal(err)
		}
		if after.Mode() != before.Mode() || after.Mode().Perm() != 0o600 || after.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("the host's log changed mode: %v, was %v", after.Mode(), before.Mode())
		}
		bs, as := before.Sys().(*syscall.Stat_t), after.Sys().(*syscall.Stat_t)
		if bs.Uid != as.Uid || bs.Ino != as.Ino {
			t.Errorf("the host's log changed owner or file: uid %d → %d, inode %d → %d", bs.Uid, as.Uid, bs.Ino, as.Ino)
		}
	})
}
