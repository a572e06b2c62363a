package container

import (
	"bytes"
	"fmt"
	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/userns"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKeepIDMaps: the nested maps put the user at the id asked, root and
// the ids below it on the first subordinate ids, and cover every id of the
// parent namespace once (so no file the container makes is of an id the
// usual rootless maps do not cover), whether the id is inside the range
// or beyond it.
func TestKeepIDMaps(t *testing.T) {
	for _, c := range []struct {
		id, n int
		want  []syscall.SysProcIDMap
	}{
		{1234, 65537, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1, Size: 1234}, {ContainerID: 1234, HostID: 0, Size: 1}, {ContainerID: 1235, HostID: 1235, Size: 64302}}},
		{1, 65537, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1, Size: 1}, {ContainerID: 1, HostID: 0, Size: 1}, {ContainerID: 2, HostID: 2, Size: 65535}}},
		{65536, 65537, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1, Size: 65536}, {ContainerID: 65536, HostID: 0, Size: 1}}},
		{100000, 65537, []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1, Size: 65536}, {ContainerID: 100000, HostID: 0, Size: 1}}},
	} {
		got := keepIDMaps(c.id, c.n)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("keepIDMaps(%d, %d) = %+v, want %+v", c.id, c.n, got, c.want)
		}
		parent := map[int]bool{}
		for _, m := range got {
			for i := range m.Size {
				if parent[m.HostID+i] {
					t.Errorf("keepIDMaps(%d, %d): parent id %d twice", c.id, c.n, m.HostID+i)
				}
				parent[m.HostID+i] = true
			}
		}
		if len(parent) != c.n {
			t.Errorf("keepIDMaps(%d, %d) covers %d of the parent's %d ids", c.id, c.n, len(parent), c.n)
		}
	}
}

// keepIDChild, set, makes the test binary the rootless side of
// TestRunKeepID: it names the static cove to use.
const keepIDChild = "COVE_TEST_KEEPID_COVE"

// keepIDDir names the rootless side's directory for the container's own.
const keepIDDir = "COVE_TEST_KEEPID_DIR"

// TestRunKeepID: a rootless container with KeepID (run by the covetest
// user, as this test binary re-executed) has, seen from the host, the flat
// keep-id maps: 1234 is the user, 0 the first subordinate id, the others
// around them. The image (the user's files) is 1234's inside; root inside
// is root (it writes the image's /etc, and what it makes is the first
// subordinate id's on the host, a chown to 1234 the user's); the
// workload's exit status, its output and the signals the launcher passes
// come through the keeper.
func TestRunKeepID(t *testing.T) {
	if os.Getenv(keepIDChild) != "" {
		keepIDAsUser(t)
		return
	}
	needRoot(t)
	u, err := user.Lookup("covetest")
	if err != nil {
		t.Skip("no covetest user (scripts/test.sh makes it)")
	}
	m := mustMapping(t, u)
	if !m {
		t.Skip("covetest has no subordinate ids or newuidmap")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	self, err := os.Executable()
	must(t, err)
	bin := filepath.Join(filepath.Dir(coveBin), "container.test")
	b, err := os.ReadFile(self)
	must(t, err)
	must(t, execfile.Write(bin, b, 0o755))
	dir, err := os.MkdirTemp("", "cove-keepid-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	must(t, os.Chown(dir, uid, gid))
	cmd := exec.Command(bin, "-test.run", "^TestRunKeepID$", "-test.v", "-test.count=1")
	cmd.Dir = os.TempDir()
	cmd.Env = []string{keepIDChild + "=" + coveBin, keepIDDir + "=" + dir, "HOME=" + u.HomeDir, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRunKeepID") {
		t.Fatalf("as covetest: %v\n%s", err, out)
	}
}

// mustMapping says whether u can have the ranged maps.
func mustMapping(t *testing.T, u *user.User) bool {
	t.Helper()
	uid, _ := strconv.Atoi(u.Uid)
	_, err1 := exec.LookPath("newuidmap")
	_, ok1 := userns.SubIDs("/etc/subuid", uid)
	_, ok2 := userns.SubIDs("/etc/subgid", uid)
	return err1 == nil && ok1 && ok2
}

// keepIDAsUser is TestRunKeepID's rootless side.
func keepIDAsUser(t *testing.T) {
	m := RootlessIDMap()
	if !m.Ranged {
		t.Fatal("no ranged maps for this user")
	}
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sh", "-c", `
		trap 'echo got TERM; exit 7' TERM
		id -u; stat -c %u:%g /bin/sh
		cat >/dev/null
		touch /etc/x /mine && chown 1234:1234 /mine && touch /ready
		while :; do sleep 1; done`}, nil, "", "0")
	must(t, err)
	// Root's files (the first subordinate id's) are not this user's to
	// delete: the parent, root, removes the directory.
	dir := os.Getenv(keepIDDir)
	spec := &Spec{
		ID: fmt.Sprintf("keepid%d", time.Now().UnixNano()), Name: "box", Hostname: "box",
		Lower: img.RootFS, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged"),
		Binary: os.Getenv(keepIDChild), Net: NetNone, UserNS: true, KeepID: &KeepID{UID: 1234, GID: 1234}, Process: proc,
	}
	stdinR, stdinW := io.Pipe()
	var out bytes.Buffer
	c, err := Start(spec, Stdio{Stdin: stdinR, Stdout: &out, Stderr: &out}, Limits{}, func(string) {})
	must(t, err)
	for _, f := range []struct {
		file string
		own  int
		sub  IDRange
	}{{"uid_map", m.UID, m.UIDSub}, {"gid_map", m.GID, m.GIDSub}} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", c.Pid, f.file))
		must(t, err)
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		want := []string{
			fmt.Sprintf("0 %d 1234", f.sub.Start),
			fmt.Sprintf("1234 %d 1", f.own),
			fmt.Sprintf("1235 %d %d", f.sub.Start+1234, f.sub.Count-1234),
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("init's %s seen from the host: %q, want %q", f.file, got, want)
		}
	}
	stdinW.Close()
	// Its files are made once its stdin is done: wait for them (ready
	// comes last: a TERM between the touch and the chown would end the
	// script before the chown).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(filepath.Join(spec.Upper, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workload made no /mine: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	must(t, c.Signal(syscall.SIGTERM))
	code, _, err := c.Wait()
	must(t, err)
	if code != 7 || out.String() != "0\n1234:1234\ngot TERM\n" {
		t.Errorf("exit %d, output %q; want 7 and root, the image 1234's, the TERM passed on", code, out.String())
	}
	for name, want := range map[string]int{"etc/x": m.UIDSub.Start, "mine": m.UID} {
		fi, err := os.Lstat(filepath.Join(spec.Upper, name))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != want {
			t.Errorf("/%s is %d's on the host, want %d", name, st.Uid, want)
		}
	}
}
