package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// TestComposeVolumeStartsWithImageFiles: a new named volume starts with
// what the service's image has at its mount point, as Docker fills one:
// the bytes, owners (1000:1001 inside), modes (setgid, 0640), an xattr
// and a symlink as they were; a volume with nocopy stays empty; a
// volume that is not new keeps what it has (nothing copied over it). As
// root and rootless.
func TestComposeVolumeStartsWithImageFiles(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	seed := func(e testimage.Entry) testimage.Entry { e.UID, e.GID = 1000, 1001; return e }
	tagged := seed(testimage.File("srv/seed/conf/tagged", "tagged\n", 0o640))
	tagged.Xattrs = map[string]string{"user.cove-test": "kept"}
	l, err := testimage.Layer(seed(testimage.Dir("srv/seed", 0o2750)),
		seed(testimage.File("srv/seed/data", "from the image\n", 0o600)), seed(testimage.Dir("srv/seed/conf", 0o755)), tagged,
		seed(testimage.Symlink("srv/seed/link", "data")))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), l)
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	files := map[string]string{
		".devcontainer/devcontainer.json": `{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/proj"}`,
		".devcontainer/docker-compose.yml": `
services:
  app:
    image: ` + ref + `
    command: ["sleep", "1006"]
    depends_on: [db]
  db:
    image: ` + ref + `
    command: ["sleep", "1006"]
    volumes:
      - seeded:/srv/seed
      - {type: volume, source: bare, target: /srv/seed/conf, volume: {nocopy: true}}
volumes:
  seeded:
  bare:
`}
	check := func(t *testing.T, project, root string, host func(uid, gid int) (int, int), cove func(root string, args ...string) result) {
		name := workspace.Name(project)
		t.Cleanup(func() { cove(root, "rm", "-f", name) })
		if r := cove(root, "up", "--detach", project); r.code != 0 {
			t.Fatalf("up: %+v", r)
		}
		vol := filepath.Join(root, "data", "workspaces", name, "volumes")
		seeded := filepath.Join(vol, "compose-seeded")
		if b, err := os.ReadFile(filepath.Join(seeded, "data")); string(b) != "from the image\n" {
			t.Errorf("the volume's data: %q %v", b, err)
		}
		wantUID, wantGID := host(1000, 1001)
		for p, mode := range map[string]os.FileMode{"": os.ModeDir | os.ModeSetgid | 0o750, "data": 0o600, "conf/tagged": 0o640} {
			fi, err := os.Lstat(filepath.Join(seeded, p))
			if err != nil {
				t.Errorf("%s: %v", p, err)
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			if int(st.Uid) != wantUID || int(st.Gid) != wantGID || fi.Mode() != mode {
				t.Errorf("%s in the volume: %d:%d %v, want %d:%d %v", p, st.Uid, st.Gid, fi.Mode(), wantUID, wantGID, mode)
			}
		}
		buf := make([]byte, 16)
		if n, err := unix.Lgetxattr(filepath.Join(seeded, "conf/tagged"), "user.cove-test", buf); err != nil || string(buf[:n]) != "kept" {
			t.Errorf("the xattr: %q %v", buf[:max(n, 0)], err)
		}
		if l, err := os.Readlink(filepath.Join(seeded, "link")); l != "data" {
			t.Errorf("the symlink: %q %v", l, err)
		}
		// Inside: the image's owners, and the nocopy volume over conf empty.
		if r := cove(root, "exec", name+".db", "sh", "-c", "stat -c '%u:%g %a' /srv/seed /srv/seed/data; cat /srv/seed/link; ls -A /srv/seed/conf | wc -l"); r.stdout != "1000:1001 2750\n1000:1001 600\nfrom the image\n0\n" {
			t.Errorf("inside the service: %+v", r)
		}
		if names, _ := os.ReadDir(filepath.Join(vol, "compose-bare")); len(names) != 0 {
			t.Errorf("the nocopy volume has %d entries", len(names))
		}
		// Not new: what the service changed stays, nothing is copied again.
		if r := cove(root, "exec", name+".db", "sh", "-c", "echo changed > /srv/seed/data; rm /srv/seed/link"); r.code != 0 {
			t.Fatalf("exec: %+v", r)
		}
		if r := cove(root, "stop", "--time", "1", name); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
		if r := cove(root, "up", "--detach", project); r.code != 0 {
			t.Fatalf("up again: %+v", r)
		}
		if r := cove(root, "exec", name+".db", "sh", "-c", "cat /srv/seed/data; ls /srv/seed"); r.stdout != "changed\nconf\ndata\n" {
			t.Errorf("after a second up: %+v", r)
		}
		// The copied files are the container's ids (rootless, subordinate
		// ones): cove rm still removes them all.
		if r := cove(root, "rm", "-f", name); r.code != 0 {
			t.Fatalf("rm: %+v", r)
		}
		if _, err := os.Stat(filepath.Join(root, "data", "workspaces", name)); !os.IsNotExist(err) {
			t.Errorf("rm left the workspace's files: %v", err)
		}
	}
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		base := t.TempDir()
		project := filepath.Join(base, "project")
		writeFiles(t, project, files)
		check(t, project, filepath.Join(base, "root"), func(uid, gid int) (int, int) { return uid, gid },
			func(root string, args ...string) result { return runProc(t, root, "", args...) })
	})
	t.Run("rootless", func(t *testing.T) {
		t.Parallel()
		u := needRangedUser(t)
		base := rootlessBase(t, "cove-rootless-volume-")
		project := filepath.Join(base, "project")
		writeFiles(t, project, files)
		chownTree(t, base, u.uid, u.gid)
		check(t, project, filepath.Join(base, "root"), func(uid, gid int) (int, int) {
			return u.m.UIDSub.Start + uid - 1, u.m.GIDSub.Start + gid - 1
		}, func(root string, args ...string) result { return u.run(t, root, args...) })
	})
}
