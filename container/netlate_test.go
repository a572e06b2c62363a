package container

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lateSpec is a detached container of the test image on the private
// network with NetLate, its control socket in dir.
func lateSpec(t *testing.T, dir string) *Spec {
	t.Helper()
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sleep", "30"}, nil, "", "")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644))
	return &Spec{
		ID: fmt.Sprintf("test%d", time.Now().UnixNano()), Name: "late", Hostname: "late",
		Lower: img.RootFS, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged"),
		Binary: coveBin, ResolvConf: filepath.Join(dir, "resolv.conf"), Hosts: filepath.Join(dir, "hosts"),
		Control: filepath.Join(dir, "ctl.sock"),
		Net:     NetPrivate, NetLate: true, Process: proc,
	}
}

// TestRunPrivateNetLate: Start returns before pasta is up (it takes some
// 70 ms of its own here), and an exec made at once finds the container's
// interface and its default route, which init made (see Tap), pasta or
// not.
func TestRunPrivateNetLate(t *testing.T) {
	needRoot(t)
	needPasta(t)
	spec := lateSpec(t, t.TempDir())
	start := time.Now()
	c, err := Start(spec, Stdio{Stdout: io.Discard, Stderr: io.Discard}, Limits{}, func(w string) { t.Logf("warning: %s", w) })
	must(t, err)
	returned := time.Since(start)
	defer func() { c.Kill(); c.Wait() }()
	// Read from the host, right away: pasta may or may not be done (on a
	// fast machine it is); logged, not asserted.
	early, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/route", c.Pid))
	r, w, err := os.Pipe()
	must(t, err)
	null, err := os.Open(os.DevNull)
	must(t, err)
	defer null.Close()
	code, err := Exec(spec.Control, ExecRequest{Args: []string{"cat", "/proc/net/route"}}, [3]*os.File{null, w, w}, nil)
	w.Close()
	out, _ := io.ReadAll(r)
	t.Logf("Start returned after %v; the default route seen from the host then: %v; the exec ran after %v",
		returned, hasDefaultRoute(string(early)), time.Since(start))
	if err != nil || code != 0 {
		t.Fatalf("exec: %d %v: %s", code, err, out)
	}
	if !hasDefaultRoute(string(out)) {
		t.Fatalf("an exec made at once ran before pasta set the network up (no default route):\n%s", out)
	}
}

// hasDefaultRoute says whether /proc/net/route lists a route to 0.0.0.0/0.
func hasDefaultRoute(table string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 7 && f[1] == "00000000" && f[7] == "00000000" {
			return true
		}
	}
	return false
}

// TestRunPrivateNetLateFails: pasta failing under a NetLate start stops
// the container and says why: as a warning once the workload runs, or as
// Start's error when pasta failed before it did (an at once failing pasta
// usually does; a start that wins the race is stopped all the same).
func TestRunPrivateNetLateFails(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		name, delay string
		started     bool
	}{{"after the start", "0.5", true}, {"before the start", "0", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fake := filepath.Join(dir, "bin")
			must(t, os.Mkdir(fake, 0o755))
			script := "#!/bin/sh\nsleep " + tc.delay + "\necho 'Failed to open tap device: made up for the test' >&2\nexit 1\n"
			must(t, os.WriteFile(filepath.Join(fake, "pasta"), []byte(script), 0o755))
			t.Setenv("PATH", fake+":"+os.Getenv("PATH"))
			spec := lateSpec(t, dir)
			var mu sync.Mutex
			var warned []string
			c, err := Start(spec, Stdio{Stdout: io.Discard, Stderr: io.Discard}, Limits{}, func(w string) {
				mu.Lock()
				defer mu.Unlock()
				warned = append(warned, w)
			})
			if err != nil {
				if tc.started || !strings.Contains(err.Error(), "made up for the test") {
					t.Fatalf("Start: %v", err)
				}
				return
			}
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				c.Kill()
				t.Fatal("the container runs on without its network")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(warned) != 1 || !strings.Contains(warned[0], "did not come up, so it was stopped") || !strings.Contains(warned[0], "made up for the test") {
				t.Errorf("warnings: %q", warned)
			}
		})
	}
}

// TestRunPrivateNetHelperLeavesTheInterface: the network helper hands the
// container's interface to pasta and keeps nothing of it: no descriptor,
// and no entry in its Go poller's epoll set. A descriptor closed under
// the poller stays in that set for as long as pasta holds the interface,
// and every packet woke the helper: bulk downloads lost a third of their
// speed to it.
func TestRunPrivateNetHelperLeavesTheInterface(t *testing.T) {
	needRoot(t)
	needPasta(t)
	spec := lateSpec(t, t.TempDir())
	c, err := Start(spec, Stdio{Stdout: io.Discard, Stderr: io.Discard}, Limits{}, func(w string) { t.Logf("warning: %s", w) })
	must(t, err)
	defer func() { c.Kill(); c.Wait() }()
	c.waitNet()
	helper := c.netHelper.Process.Pid
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", helper, helper))
	must(t, err)
	var tun uint64
	for _, p := range strings.Fields(string(children)) {
		for _, fd := range tunFds(t, p) {
			var st unix.Stat_t
			must(t, unix.Stat(fd, &st))
			tun = st.Ino
		}
	}
	if tun == 0 {
		t.Fatalf("pasta (a child of the helper %d: %q) holds no /dev/net/tun", helper, children)
	}
	if fds := tunFds(t, strconv.Itoa(helper)); len(fds) > 0 {
		t.Errorf("the helper keeps the interface: %v", fds)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", helper))
	must(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", helper, e.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && f[0] == "tfd:" {
				for _, kv := range f {
					if v, ok := strings.CutPrefix(kv, "ino:"); ok && v == strconv.FormatUint(tun, 16) {
						t.Errorf("the helper's epoll set %s watches the interface: %s", e.Name(), line)
					}
				}
			}
		}
	}
}

// tunFds are the /proc/PID/fd paths of pid's descriptors of /dev/net/tun.
func tunFds(t *testing.T, pid string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + pid + "/fd")
	must(t, err)
	var out []string
	for _, e := range ents {
		p := "/proc/" + pid + "/fd/" + e.Name()
		// pasta's own root is elsewhere: it reads /net/tun.
		if target, _ := os.Readlink(p); strings.HasSuffix(target, "/net/tun") {
			out = append(out, p)
		}
	}
	return out
}
