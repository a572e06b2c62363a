package container

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/procstat"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/userns"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"golang.org/x/sys/unix"
)

// coveBin is a static cove built once: the containers' init.
var coveBin string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == userns.HelperArg {
		// A rootless pull (TestRunKeepID's) extracts in this binary,
		// re-executed as the user namespace helper.
		userns.Main(os.Args[2:], map[string]userns.Task{image.ExtractTask: image.Extract})
	}
	if bin := os.Getenv(keepIDChild); bin != "" {
		// TestRunKeepID's rootless side: its parent built cove.
		coveBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "cove-container-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	coveBin = filepath.Join(dir, "cove")
	cmd := exec.Command("go", "build", "-o", coveBin, "../cmd/cove")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (the rootless path is tested through the CLI as the covetest user)")
	}
}

// testImage flattens busybox plus extra layers into a fresh store and
// returns the image and its config.
func testImage(t *testing.T, cfg func(*v1.Config), extra ...testimage.Entry) (*image.Image, v1.Config) {
	t.Helper()
	base, err := testimage.BusyboxLayer()
	must(t, err)
	layers := []v1.Layer{base}
	if len(extra) > 0 {
		l, err := testimage.Layer(extra...)
		must(t, err)
		layers = append(layers, l)
	}
	img, err := testimage.Image(runtime.GOARCH, layers...)
	must(t, err)
	if cfg != nil {
		cf, err := img.ConfigFile()
		must(t, err)
		cf = cf.DeepCopy()
		cfg(&cf.Config)
		img, err = mutate.ConfigFile(img, cf)
		must(t, err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	must(t, err)
	must(t, lp.AppendImage(img))
	s, err := image.Open(filepath.Join(dir, "store"))
	must(t, err)
	stored, err := image.Pull(context.Background(), s, "oci:"+filepath.Join(dir, "layout"))
	must(t, err)
	cf, err := s.ConfigFile(stored)
	must(t, err)
	return stored, cf.Config
}

// run is one container run's outcome.
type run struct {
	code           int
	oom            bool
	stdout, stderr string
	err            error
}

// runIn runs args in a container of img, with edit applied to the spec.
func runIn(t *testing.T, img *image.Image, cfg v1.Config, limits Limits, edit func(*Spec), args ...string) run {
	t.Helper()
	proc, err := ProcessFromImage(cfg, args, nil, "", "")
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n127.0.1.1 box\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644))
	spec := &Spec{
		ID: fmt.Sprintf("test%d", time.Now().UnixNano()), Name: "box", Hostname: "box",
		Lower: img.RootFS, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged"),
		Binary: coveBin, ResolvConf: filepath.Join(dir, "resolv.conf"), Hosts: filepath.Join(dir, "hosts"),
		Net: "host", UserNS: os.Geteuid() != 0, Process: proc,
	}
	if edit != nil {
		edit(spec)
	}
	var out, errb bytes.Buffer
	c, err := Start(spec, Stdio{Stdin: strings.NewReader("piped stdin\n"), Stdout: &out, Stderr: &errb}, limits, func(string) {})
	if err != nil {
		return run{err: err, code: 125}
	}
	code, oom, err := c.Wait()
	return run{code: code, oom: oom, stdout: out.String(), stderr: errb.String(), err: err}
}

func (r run) ok(t *testing.T) run {
	t.Helper()
	if r.err != nil || r.code != 0 {
		t.Fatalf("exit %d, err %v\nstdout: %s\nstderr: %s", r.code, r.err, r.stdout, r.stderr)
	}
	return r
}

func TestRunExitStatusAndInit(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	if r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", "exit 3"); r.code != 3 || r.err != nil {
		t.Errorf("exit 3: got %d %v", r.code, r.err)
	}
	if r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", "kill -9 $$"); r.code != 137 {
		t.Errorf("killed by SIGKILL: got %d, want 137", r.code)
	}
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", `
		readlink /proc/1/exe || echo init-hidden; tr '\0' ' ' < /proc/1/cmdline; echo; hostname; [ $$ != 1 ] && echo not-pid-1; cat
		# an orphan that exits: init must reap it
		sh -c 'sleep 0.1 & exit 0'; sleep 0.4
		grep -l "^State:.*Z" /proc/[0-9]*/status || echo no-zombies
		# its own session, no controlling terminal (no TIOCSTI into ours)
		set -- $(cat /proc/$$/stat); [ "$6" = $$ ] && [ "$7" = 0 ] && echo own-session
		ls /proc/self/fd | tr '\n' ' '`).ok(t)
	// init is PID 1, executed once (no stage 2 exec: the launcher bound
	// its binary read-only), and with capabilities the workload lacks it
	// cannot even read where init's binary is
	want := "init-hidden\ncove init \nbox\nnot-pid-1\npiped stdin\nno-zombies\nown-session\n0 1 2 3 "
	if r.stdout != want {
		t.Errorf("stdout %q, want %q", r.stdout, want)
	}
}

// TestRunQuickExits starts workloads that are done at once, many times:
// each must be tracked, report its status and leave no cgroup.
func TestRunQuickExits(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	for i := range 30 {
		proc, err := ProcessFromImage(cfg, []string{"true"}, nil, "", "")
		must(t, err)
		dir := t.TempDir()
		spec := &Spec{ID: fmt.Sprintf("quick%d-%d", i, time.Now().UnixNano()), Hostname: "box", Lower: img.RootFS,
			Upper: dir + "/u", Work: dir + "/w", Merged: dir + "/m", Binary: coveBin, Net: "host", Process: proc}
		c, err := Start(spec, Stdio{}, Limits{Memory: 64 << 20}, func(string) {})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if c.Identity.StartTime == 0 || c.Identity.ExeIno == 0 {
			t.Fatalf("run %d: init not tracked: %+v", i, c.Identity)
		}
		paths := c.CgroupPaths()
		if code, _, err := c.Wait(); code != 0 || err != nil {
			t.Fatalf("run %d: exit %d, %v", i, code, err)
		}
		for _, p := range paths {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("run %d left its cgroup %s", i, p)
			}
		}
	}
}

func TestRunSignalsReachTheWorkload(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sh", "-c", `trap 'echo got TERM; exit 7' TERM; echo ready; while true; do sleep 0.05; done`}, nil, "", "")
	must(t, err)
	dir := t.TempDir()
	spec := &Spec{ID: "sig", Hostname: "box", Lower: img.RootFS, Upper: dir + "/u", Work: dir + "/w", Merged: dir + "/m",
		Binary: coveBin, Net: "host", Process: proc}
	var out bytes.Buffer
	c, err := Start(spec, Stdio{Stdout: &out, Stderr: &out}, Limits{}, func(string) {})
	must(t, err)
	for i := 0; i < 100 && !strings.Contains(out.String(), "ready"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	must(t, c.Signal(unix.SIGTERM))
	code, _, err := c.Wait()
	if code != 7 || !strings.Contains(out.String(), "got TERM") {
		t.Fatalf("after SIGTERM: exit %d (%v), output %q", code, err, out.String())
	}
}

func TestRunHostBinaryIsReadOnly(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	before, err := os.ReadFile(coveBin)
	must(t, err)
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", `
		for f in /proc/1/exe /.cove/init /.cove/cove /proc/self/exe; do
			if (echo pwned >> $f) 2>/dev/null; then echo "wrote $f"; else echo "refused $f"; fi
		done`)
	after, err := os.ReadFile(coveBin)
	must(t, err)
	if sha256.Sum256(before) != sha256.Sum256(after) {
		t.Fatal("the host's cove binary changed")
	}
	if strings.Contains(r.stdout, "wrote /proc/1/exe") || strings.Contains(r.stdout, "wrote /.cove/") {
		t.Fatalf("a write reached cove's binary:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "refused /proc/1/exe") || !strings.Contains(r.stdout, "refused /.cove/init") {
		t.Fatalf("output %q", r.stdout)
	}
}

// TestRunOneExecLeavesHostMounts: as root, init is executed once and runs
// from the launcher's read-only bind of the binary, which stays in the
// launcher thread's own mount namespace: the host's mount table is as it
// was, and the binary on the host is as writable as before.
func TestRunOneExecLeavesHostMounts(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	before, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", `tr '\0' ' ' < /proc/1/cmdline; if (: >> /proc/1/exe) 2>/dev/null; then echo wrote; else echo refused; fi`).ok(t)
	if r.stdout != "cove init refused\n" {
		t.Fatalf("stdout %q, want init executed once (no --stage2) and its binary refused", r.stdout)
	}
	after, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	if string(before) != string(after) {
		t.Fatalf("the host's mounts changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	f, err := os.OpenFile(coveBin, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("the host's binary is no longer writable on the host: %v", err)
	}
	f.Close()
}

func TestRunNoLeakedDescriptors(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	// A descriptor without close-on-exec, as a careless caller might leak.
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(t, err)
	defer unix.Close(fd)
	r := runIn(t, img, cfg, Limits{}, nil, "ls", "/proc/self/fd").ok(t)
	if got := strings.Fields(r.stdout); strings.Join(got, " ") != "0 1 2 3" {
		t.Fatalf("descriptors in the workload: %v (fd %d leaked?)", got, fd)
	}
	r = runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Process.Cwd = fmt.Sprintf("/proc/self/fd/%d", fd) }, "pwd")
	var se *StartError
	if !errors.As(r.err, &se) || !strings.Contains(r.err.Error(), "working directory") {
		t.Fatalf("WorkingDir /proc/self/fd/N: %+v", r)
	}
}

func TestRunImageConfig(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, func(c *v1.Config) {
		c.Env = append(c.Env, "FROM_IMAGE=yes")
		c.WorkingDir = "/srv/app"
		c.User = "nobody"
		c.Entrypoint = []string{"/bin/sh", "-c"}
		c.Cmd = []string{"echo default"}
	})
	r := runIn(t, img, cfg, Limits{}, nil).ok(t)
	if r.stdout != "default\n" {
		t.Errorf("Entrypoint+Cmd: %q", r.stdout)
	}
	r = runIn(t, img, cfg, Limits{}, nil, `echo $FROM_IMAGE $(pwd) $(id -u):$(id -g) $HOME`).ok(t)
	if r.stdout != "yes /srv/app 65534:65534 /\n" {
		t.Errorf("Env, WorkingDir, User: %q", r.stdout)
	}
}

func TestRunNetNone(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = "none" }, "sh", "-c", "ip -o link | cut -d: -f2; ip -o addr show lo | grep -c 127.0.0.1").ok(t)
	if strings.Fields(r.stdout)[0] != "lo" || len(strings.Fields(r.stdout)) != 2 || strings.Fields(r.stdout)[1] != "1" {
		t.Fatalf("links in --net none: %q, want lo only, up with 127.0.0.1", r.stdout)
	}
}

// TestRunSymlinkedMountTargets: an image whose mount targets are symlinks
// to host paths gets the mounts inside its root; the host is untouched.
func TestRunSymlinkedMountTargets(t *testing.T) {
	needRoot(t)
	outside := t.TempDir()
	canary := filepath.Join(t.TempDir(), "resolv.conf")
	must(t, os.WriteFile(canary, []byte("canary\n"), 0o644))
	// /dev and /.cove are tmpfs mounts init fills relative to their own
	// root (freshFS): the tmpfs lands inside the root, where the image's
	// symlink leads there, and what goes in it too.
	// (/dev's target not under /tmp, which init mounts over afterwards.)
	outsideDev, err := os.MkdirTemp("/var/tmp", "cove-test-dev-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(outsideDev) })
	outsideCove := t.TempDir()
	img, cfg := testImage(t, nil,
		testimage.Symlink("etc/resolv.conf", canary),
		testimage.Symlink("data", outside),
		testimage.Symlink("dev", outsideDev),
		testimage.Symlink(".cove", outsideCove),
	)
	hostDir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(hostDir, "hello"), []byte("from the host\n"), 0o644))
	r := runIn(t, img, cfg, Limits{}, func(s *Spec) {
		s.Binds = []Bind{{Source: hostDir, Target: "/data", ReadOnly: true}}
	}, "sh", "-c", `cat /etc/resolv.conf; cat /data/hello; (echo x > /data/new) 2>/dev/null || echo read-only; head -c 3 /dev/zero | wc -c; test -c `+outsideDev+`/null && echo dev`).ok(t)
	if r.stdout != "nameserver 127.0.0.1\nfrom the host\nread-only\n3\ndev\n" {
		t.Errorf("inside: %q (stderr %q)", r.stdout, r.stderr)
	}
	for _, d := range []string{outsideDev, outsideCove} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("the host dir %s behind the image's symlink got %d entries", d, len(entries))
		}
	}
	if b, _ := os.ReadFile(canary); string(b) != "canary\n" {
		t.Errorf("the host file behind the symlink changed: %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 0 {
		t.Errorf("the host dir behind the symlinks got %d entries", len(entries))
	}
	// A target that loops cannot be resolved: the start fails, saying which.
	img, cfg = testImage(t, nil, testimage.Symlink("tmp", outside))
	r = runIn(t, img, cfg, Limits{}, nil, "true")
	if r.err == nil || !strings.Contains(r.err.Error(), "mount /tmp") {
		t.Errorf("a looping /tmp symlink: %+v", r)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the host dir behind the symlink got %d entries", len(entries))
	}
}

// TestBindBeneathFollowsNoSymlink: a bind opened beneath a directory the
// workspace writes (Bind.Beneath) binds what is there, and refuses, without
// starting, a source that is a symlink or has one on its way, even to a
// path inside the directory: the host path behind it is never seen.
func TestBindBeneathFollowsNoSymlink(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	project, secret := t.TempDir(), t.TempDir()
	must(t, os.WriteFile(filepath.Join(secret, "key"), []byte("host secret\n"), 0o600))
	must(t, os.MkdirAll(filepath.Join(project, ".git", "objects", "ab"), 0o755))
	must(t, os.WriteFile(filepath.Join(project, ".git", "objects", "ab", "cd"), []byte("object\n"), 0o444))
	bind := func(rel string) func(*Spec) {
		return func(s *Spec) {
			s.Binds = []Bind{{Beneath: project, Source: rel, Target: "/.cove/origin", ReadOnly: true}}
		}
	}
	r := runIn(t, img, cfg, Limits{}, bind(".git/objects"), "sh", "-c", `cat /.cove/origin/ab/cd; (echo x > /.cove/origin/new) 2>/dev/null || echo read-only`).ok(t)
	if r.stdout != "object\nread-only\n" {
		t.Errorf("the bind: %q (stderr %q)", r.stdout, r.stderr)
	}
	must(t, os.Symlink(secret, filepath.Join(project, "out")))
	must(t, os.Symlink(".git", filepath.Join(project, "in")))
	for _, rel := range []string{"out", "in/objects", "../" + filepath.Base(secret), secret} {
		r := runIn(t, img, cfg, Limits{}, bind(rel), "cat", "/.cove/origin/key")
		if r.err == nil || !strings.Contains(r.err.Error(), "without following a symlink") || strings.Contains(r.stdout, "secret") {
			t.Errorf("a bind of %s beneath the project: %+v", rel, r)
		}
	}
}

func TestRunMemoryLimit(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	r := runIn(t, img, cfg, Limits{Memory: 32 << 20}, nil, "sh", "-c", `x=a; while true; do x="$x$x"; done`)
	if r.code != 137 || !r.oom {
		t.Fatalf("past the memory limit: exit %d, oom %v, err %v", r.code, r.oom, r.err)
	}
	// The limit kills the process that grew, not init: the shell that
	// started it goes on and says so. Init, there for the container's life,
	// gives back the pages it touched while it set up (internal/shed): it
	// had 24 MB resident, and /dev/shm filled first leaves dd's buffer only
	// some 14 MB, so the kernel chose init and the whole container went,
	// printing nothing. Once in CI the kernel then killed init too, in the
	// same second, before dd's memory was freed (a second OOM kill in that
	// window; init was by then the largest left, at 5 MB): the shell's line
	// is the outcome that tells, its exit status is logged.
	r = runIn(t, img, cfg, Limits{Memory: 48 << 20}, nil, "sh", "-c",
		`head -c 28m /dev/zero >/dev/shm/fill; dd if=/dev/zero of=/dev/null bs=24M count=4 2>/dev/null; echo "survived $?"`)
	if r.stdout != "survived 137\n" || !r.oom {
		t.Fatalf("a process past the memory limit beside its shell: exit %d, stdout %q, oom %v, err %v; want the shell to see it killed", r.code, r.stdout, r.oom, r.err)
	}
	if r.code != 0 {
		t.Logf("the shell saw the process killed; the container then exited %d (a second OOM kill)", r.code)
	}
	r = runIn(t, img, cfg, Limits{Memory: 32 << 20, PIDs: 16}, nil, "sh", "-c", "echo fine").ok(t)
	if r.stdout != "fine\n" {
		t.Fatalf("%q", r.stdout)
	}
}

// startSleeping starts a container whose workload sleeps for 100 s; the
// caller ends it.
func startSleeping(t *testing.T, id string) *Container {
	t.Helper()
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sleep", "100"}, nil, "", "")
	must(t, err)
	dir := t.TempDir()
	spec := &Spec{ID: id, Hostname: "box", Lower: img.RootFS, Upper: dir + "/u", Work: dir + "/w", Merged: dir + "/m",
		Binary: coveBin, Net: "host", Process: proc}
	c, err := Start(spec, Stdio{}, Limits{}, func(string) {})
	must(t, err)
	return c
}

func TestStatePIDReuse(t *testing.T) {
	needRoot(t)
	c := startSleeping(t, "reuse")
	st := &State{Name: "reuse"}
	st.SetIdentity(c)
	if st.Status() != Running {
		t.Fatal("a running container is not seen running")
	}
	c.Kill()
	c.Wait()
	if st.Status() != Exited {
		t.Fatal("a dead container is seen running")
	}
	// Another process now has "our" pid (we cannot make the kernel reuse
	// it on demand, so the record is pointed at a live stranger), even
	// with the same start time: the exe gives it away.
	other := exec.Command("sleep", "100")
	must(t, other.Start())
	defer other.Process.Kill()
	stranger := *st
	stranger.Pid = other.Process.Pid
	if stranger.Status() != Exited {
		t.Fatal("an unrelated process with the recorded pid is taken for the container")
	}
	var theirs State
	must(t, theirs.Track(other.Process.Pid))
	stranger.StartTime = theirs.StartTime
	if stranger.Status() != Exited {
		t.Fatal("an unrelated process with the recorded pid and start time is taken for the container")
	}
}

func TestStateNamesAreUnique(t *testing.T) {
	d := StateDir(t.TempDir())
	errs := make(chan error, 8)
	for range 8 {
		go func() { errs <- d.Create("x") }()
	}
	won := 0
	for range 8 {
		err := <-errs
		if err == nil {
			won++
		} else if !errors.Is(err, ErrNameInUse) {
			t.Errorf("unexpected error %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d launchers got the name, want 1", won)
	}
	if err := d.Create("../x"); err == nil {
		t.Fatal("a name with a slash was accepted")
	}
}

func TestProcessFromImage(t *testing.T) {
	cfg := v1.Config{Entrypoint: []string{"/ep"}, Cmd: []string{"default"}, Env: []string{"A=1", "PATH=/bin"}, WorkingDir: "/w", User: "app"}
	p, err := ProcessFromImage(cfg, []string{"x", "y"}, []string{"A=2", "B=3"}, "", "")
	must(t, err)
	if strings.Join(p.Args, " ") != "/ep x y" || strings.Join(p.Env, " ") != "A=2 PATH=/bin B=3" || p.Cwd != "/w" || p.User != "app" {
		t.Fatalf("%+v", p)
	}
	if _, err := ProcessFromImage(v1.Config{}, nil, nil, "", ""); err == nil {
		t.Fatal("no command accepted")
	}
}

func TestLookupUser(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	must(t, os.WriteFile(passwd, []byte("root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"+strings.Repeat("x", 70000)+"\n"), 0o644))
	must(t, os.WriteFile(group, []byte("app:x:1000:\ndocker:x:999:app,other\n"), 0o644))
	u, err := lookupUser("app", passwd, group)
	must(t, err)
	if u.UID != 1000 || u.GID != 1000 || u.Home != "/home/app" || len(u.Groups) != 2 || u.Groups[1] != 999 {
		t.Fatalf("%+v", u)
	}
	if u, err := lookupUser("1000:docker", passwd, group); err != nil || u.GID != 999 {
		t.Fatalf("1000:docker: %+v %v", u, err)
	}
	if _, err := lookupUser("nobody", passwd, group); err == nil {
		t.Fatal("an unknown user was accepted")
	}
}

// TestRunTerminal gives the workload a terminal made in the container's own
// devpts, and talks to it through the master that init passes out.
func TestRunTerminal(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sh", "-c", `tty; read line; echo "got $line"; exit 9`}, nil, "", "nobody")
	must(t, err)
	proc.Terminal = true
	dir := t.TempDir()
	spec := &Spec{ID: "tty", Hostname: "box", Lower: img.RootFS, Upper: dir + "/u", Work: dir + "/w", Merged: dir + "/m",
		Binary: coveBin, Net: "host", Process: proc}
	c, err := Start(spec, Stdio{}, Limits{}, func(string) {})
	must(t, err)
	if c.Console == nil {
		t.Fatal("no console")
	}
	defer c.Console.Close()
	if _, err := c.Console.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	out := make(chan string)
	go func() {
		var b bytes.Buffer
		buf := make([]byte, 256)
		for {
			n, err := c.Console.Read(buf)
			b.Write(buf[:n])
			if err != nil || strings.Contains(b.String(), "got hello") {
				out <- b.String()
				return
			}
		}
	}()
	code, _, err := c.Wait()
	got := <-out
	if code != 9 || !strings.Contains(got, "/dev/pts/0") || !strings.Contains(got, "got hello") {
		t.Fatalf("exit %d (%v), terminal output %q", code, err, got)
	}
}

// TestRunWithoutOverlay takes the copy path of hosts without overlayfs:
// the container gets its own root, and the image stays as it was.
func TestRunWithoutOverlay(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Copy = true }, "sh", "-c", "rm /bin/ls && echo changed > /etc/passwd && echo done").ok(t)
	if r.stdout != "done\n" {
		t.Fatalf("%q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(img.RootFS, "bin/ls")); err != nil {
		t.Fatal("the image lost /bin/ls")
	}
	if b, _ := os.ReadFile(filepath.Join(img.RootFS, "etc/passwd")); strings.Contains(string(b), "changed") {
		t.Fatal("the image's /etc/passwd changed")
	}
}

// TestRunDropsCapabilities: root in a container cannot mount, make device
// nodes or load modules; it can still chown and bind low ports.
func TestRunDropsCapabilities(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", `
		mknod /tmp/sda b 8 0 2>/dev/null && echo mknod-worked
		mount -t tmpfs none /mnt 2>/dev/null && echo mount-worked
		touch /tmp/f && chown 1000 /tmp/f && echo chown-ok
		grep CapBnd /proc/self/status`).ok(t)
	if strings.Contains(r.stdout, "worked") || !strings.Contains(r.stdout, "chown-ok") {
		t.Fatalf("capabilities: %q", r.stdout)
	}
	var want uint64
	for _, c := range keptCaps {
		want |= 1 << c
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%016x", want)) {
		t.Fatalf("bounding set %q, want %016x", r.stdout, want)
	}
}

// TestRunSeccompFilter: the workload runs under the filter (and cannot
// make a user namespace, the door to most kernel privilege escalations),
// while forks, threads and execs work as always; without it
// (NoSeccomp), the namespace can be made.
func TestRunSeccompFilter(t *testing.T) {
	needRoot(t)
	img, cfg := testImage(t, nil)
	script := `
		grep '^Seccomp:' /proc/self/status
		unshare -U true 2>/dev/null && echo userns-made || echo userns-refused
		(echo from-a-subshell) | cat`
	r := runIn(t, img, cfg, Limits{}, nil, "sh", "-c", script).ok(t)
	if !strings.Contains(r.stdout, "Seccomp:\t2") || !strings.Contains(r.stdout, "userns-refused") || !strings.Contains(r.stdout, "from-a-subshell") {
		t.Fatalf("with the filter: %q", r.stdout)
	}
	r = runIn(t, img, cfg, Limits{}, func(s *Spec) { s.NoSeccomp = true }, "sh", "-c", script).ok(t)
	if !strings.Contains(r.stdout, "Seccomp:\t0") || !strings.Contains(r.stdout, "userns-made") {
		t.Fatalf("without the filter: %q", r.stdout)
	}
}

// TestIdleInitSleeps: a container's init that has nothing to do does not
// wake up for nothing (many agents at once are many idle inits): its poll
// for exited children, 4 times a second, woke its threads 86 times in 4 s
// (the runtime's sysmon stays awake while a timer is that close).
func TestIdleInitSleeps(t *testing.T) {
	needRoot(t)
	c := startSleeping(t, "idle")
	defer func() {
		c.Kill()
		c.Wait()
	}()
	pid := c.cmd.Process.Pid
	switches := func() int {
		n, err := procstat.Wakes(pid)
		must(t, err)
		return n
	}
	time.Sleep(time.Second) // its start's work done
	before := switches()
	const idle = 4 * time.Second
	time.Sleep(idle)
	if woke := switches() - before; woke > 8 {
		t.Errorf("an idle init woke %d times in %s, want a few at most", woke, idle)
	} else {
		t.Logf("an idle init woke %d times in %s", woke, idle)
	}
}
