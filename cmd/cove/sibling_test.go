package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/internal/userns"
)

// TestSiblingPull pulls an image and then a sibling of it (the same first
// two layers, its own third), as root and as covetest with subordinate ids:
// the sibling fetches only its own layer and has the files and owners a
// pull into an empty store gives it; a workspace on it that edits and
// removes files the two share changes nothing of the first image;
// removing the first leaves the sibling whole, and removing both (or
// system reset) leaves nothing of either, snapshots included, also for the
// user.
func TestSiblingPull(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	a, b, err := testimage.Siblings()
	if err != nil {
		t.Fatal(err)
	}
	refA, refB := testregistry.Push(t, addr, a), testregistry.Push(t, addr, b)
	t.Run("root", func(t *testing.T) {
		t.Parallel()
		needRoot(t)
		root := t.TempDir()
		siblingPull(t, root, refA, refB, func(cmd *exec.Cmd) {}, func(uid int) int { return uid })
	})
	t.Run("rootless", func(t *testing.T) {
		t.Parallel()
		needRoot(t)
		u, uid, gid := testUser(t)
		sub, ok1 := userns.SubIDs("/etc/subuid", uid)
		_, ok2 := userns.SubIDs("/etc/subgid", uid)
		if !ok1 || !ok2 {
			t.Skip("covetest has no subordinate ids (scripts/test.sh gives them)")
		}
		root := filepath.Join(rootlessBase(t, "cove-sibling-"), "root")
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(root, uid, gid); err != nil {
			t.Fatal(err)
		}
		siblingPull(t, root, refA, refB, func(cmd *exec.Cmd) { asTestUser(cmd, u, uid, gid) }, func(id int) int {
			if id == 0 {
				return uid
			}
			return sub.Start + id - 1
		})
	})
}

// siblingPull is TestSiblingPull in the store root, cove run by as;
// hostUID maps an owner in the image to the one on disk.
func siblingPull(t *testing.T, root, refA, refB string, as func(*exec.Cmd), hostUID func(int) int) {
	p := testregistry.NewProxy(t, strings.SplitN(refA, "/", 2)[0])
	run := func(args ...string) string {
		t.Helper()
		cmd, out, errb := coveProc(root, args...)
		as(cmd)
		if err := cmd.Run(); err != nil {
			t.Fatalf("cove %s: %v\n%s", strings.Join(args, " "), err, errb)
		}
		return strings.TrimSpace(out.String())
	}
	rootfs := func(digest string) string {
		return filepath.Join(root, "images", "images", strings.TrimPrefix(digest, "sha256:"), "rootfs")
	}
	digestA := run("pull", "-q", p.Ref(refA))
	before := p.Blobs.Load()
	digestB := run("pull", "-q", p.Ref(refB))
	if n := p.Blobs.Load() - before; n != 2 {
		t.Fatalf("the sibling fetched %d blobs, want its config and its own layer", n)
	}
	ra, rb := rootfs(digestA), rootfs(digestB)
	treeA := fileSums(t, ra)
	if treeA["srv/edit"] != sum("a\n") || treeA["srv/gone"] != "" || treeA["srv/ro/keep"] != sum("keep\n") {
		t.Fatalf("a is not as its layers make it: %v %q %q", treeA["srv/edit"], treeA["srv/gone"], treeA["srv/ro/keep"])
	}
	treeB := fileSums(t, rb)
	for f, body := range map[string]string{"srv/edit": "b\n", "srv/edit-link": "v1\n", "srv/gone": "x\n", "srv/opq/new": "new\n"} {
		if treeB[f] != sum(body) {
			t.Errorf("b: %s is not %q", f, body)
		}
	}
	for _, f := range []string{"srv/a-only", "srv/ro/keep", "srv/opq/old"} {
		if treeB[f] != "" {
			t.Errorf("b: %s should not be there", f)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(rb, "srv/owned"), &st); err != nil || int(st.Uid) != hostUID(1000) {
		t.Errorf("b: srv/owned owned by %d (%v), want %d", st.Uid, err, hostUID(1000))
	}
	if err := syscall.Lstat(filepath.Join(rb, "srv/noise"), &st); err != nil || int(st.Uid) != hostUID(0) {
		t.Errorf("b: srv/noise owned by %d (%v), want %d", st.Uid, err, hostUID(0))
	}

	// A workspace on b edits and removes files it shares with a.
	if out := run("run", "--rm", p.Ref(refB), "sh", "-c", "echo more >> /srv/noise && chmod 600 /srv/edit && rm /srv/owned /srv/edit-link && echo ok"); out != "ok" {
		t.Fatalf("run on b: %q", out)
	}
	if got := fileSums(t, ra); fmt.Sprint(got) != fmt.Sprint(treeA) {
		t.Fatal("a's files changed under a workspace on b")
	}
	if got := fileSums(t, rb); fmt.Sprint(got) != fmt.Sprint(treeB) {
		t.Fatal("b's own files changed under its workspace")
	}

	run("rmi", p.Ref(refA))
	if got := fileSums(t, rb); fmt.Sprint(got) != fmt.Sprint(treeB) {
		t.Fatal("b changed when a was removed")
	}
	run("rmi", p.Ref(refB))
	for _, d := range []string{"images", "chains"} {
		left, _ := os.ReadDir(filepath.Join(root, "images", d))
		if len(left) != 0 {
			t.Errorf("images/%s holds %d entries with no image left", d, len(left))
		}
	}
	// And system reset takes everything, snapshots (of files with
	// subordinate owners, rootless) included.
	run("pull", "-q", p.Ref(refA))
	if left, _ := os.ReadDir(filepath.Join(root, "images", "chains")); len(left) != 2 {
		t.Fatalf("after a's pull, %d snapshots, want 2", len(left))
	}
	run("system", "reset")
	if _, err := os.Lstat(filepath.Join(root, "images")); !os.IsNotExist(err) {
		t.Errorf("the store after system reset: %v", err)
	}
}

func sum(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

// fileSums maps each regular file under root to its sha256, and each
// other entry to its type and mode.
func fileSums(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = sum(string(b))
			return nil
		}
		out[rel] = fi.Mode().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
