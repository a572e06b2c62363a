package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// TestRootlessRmSubordinateIDs: a rootless workspace whose layer holds
// files owned by the user's subordinate ids (a directory chowned to uid
// 1000 inside, with a file in it) is removed whole by cove rm as the user;
// the next cove up starts from the image, not on what is left of the
// layer. Without the removal in a mapped user namespace, cove rm failed
// with permission denied and the next up reused the half-removed layer.
func TestRootlessRmSubordinateIDs(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	u, uid, gid := testUser(t)
	if m := rootlessMap(t, uid, gid); !m.Ranged {
		t.Skip("covetest has no subordinate ranges (or no newuidmap): every id is the user, nothing to test")
	}
	ref := testregistry.Push(t, addr, layered(t))
	base := rootlessBase(t, "cove-rootless-rm-")
	root, project := filepath.Join(base, "root"), filepath.Join(base, "project")
	for _, d := range []string{project, root} {
		os.Mkdir(d, 0o755)
		os.Chown(d, uid, gid)
	}
	as := func(args ...string) (string, string, error) {
		cmd, out, errb := coveProc(root, args...)
		asTestUser(cmd, u, uid, gid)
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	name := workspace.Name(project)
	t.Cleanup(func() { as("rm", "-f", name) })
	up := func() {
		t.Helper()
		if _, errb, err := as("up", "--no-browser", "--detach", "--net", "none", "--image", ref, project); err != nil {
			t.Fatalf("cove up: %v\n%s", err, errb)
		}
	}
	up()
	if out, errb, err := as("exec", name, "sh", "-c",
		"mkdir -p /srv/sub/deep && echo x > /srv/sub/deep/f && echo y > /srv/sub/g && chown -R 1000:1000 /srv/sub && chmod 755 /srv/sub /srv/sub/deep"); err != nil {
		t.Fatalf("cove exec: %v\n%s%s", err, out, errb)
	}
	layer := filepath.Join(root, "data", "workspaces", name)
	fi, err := os.Stat(filepath.Join(layer, "upper", "srv", "sub", "deep", "f"))
	if err != nil {
		t.Fatalf("the file written inside is not in the layer: %v", err)
	}
	if owner := int(fi.Sys().(*syscall.Stat_t).Uid); owner == uid {
		t.Fatalf("uid 1000 inside is covetest's own uid on the host: the test needs a subordinate id")
	}
	if _, errb, err := as("stop", name); err != nil {
		t.Fatalf("cove stop: %v\n%s", err, errb)
	}
	if out, errb, err := as("rm", name); err != nil || strings.TrimSpace(out) != name {
		t.Fatalf("cove rm as the user: %v\nstdout %q\nstderr %s", err, out, errb)
	}
	if _, err := os.Lstat(layer); !os.IsNotExist(err) {
		t.Errorf("the layer %s is still there after cove rm: %v", layer, err)
	}
	if left, _ := os.ReadDir(filepath.Join(root, "data", "trash")); len(left) > 0 {
		t.Errorf("cove rm left %d entries in the trash", len(left))
	}
	up()
	if out, errb, err := as("exec", name, "sh", "-c", "test ! -e /srv/sub && echo fresh"); err != nil || out != "fresh\n" {
		t.Errorf("the workspace after cove rm and up still has the old layer's files: %v %q %s", err, out, errb)
	}
}

// rootlessMap is the mapping covetest's containers get: the ranges
// newuidmap would give it.
func rootlessMap(t *testing.T, uid, gid int) container.IDMap {
	t.Helper()
	if _, err := exec.LookPath("newuidmap"); err != nil {
		return container.IDMap{}
	}
	has := func(file string) bool {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "covetest:") {
				return true
			}
		}
		return false
	}
	return container.IDMap{UID: uid, GID: gid, Ranged: has("/etc/subuid") && has("/etc/subgid")}
}
