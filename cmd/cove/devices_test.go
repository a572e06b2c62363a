package main

import (
	"archive/tar"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// TestImageDeviceNodesOpenNothing: the project chooses the image, and a
// layer may hold a device node naming one of this machine's devices (its
// disk). Extracted as root, the node is real; there is no devices cgroup
// to refuse it, so the container's root file system is mounted nodev: the
// node opens nothing (a host disk's bytes stay out of the container),
// while the container's own /dev works as before.
func TestImageDeviceNodesOpenNothing(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup is not installed (util-linux)")
	}
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(disk, append([]byte("host-disk-canary"), make([]byte, 1<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", disk).Output()
	if err != nil {
		t.Skipf("no loop device: %v", err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", loop).Run() })
	var st unix.Stat_t
	if err := unix.Stat(loop, &st); err != nil {
		t.Fatal(err)
	}
	node, err := testimage.Layer(testimage.Entry{Name: "hostdisk", Type: tar.TypeBlock, Mode: 0o666,
		Major: int64(unix.Major(st.Rdev)), Minor: int64(unix.Minor(st.Rdev))})
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), node)
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, testregistry.Addr(t), img)
	root := t.TempDir()
	r := runProc(t, root, "", "run", "--rm", ref, "sh", "-c", "ls -l /hostdisk; head -c 16 /hostdisk; echo; echo null > /dev/null && echo dev-ok")
	t.Log(r.stdout, r.stderr)
	if strings.Contains(r.stdout, "host-disk-canary") {
		t.Errorf("the image's device node read the host's disk: %+v", r)
	}
	if !strings.Contains(r.stdout, "dev-ok") || !strings.Contains(r.stdout, "hostdisk") {
		t.Errorf("the container's /dev or the node itself is not there as before: %+v", r)
	}
}
