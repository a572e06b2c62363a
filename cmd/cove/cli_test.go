package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testbuf"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/cove-sh/cove/workspace"
	"github.com/creack/pty"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// coveBin is the cove binary built once for the tests that need a real
// process (kill -9, several processes at once).
var coveBin string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == userns.HelperArg {
		// cove run in this process, rootless, re-executes it as the helper.
		userns.Main(os.Args[2:], helperTasks())
	}
	dir, err := os.MkdirTemp("", "cove-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // TestRootlessPull runs it as another user
	coveBin = filepath.Join(dir, "cove")
	// As it is released: with its inside program (a container's init).
	out, err := exec.Command("../../scripts/build.sh", coveBin).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scripts/build.sh: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one cove run printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// cove runs the CLI in-process with root as COVE_ROOT.
func cove(t *testing.T, root string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"cove", "--root", root}, args...), &out, &errb)
	return result{out.String(), errb.String(), code}
}

// coveProc starts the built binary with root as COVE_ROOT.
func coveProc(root string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(coveBin, args...)
	cmd.Env = append(os.Environ(), "COVE_ROOT="+root)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

func layered(t *testing.T) v1.Image {
	t.Helper()
	img, err := testimage.Layered()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var digestLine = regexp.MustCompile(`^sha256:[0-9a-f]{64}\n$`)

func TestVersion(t *testing.T) {
	t.Parallel()
	r := cove(t, t.TempDir(), "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "cove ") || !strings.Contains(r.stdout, "go1.") {
		t.Fatalf("version: %+v", r)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	for _, c := range app.Commands {
		r := cove(t, t.TempDir(), c.Name, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "USAGE") {
			t.Errorf("cove %s --help: %+v", c.Name, r)
		}
		if c.Usage == "" {
			t.Errorf("cove %s has no usage line", c.Name)
		}
	}
}

func TestPullImagesRmiPrune(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	img := layered(t)
	ref := testregistry.Push(t, addr, img)
	want, _ := img.Digest()
	root := t.TempDir()

	r := cove(t, root, "pull", ref)
	if r.code != 0 || !digestLine.MatchString(r.stdout) || strings.TrimSpace(r.stdout) != want.String() {
		t.Fatalf("pull: %+v, want the digest %s alone on stdout", r, want)
	}
	if strings.Count(r.stderr, ": done\n") != 3 {
		t.Errorf("pull's progress without a terminal should be a line per layer: %q", r.stderr)
	}
	if r := cove(t, root, "pull", "-q", ref); r.code != 0 || r.stderr != "" || strings.TrimSpace(r.stdout) != want.String() {
		t.Errorf("quiet pull of a stored image: %+v", r)
	}

	r = cove(t, root, "images", "--json")
	var list []imageJSON
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 {
		t.Fatalf("images --json: %v %+v", err, r)
	}
	if len(list) != 1 || list[0].Digest != want.String() || list[0].Ref != ref || list[0].Size < 1<<20 {
		t.Fatalf("images --json = %+v", list)
	}
	if _, err := os.Stat(filepath.Join(list[0].RootFS, "bin/busybox")); err != nil {
		t.Fatalf("rootfs from images --json: %v", err)
	}
	if r := cove(t, root, "images"); !strings.Contains(r.stdout, want.Hex[:12]) {
		t.Errorf("images table lacks the digest: %q", r.stdout)
	}

	if r := cove(t, root, "rmi", ref); r.code != 0 {
		t.Fatalf("rmi: %+v", r)
	}
	if _, err := os.Stat(list[0].RootFS); !os.IsNotExist(err) {
		t.Fatalf("rmi left the rootfs: %v", err)
	}
	if r := cove(t, root, "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 0 images and 0 blobs") {
		t.Fatalf("prune: %+v", r)
	}
	if r := cove(t, root, "images", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("images after rmi: %q", r.stdout)
	}
}

// TestErrorsAreOneLine checks DESIGN's error contract: one stderr line
// naming the thing and what to do, exit status 1.
func TestErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	root := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"pull", addr + "/nothing/here:latest"}, "no such image"},
		{[]string{"pull", "Bad Ref"}, "parse reference"},
		{[]string{"pull", "--platform", "linux", addr + "/x:y"}, "--platform"},
		{[]string{"pull", "--pull", "sometimes", "x"}, "unknown pull policy"},
		{[]string{"rmi", "not-pulled:latest"}, "cove pull not-pulled:latest"},
		{[]string{"pull"}, "one image reference"},
	}
	for _, tc := range cases {
		r := cove(t, root, tc.args...)
		if r.code != 1 {
			t.Errorf("cove %v: exit %d, want 1", tc.args, r.code)
		}
		if !strings.HasPrefix(r.stderr, "cove: ") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("cove %v: stderr %q, want one line saying %q", tc.args, r.stderr, tc.want)
		}
	}
}

// TestConcurrentPullProcesses runs two cove processes pulling one image:
// both succeed and the layers are extracted once.
func TestConcurrentPullProcesses(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd, out, errb := coveProc(root, "pull", ref)
			if err := cmd.Run(); err != nil {
				t.Errorf("pull %d: %v: %s", i, err, errb)
			}
			outs[i], errs[i] = out.String(), errb.String()
		}()
	}
	wg.Wait()
	if outs[0] != outs[1] || !digestLine.MatchString(outs[0]) {
		t.Fatalf("the two pulls printed %q and %q", outs[0], outs[1])
	}
	if n := strings.Count(errs[0]+errs[1], ": done\n"); n != 3 {
		t.Fatalf("%d layer extractions for two pulls of a 3-layer image, want 3:\n%s\n%s", n, errs[0], errs[1])
	}
}

// TestKilledPullResumes kills a pull with SIGKILL while its last layer
// downloads: nothing may look like a complete image, and the next pull
// must reuse the blobs that were complete.
func TestKilledPullResumes(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	base := layered(t)
	noise := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{1}).Read(noise) // incompressible, so the blob is big
	big, err := testimage.Layer(testimage.File("noise", string(noise), 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(base, big)
	if err != nil {
		t.Fatal(err)
	}
	bigDigest, _ := big.Digest()
	ref := testregistry.Push(t, addr, img)
	p := testregistry.NewProxy(t, addr)
	started := make(chan struct{}, 1)
	p.SetBreakBlob(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasSuffix(r.URL.Path, bigDigest.String()) {
			return false
		}
		b, err := p.Upstream(r)
		if err != nil {
			return false
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		for i := 0; i < len(b); i += 64 << 10 {
			w.Write(b[i:min(i+64<<10, len(b))])
			http.NewResponseController(w).Flush()
			select {
			case started <- struct{}{}:
			default:
			}
			time.Sleep(100 * time.Millisecond)
		}
		return true
	})
	root := t.TempDir()
	cmd, _, errb := coveProc(root, "pull", "--jobs", "1", p.Ref(ref))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the big layer was never requested: %s", errb)
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	if r := cove(t, root, "images", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("after kill -9, images lists %s", r.stdout)
	}
	imgDirs, _ := filepath.Glob(filepath.Join(root, "images", "images", "[0-9a-f]*"))
	if len(imgDirs) != 0 {
		t.Fatalf("after kill -9, a final image directory exists: %v", imgDirs)
	}
	blobs, _ := filepath.Glob(filepath.Join(root, "images", "blobs", "sha256", "*"))
	if len(blobs) != 3 {
		t.Fatalf("after kill -9, %d complete blobs cached, want the 3 small layers", len(blobs))
	}

	p.SetBreakBlob(nil)
	before := p.Blobs.Load()
	r := cove(t, root, "pull", p.Ref(ref))
	if r.code != 0 {
		t.Fatalf("pull after kill -9: %+v", r)
	}
	if n := p.Blobs.Load() - before; n != 2 {
		t.Fatalf("the resumed pull fetched %d blobs, want the config and the one unfinished layer", n)
	}
	left, _ := filepath.Glob(filepath.Join(root, "images", "images", ".tmp-*"))
	blobs, _ = filepath.Glob(filepath.Join(root, "images", "blobs", "sha256", "*"))
	if len(left) != 0 || len(blobs) != 0 {
		t.Fatalf("the resumed pull left %v %v", left, blobs)
	}
}

// TestUnwritableStore checks the message when the store cannot be created.
func TestUnwritableStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	r := cove(t, filepath.Join(file, "root"), "images")
	if r.code != 1 || !strings.Contains(r.stderr, "image store") {
		t.Fatalf("images with an impossible root: %+v", r)
	}
}

// TestRootlessPull runs cove as an unprivileged user with subordinate
// ids: the pull works, and each file of the rootfs belongs to its owner
// in the image mapped through the user's ranges, as a container sees it
// (root's files the user's, uid 1000's the range's start + 999), so the
// image's own users own what the image gives them; setuid stays.
func TestRootlessPull(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run cove as the covetest user")
	}
	u, uid, gid := testUser(t)
	sub, ok1 := userns.SubIDs("/etc/subuid", uid)
	subg, ok2 := userns.SubIDs("/etc/subgid", uid)
	if !ok1 || !ok2 {
		t.Skip("covetest has no subordinate ids (scripts/test.sh gives them)")
	}
	ref := testregistry.Push(t, addr, layered(t))
	root, err := os.MkdirTemp("", "cove-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chown(root, uid, gid); err != nil {
		t.Fatal(err)
	}
	cmd, out, errb := coveProc(root, "pull", ref)
	asTestUser(cmd, u, uid, gid)
	if err := cmd.Run(); err != nil {
		t.Fatalf("rootless pull: %v\n%s", err, errb)
	}
	if !digestLine.MatchString(out.String()) {
		t.Fatalf("stdout %q", out)
	}
	if strings.Contains(errb.String(), "stored as yours") {
		t.Errorf("a note on dropped owners, with subordinate ids to keep them: %q", errb)
	}
	rootfs := filepath.Join(root, "images", "images", strings.TrimPrefix(strings.TrimSpace(out.String()), "sha256:"), "rootfs")
	n := 0
	err = filepath.Walk(rootfs, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		wantUID, wantGID := uid, gid
		if strings.HasSuffix(p, "/srv/data/owned") {
			wantUID, wantGID = sub.Start+999, subg.Start+999
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != wantUID || int(st.Gid) != wantGID {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, wantUID, wantGID)
		}
		n++
		return nil
	})
	if err != nil || n < 100 {
		t.Fatalf("walked %d paths: %v", n, err)
	}
	fi, err := os.Stat(filepath.Join(rootfs, "usr/bin/suid-tool"))
	if err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("setuid bit lost in the rootless pull: %v %v", fi, err)
	}
	// Everything the store holds, the user removes.
	cmd, _, errb = coveProc(root, "rmi", ref)
	asTestUser(cmd, u, uid, gid)
	if err := cmd.Run(); err != nil {
		t.Fatalf("rootless rmi: %v\n%s", err, errb)
	}
	if _, err := os.Stat(filepath.Dir(rootfs)); !os.IsNotExist(err) {
		t.Errorf("the image's directory after rmi: %v", err)
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// runProc runs the cove binary and returns its output and exit status.
func runProc(t *testing.T, root string, stdin string, args ...string) result {
	t.Helper()
	cmd, out, errb := coveProc(root, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A hang is a failure with a message, not a suite timeout.
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("cove %v hung for 2 minutes; stderr: %s", args, errb)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func TestRunContract(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	if r := runProc(t, root, "", "run", "--rm", ref, "sh", "-c", "exit 5"); r.code != 5 {
		t.Errorf("exit 5: %+v", r)
	}
	if r := runProc(t, root, "piped\n", "run", "--rm", "-i", ref, "cat"); r.code != 0 || r.stdout != "piped\n" {
		t.Errorf("stdin through with -i: %+v", r)
	}
	// As podman and Docker: without -i the command's stdin is empty.
	if r := runProc(t, root, "piped\n", "run", "--rm", ref, "cat"); r.code != 0 || r.stdout != "" {
		t.Errorf("stdin without -i: %+v", r)
	}
	// A command not found is 127, one that cannot run 126, as the peers say.
	r := runProc(t, root, "", "run", "--rm", ref, "no-such-command")
	if r.code != 127 || !strings.HasPrefix(r.stderr, "cove: ") || !strings.Contains(r.stderr, "no-such-command") {
		t.Errorf("a missing command: %+v, want 127 and one line naming it", r)
	}
	if r := runProc(t, root, "", "run", "--rm", ref, "/etc/passwd"); r.code != 126 {
		t.Errorf("a command that cannot run: %+v, want 126", r)
	}
	// -e VAR with VAR unset here leaves it out, as the peers do.
	if r := runProc(t, root, "", "run", "--rm", "-e", "COVE_SURELY_UNSET_VAR", ref, "sh", "-c", "echo ${COVE_SURELY_UNSET_VAR-unset}"); r.stdout != "unset\n" {
		t.Errorf("-e of an unset variable: %+v", r)
	}
	// --shm-size, --ulimit and --add-host, as podman's.
	if r := runProc(t, root, "", "run", "--rm", "--shm-size", "100m", "--ulimit", "nofile=300:400", "--add-host", "db.test:10.1.2.3", "--device", "/dev/fuse:/dev/fuse:rw", "--tmpfs", "/data:size=1m,mode=700,exec", ref, "sh", "-c",
		"grep ' /dev/shm ' /proc/mounts | grep -o 'size=[0-9]*k'; grep '^Max open files' /proc/self/limits | tr -s ' '; grep db.test /etc/hosts; exec 3<>/dev/fuse && echo fuse; grep ' /data ' /proc/mounts | grep -oE 'noexec|size=[0-9]+k|mode=[0-7]+' | tr '\\n' ' '"); r.stdout != "size=102400k\nMax open files 300 400 files \n10.1.2.3\tdb.test\nfuse\nsize=1024k mode=700 " {
		t.Errorf("--shm-size, --ulimit, --add-host, --device: %+v", r)
	}
	for _, bad := range [][]string{{"--device", "/etc/passwd"}, {"--device", "/dev/fuse:/etc/fuse"}, {"--device", "/dev/fuse:rwx"}, {"--tmpfs", "/t:size=big"}, {"--tmpfs", "/:size=1m"}, {"--ulimit", "nofiles=1"}, {"--ulimit", "nofile=9:8"}, {"--add-host", "a b:1.2.3.4"}, {"--add-host", "gw:host-gateway"}, {"--shm-size", "big"}} {
		if r := runProc(t, root, "", append(append([]string{"run", "--rm"}, bad...), ref, "true")...); r.code != 125 || !strings.Contains(r.stderr, bad[0][2:]) {
			t.Errorf("%v: %+v", bad, r)
		}
	}
	if r := runProc(t, root, "", "run", "--rm", "--memory", "lots", ref, "true"); r.code != 125 || !strings.Contains(r.stderr, "--memory") {
		t.Errorf("a bad --memory: %+v", r)
	}
	// podman's and docker's spellings: --network for --net, sizes with units.
	if r := runProc(t, root, "", "run", "--rm", "--network", "none", ref, "sh", "-c", "ls /sys/class/net"); r.code != 0 || strings.TrimSpace(r.stdout) != "lo" {
		t.Errorf("--network none: %+v", r)
	}
	if r := runProc(t, root, "", "pull", "--max-size", "64g", ref); r.code != 0 {
		t.Errorf("--max-size 64g: %+v", r)
	}
	if r := runProc(t, root, "", "pull", "--max-size", "lots", ref); r.code != 1 || !strings.Contains(r.stderr, "--max-size") {
		t.Errorf("a bad --max-size: %+v", r)
	}
	// The seccomp filter is on unless lifted; an option cove does not know is refused.
	if r := runProc(t, root, "", "run", "--rm", ref, "grep", "^Seccomp:", "/proc/self/status"); r.stdout != "Seccomp:\t2\n" {
		t.Errorf("the workload's seccomp mode: %+v", r)
	}
	if r := runProc(t, root, "", "run", "--rm", "--security-opt", "seccomp=unconfined", ref, "grep", "^Seccomp:", "/proc/self/status"); r.stdout != "Seccomp:\t0\n" {
		t.Errorf("with seccomp=unconfined: %+v", r)
	}
	if r := runProc(t, root, "", "run", "--rm", "--security-opt", "apparmor=x", ref, "true"); r.code != 125 || !strings.Contains(r.stderr, "seccomp=unconfined") {
		t.Errorf("an unknown --security-opt: %+v", r)
	}
	left, _ := os.ReadDir(filepath.Join(root, "data", "containers"))
	states, _ := os.ReadDir(filepath.Join(root, "run", "containers"))
	if len(left) != 0 || len(states) != 0 {
		t.Errorf("--rm runs left %d container dirs and %d states", len(left), len(states))
	}
}

// TestDetachPsStopRm runs a container in the background that ignores
// SIGTERM, finds it with ps, stops it (the whole tree dies) and removes it.
func TestDetachPsStopRm(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	// A sleep time no other process has, to count the container's.
	nap := fmt.Sprint(100000 + time.Now().UnixNano()%100000)
	tree := `trap "" TERM; sleep ` + nap + ` & sleep ` + nap + ` & wait`
	r := runProc(t, root, "", "run", "-d", "--name", "web", ref, "sh", "-c", tree)
	if r.code != 0 || r.stdout != "web\n" {
		t.Fatalf("run -d: %+v", r)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", "web") })
	if r := runProc(t, root, "", "run", "-d", "--name", "web", ref, "true"); r.code != 125 || !strings.Contains(r.stderr, "name in use") {
		t.Errorf("a second container named web: %+v", r)
	}
	var list []psJSON
	r = runProc(t, root, "", "ps", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 1 || list[0].Name != "web" || list[0].Status != "running" || list[0].PID == 0 {
		t.Fatalf("ps --json: %v %q", err, r.stdout)
	}
	for i := 0; countProcs(t, "sleep "+nap) != 2; i++ {
		if i > 100 {
			t.Fatal("the container's two sleeps never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// exec: in the container's namespaces, environment and cgroup.
	if r := runProc(t, root, "from stdin\n", "exec", "-i", "web", "sh", "-c", "hostname; cat; exit 7"); r.code != 7 || r.stdout != "web\nfrom stdin\n" {
		t.Errorf("exec: %+v", r)
	}
	r = runProc(t, root, "", "exec", "web", "ls", "/proc")
	var pids []string
	for _, f := range strings.Fields(r.stdout) {
		if _, err := strconv.Atoi(f); err == nil {
			pids = append(pids, f)
		}
	}
	if len(pids) == 0 || pids[0] != "1" || len(pids) > 10 {
		t.Errorf("exec does not see the container's PID namespace: processes %v", pids)
	}
	if r := runProc(t, root, "", "exec", "web", "no-such-command"); r.code != 127 || !strings.Contains(r.stderr, "no-such-command") {
		t.Errorf("exec of a missing command: %+v, want 127 as a shell and podman exec give", r)
	}
	if r := runProc(t, root, "", "exec", "web", "/etc/passwd"); r.code != 126 || !strings.Contains(r.stderr, "/etc/passwd") {
		t.Errorf("exec of a file that is not a program: %+v, want 126", r)
	}
	var st struct{ Cgroup []string }
	b, _ := os.ReadFile(filepath.Join(root, "run", "containers", "web", "state.json"))
	json.Unmarshal(b, &st)
	start := time.Now()
	if r := runProc(t, root, "", "stop", "--time", "1", "web"); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("stop took %v", d)
	}
	if n := countProcs(t, "sleep "+nap); n != 0 {
		t.Fatalf("%d processes of the stopped container survive", n)
	}
	for _, p := range st.Cgroup {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("stop left the cgroup %s", p)
		}
	}
	if r := runProc(t, root, "", "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps after stop: %q", r.stdout)
	}
	if r := runProc(t, root, "", "ps", "--all"); !strings.Contains(r.stdout, "exited") {
		t.Errorf("ps --all after stop: %q", r.stdout)
	}
	if r := runProc(t, root, "", "exec", "web", "true"); r.code != 1 || !strings.Contains(r.stderr, "not running") {
		t.Errorf("exec into a stopped container: %+v", r)
	}
	if r := runProc(t, root, "", "rm", "web"); r.code != 0 {
		t.Fatalf("rm: %+v", r)
	}
	if r := runProc(t, root, "", "ps", "--all", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ps --all after rm: %q", r.stdout)
	}
}

// countProcs counts the host's processes whose command line is cmdline.
func countProcs(t *testing.T, cmdline string) int {
	t.Helper()
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, _ := os.ReadFile(d)
		if strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			n++
		}
	}
	return n
}

// TestRootlessRunKeepsOwnership runs a container as an unprivileged user:
// what it writes into a bound directory belongs to that user on the host.
func TestRootlessRunKeepsOwnership(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	u, uid, gid := testUser(t)
	ref := testregistry.Push(t, addr, layered(t))
	base := rootlessBase(t, "cove-rootless-run-")
	project := filepath.Join(base, "project")
	for _, d := range []string{project, filepath.Join(base, "root")} {
		os.Mkdir(d, 0o755)
		os.Chown(d, uid, gid)
	}
	cmd, out, errb := coveProc(filepath.Join(base, "root"), "run", "--rm", "-v", project+":/work", ref,
		"sh", "-c", "id -u; mkdir /work/dir && echo hi > /work/dir/file; touch /work/u1000 && chown 1000:1000 /work/u1000")
	asTestUser(cmd, u, uid, gid)
	if err := cmd.Run(); err != nil {
		t.Fatalf("rootless run: %v\n%s", err, errb)
	}
	if out.String() != "0\n" {
		t.Errorf("inside, the user is %q, want root (0)", out)
	}
	// This host's cgroups are v1 and root's: a limit cannot be enforced
	// for a user, and cove says so instead of running without it.
	if !cgroup2Delegated() {
		cmd, _, errb := coveProc(filepath.Join(base, "root"), "run", "--rm", "--memory", "64m", ref, "true")
		asTestUser(cmd, u, uid, gid)
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 125 || !strings.Contains(errb.String(), "cannot enforce limits") {
			t.Errorf("a rootless --memory on a host without delegated cgroups: %v %q", err, errb)
		}
	}
	owner := func(p string) (int, int) {
		fi, err := os.Stat(filepath.Join(project, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return int(st.Uid), int(st.Gid)
	}
	for _, p := range []string{"dir", "dir/file"} {
		if u, g := owner(p); u != uid || g != gid {
			t.Errorf("%s is owned by %d:%d on the host, want covetest %d:%d", p, u, g, uid, gid)
		}
	}
	// Other ids inside come from the user's subordinate range.
	if b, err := os.ReadFile("/etc/subuid"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			if len(f) == 3 && f[0] == "covetest" {
				start, _ := strconv.Atoi(f[1])
				if u, _ := owner("u1000"); u != start+999 {
					t.Errorf("uid 1000 inside is %d on the host, want %d (subuid start %d + 999)", u, start+999, start)
				}
			}
		}
	}
}

// TestRootRunKeepsTheOwnersFiles: root running a container on a directory
// that belongs to a user (sudo cove …) leaves what the container writes
// there to that user, through an ID-mapped bind.
func TestRootRunKeepsTheOwnersFiles(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	_, uid, _ := testUser(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "mine"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{project, filepath.Join(project, "mine")} {
		os.Chown(p, uid, uid)
	}
	r := runProc(t, t.TempDir(), "", "run", "--rm", "-v", project+":/src", ref, "sh", "-c", "stat -c %u /src/mine; echo new > /src/new; mkdir /src/dir")
	if r.code != 0 || r.stdout != "0\n" {
		t.Fatalf("inside, the owner's files should be root's: %+v", r)
	}
	for _, p := range []string{"new", "dir"} {
		fi, err := os.Stat(filepath.Join(project, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s is owned by %d on the host, want the directory's owner %d", p, st.Uid, uid)
		}
	}
}

// cgroup2Delegated says whether this host has a cgroup v2 hierarchy (where
// a user may have a delegated subtree).
func cgroup2Delegated() bool {
	var st syscall.Statfs_t
	return syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270
}

// rootlessBase makes a directory covetest can enter, removed after the
// test, for a COVE_ROOT or project of that user's.
func rootlessBase(t *testing.T, pattern string) string {
	t.Helper()
	base, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	return base
}

// asTestUser makes cmd run as covetest (u, from testUser), with its home.
func asTestUser(cmd *exec.Cmd, u *user.User, uid, gid int) {
	cmd.Env = append(cmd.Env, "HOME="+u.HomeDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
}

// testUser returns the unprivileged user scripts/test.sh creates.
func testUser(t *testing.T) (u *user.User, uid, gid int) {
	t.Helper()
	u, err := user.Lookup("covetest")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no covetest user: scripts/test.sh creates it")
		}
		t.Skip("no covetest user (useradd -m covetest)")
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return u, uid, gid
}

// TestDoctor runs the checks on this machine: every line says ok, missing
// or note, and the cgroup line says what this host has.
func TestDoctor(t *testing.T) {
	t.Parallel()
	r := cove(t, t.TempDir(), "doctor")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 6 {
		t.Fatalf("doctor: %+v", r)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) < 2 || (f[0] != "ok" && f[0] != "missing" && f[0] != "note") {
			t.Errorf("doctor line %q", l)
		}
	}
	want := "note     cgroup v2"
	if cgroup2Delegated() {
		want = "ok       cgroup v2"
	}
	if !strings.Contains(r.stdout, want) {
		t.Errorf("doctor on this host should say %q:\n%s", want, r.stdout)
	}
	if !strings.Contains(r.stdout, "ok       seccomp") {
		t.Errorf("doctor on this host should find seccomp:\n%s", r.stdout)
	}
}

// TestAgentOneShotInWorkspace runs `cove agent -p` against a scripted
// OpenAI-compatible server: the model runs the project's failing test in
// the workspace container, fixes the file, runs it again (it passes),
// and answers; the API key never reaches the container.
func TestAgentOneShotInWorkspace(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "greet.sh"), []byte("echo helo\n"), 0o644)
	os.WriteFile(filepath.Join(project, "test.sh"), []byte(`[ "$(sh greet.sh)" = hello ] && echo PASS || { echo FAIL; exit 1; }`+"\n"), 0o644)
	// A user's project, the agent run as root (sudo cove agent): the file
	// it rewrites stays the user's.
	const owner = 4242
	for _, p := range []string{project, filepath.Join(project, "greet.sh"), filepath.Join(project, "test.sh")} {
		os.Chown(p, owner, owner)
	}
	srv := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	srv.Push(
		toolCall("c1", "bash", map[string]any{"command": "sh test.sh"}),
		toolCall("c2", "edit", map[string]any{"path": "greet.sh", "edits": []any{map[string]any{"old": "echo helo", "new": "echo hello"}}}),
		toolCall("c3", "bash", map[string]any{"command": "sh test.sh && pwd && hostname && env | grep -c sk-test-key"}),
		// A command that hangs, and one in the background: both killed at
		// the timeout; the next command gets a new shell in the same place.
		toolCall("c4", "bash", map[string]any{"command": "cd /tmp && sleep 3131 & sleep 3132; echo never", "timeout": 1}),
		toolCall("c5", "bash", map[string]any{"command": "echo after-timeout-$((1+1)) in $PWD"}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Fixed the typo."})},
	)
	root := t.TempDir()
	cmd, out, errb := coveProc(root, "agent", "--image", ref, "--yes", "-p", "make test.sh pass", project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test-key")
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("cove agent: %v\n%s", err, errb)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	if out.String() != "Fixed the typo.\n" {
		t.Errorf("stdout %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "greet.sh")); string(b) != "echo hello\n" {
		t.Errorf("greet.sh = %q", b)
	}
	if fi, err := os.Stat(filepath.Join(project, "greet.sh")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != owner {
		t.Errorf("greet.sh after the agent's edit: %v, want owned by %d", fi.Sys(), owner)
	}
	reqs := srv.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	results := reqs[5].ToolResults(t)
	// It ran in the container (at /workspace, under the workspace's host
	// name), and the key was not in its environment (grep counts 0).
	if len(results) != 5 || results[0] != "FAIL\n[exit status 1]" ||
		results[2] != "PASS\n/workspace\n"+workspace.Name(project)+"\n0\n[exit status 1]" {
		t.Fatalf("tool results the model saw: %q\nstderr: %s", results, errb)
	}
	if !strings.Contains(results[3], "timed out after 1s") || strings.Contains(results[3], "never") || results[4] != "after-timeout-2 in /workspace" {
		t.Errorf("the hung command and the one after it: %q, %q", results[3], results[4])
	}
	// The container's processes are the host's too: none of the sleeps is left.
	if left, _ := exec.Command("pgrep", "-f", "^sleep 313[12]$").Output(); len(left) > 0 {
		t.Errorf("sleeps survived the timeout: %s", left)
	}
	if !strings.Contains(errb.String(), "  │ PASS\n") {
		t.Errorf("the trace does not show the command's output as it ran:\n%s", errb)
	}
	if strings.Contains(errb.String(), "without a checkpoint") {
		t.Errorf("no checkpoint for the user's project:\n%s", errb)
	}
	if !strings.Contains(errb.String(), "  ± edit greet.sh +1 −1\n") {
		t.Errorf("the trace does not show the edit made:\n%s", errb)
	}
	if reqs[0].Header.Get("Authorization") != "Bearer sk-test-key" {
		t.Errorf("auth header %q", reqs[0].Header.Get("Authorization"))
	}
	// The workspace runs on, with the project as its dir; sessions are kept.
	var list []psJSON
	json.Unmarshal([]byte(runProc(t, root, "", "ps", "--json").stdout), &list)
	if len(list) != 1 || list[0].Name != workspace.Name(project) || list[0].Dir != project {
		t.Errorf("ps after the agent: %+v", list)
	}
	// In the user's host-only state, not the project (COVE_ROOT/state here).
	state := filepath.Join(root, "state", "projects", workspace.Name(project))
	if s, _ := filepath.Glob(filepath.Join(state, "sessions", "*.jsonl")); len(s) != 1 {
		t.Errorf("sessions: %v", s)
	}
	if m, _ := filepath.Glob(filepath.Join(state, "checkpoints", "manifests", "*.json.gz")); len(m) != 1 {
		t.Errorf("checkpoints: %v", m)
	}
	if _, err := os.Lstat(filepath.Join(project, ".cove")); !os.IsNotExist(err) {
		t.Errorf("the agent wrote into the project's .cove: %v", err)
	}
}

// TestUpServesTheWorkspace: `cove up --no-browser DIR` prints the URL
// alone on stdout; through it, with the token, the project's files and a
// terminal inside the workspace answer; a second cove in the same
// directory prints the same URL; Ctrl-C stops the workspace.
func TestUpServesTheWorkspace(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hi\n"), 0o644)
	root := t.TempDir()
	cmd, url := startUp(t, root, ref, project)
	base, token, _ := strings.Cut(url, "/?token=")

	get := func(path string) (int, string) { return getWithToken(t, base, token, path) }
	if code, body := get("/api/tree"); code != 200 || !strings.Contains(body, `"hello.txt"`) {
		t.Fatalf("tree: %d %s", code, body)
	}
	if code, _ := http.Get(base + "/api/tree"); code == nil || code.StatusCode != 401 {
		t.Fatalf("without the token: %v", code)
	}

	// A terminal: it runs inside the workspace container.
	h := http.Header{"X-Cove-Token": {token}, "Origin": {base}}
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/term/new", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.Write(context.Background(), websocket.MessageBinary, append([]byte{0}, "echo in-$(hostname)-$(pwd)\n"...))
	want := "in-" + workspace.Name(project) + "-/workspace"
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !strings.Contains(out.String(), want) {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("terminal: %v; output so far %q", err, out.String())
		}
		if msg[0] == 0x10 {
			out.Write(msg[9:])
		}
	}

	// A second cove in the same directory gets the same workspace.
	if r := runProc(t, root, "", "up", "--no-browser", project); r.code != 0 || strings.TrimSpace(r.stdout) != url {
		t.Errorf("second cove up: %+v", r)
	}

	// Ctrl-C stops the workspace.
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cove up did not stop on Ctrl-C")
	}
	var list []psJSON
	json.Unmarshal([]byte(runProc(t, root, "", "ps", "--json").stdout), &list)
	if len(list) != 0 {
		t.Errorf("the workspace runs on after Ctrl-C: %+v", list)
	}
}

// TestBrowserIDE opens the workspace in real Chromium (Debian's, driven by
// playwright-core): a terminal runs a command inside the workspace, and a
// file edited in the editor and saved with Ctrl-S changes on disk.
func TestBrowserIDE(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "hello.txt"), []byte("hi\n"), 0o644)
	// For search: a git repository whose .gitignore hides one of two matches.
	os.WriteFile(filepath.Join(project, "notes.md"), []byte("line one\nfind needle-77 here\n"), 0o644)
	execfile.Write(filepath.Join(project, "tool.sh"), []byte("# a comment\necho \"hi\"\n"), 0o755)
	os.WriteFile(filepath.Join(project, "secret.txt"), []byte("needle-77 (ignored)\n"), 0o644)
	os.WriteFile(filepath.Join(project, ".gitignore"), []byte("secret.txt\n"), 0o644)
	if out, err := exec.Command("git", "init", "-q", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	root := t.TempDir()
	// The agent panel's model: a scripted OpenAI-compatible server.
	llm := llmtest.New(t)
	edit, _ := json.Marshal(map[string]any{"path": "hello.txt", "edits": []any{map[string]any{"old": "rewritten by the shell", "new": "changed by the agent"}}})
	llm.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "edit", "arguments": string(edit)}}}})},
		// A command, approved in the panel, run in the workspace.
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "c2", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"echo agent-$((6*7)) in $(hostname)"}`}}}})},
		// Markdown, in two deltas, with HTML that must stay text.
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"reasoning_content": "Checking "}, map[string]any{"reasoning_content": "the edit."},
			map[string]any{"content": "Made it **friend"}, map[string]any{"content": "lier**.\n\n- `hello.txt` <img src=x onerror=alert(1)>\n"})},
		// After a rewind: an answer that never ends, stopped from the panel.
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Let me think"})[:1], Hang: true},
	)
	_, url := startUpEnv(t, root, ref, project, []string{"COVE_BASE_URL=" + llm.URL(), "COVE_MODEL=test-model"})
	args := []string{"../../ide/web/test/e2e.mjs", url}
	if shot := os.Getenv("COVE_SCREENSHOT"); shot != "" {
		args = append(args, shot)
	}
	out, err := exec.Command(node, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("browser test: %v\n%s\nlauncher: %s", err, out, upErr(t))
	}
	if !strings.Contains(string(out), "terminal: browser-42 in "+workspace.Name(project)) {
		t.Errorf("the terminal did not run in the workspace:\n%s", out)
	}
	// The browser saved it, the shell rewrote it, the agent edited it
	// (approved in the panel), and the panel rewound that turn.
	if b, _ := os.ReadFile(filepath.Join(project, "hello.txt")); string(b) != "rewritten by the shell\n" {
		t.Errorf("hello.txt after the rewind: %q", b)
	}
	reqs := llm.Requests()
	if len(reqs) != 4 {
		t.Fatalf("the model got %d requests, want 4", len(reqs))
	}
	// The command ran in the workspace, and the model saw its output.
	if b, _ := json.Marshal(reqs[2].JSON(t)["messages"]); !strings.Contains(string(b), "agent-42 in "+workspace.Name(project)) {
		t.Errorf("the command's result the model saw: %s", b)
	}
	// The prompt after the rewind went without the rewound turn.
	if msgs := reqs[3].JSON(t)["messages"].([]any); len(msgs) != 2 {
		t.Errorf("after the rewind the model saw %d messages, want system + the new prompt", len(msgs))
	}

	// The panel's events are numbered 1, 2, 3…; a window that comes back
	// with the last id it saw gets only what follows.
	all := agentEvents(t, url, 0)
	if len(all) < 10 {
		t.Fatalf("the conversation's events: %v", all)
	}
	var types []string
	for i, ev := range all {
		if id, _ := ev["id"].(float64); int(id) != i+1 {
			t.Fatalf("event %d has id %v: %v", i, ev["id"], ev)
		}
		types = append(types, ev["type"].(string))
	}
	for _, want := range []string{"user", "state", "checkpoint", "approval", "decided", "text", "done", "rewound", "stopped"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %q event among %v", want, types)
		}
	}
	if tail := agentEvents(t, url, len(all)-2); len(tail) != 2 || tail[0]["id"].(float64) != float64(len(all)-1) {
		t.Errorf("after=%d: %v", len(all)-2, tail)
	}
	// An id this launcher never gave: the window is told to start over.
	if again := agentEvents(t, url, len(all)+100); len(again) != len(all)+1 || again[0]["type"] != "reset" {
		t.Errorf("after an unknown id: %d events, first %v", len(again), again[0])
	}
}

// agentEvents connects to the agent panel of the workspace at url (as
// cove up printed it) with ?after=after and returns the events it sends
// until it says the window is live.
func agentEvents(t *testing.T, url string, after int) []map[string]any {
	t.Helper()
	evs := openPanel(t, url, after).until("live")
	return evs[:len(evs)-1]
}

// browserTestTools returns node, once it knows Chromium and playwright-core
// are there too; in CI their absence fails the test.
func browserTestTools(t *testing.T) string {
	t.Helper()
	node, err1 := exec.LookPath("node")
	_, err2 := os.Stat("/usr/bin/chromium")
	_, err3 := os.Stat("../../ide/web/node_modules/playwright-core")
	if err1 != nil || err2 != nil || err3 != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node, chromium or playwright-core missing: scripts/test.sh installs them")
		}
		t.Skip("node, /usr/bin/chromium or ide/web/node_modules missing (scripts/build-web.sh)")
	}
	return node
}

// getWithToken GETs path from the launcher at base with its token, as a
// window does, and returns the status and body.
func getWithToken(t *testing.T, base, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("X-Cove-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startUp starts `cove up --no-browser` on project and returns the process
// and the URL it printed alone on its first stdout line. The workspace is
// removed when the test ends.
// upStderrs holds each test's cove up's stderr (by test name), for upErr:
// tests that run in parallel each have their own.
var upStderrs sync.Map

// upErr is what the cove up that startUp started for t (or the test t
// is a subtest of) said on stderr so far.
func upErr(t *testing.T) string {
	for name := t.Name(); ; {
		if b, ok := upStderrs.Load(name); ok {
			return b.(*bytes.Buffer).String()
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return ""
		}
		name = name[:i]
	}
}

func startUp(t *testing.T, root, ref, project string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	return startUpEnv(t, root, ref, project, nil, extra...)
}

// startUpEnv is startUp with env added to the launcher's environment (a
// test that sets it so can run beside others; t.Setenv cannot).
func startUpEnv(t *testing.T, root, ref, project string, env []string, extra ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd, _, errb := coveProc(root, append(append([]string{"up", "--no-browser", "--image", ref}, extra...), project)...)
	cmd.Env = append(cmd.Env, env...)
	upStderrs.Store(t.Name(), errb)
	cmd.Stdout = nil
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		runProc(t, root, "", "rm", "-f", workspace.Name(project))
		upStderrs.Delete(t.Name())
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}\n$`).MatchString(line) {
		t.Fatalf("first stdout line %q (%v); stderr %s", line, err, errb)
	}
	return cmd, strings.TrimSpace(line)
}

// TestUpStopsWhenTheLastWindowCloses: once the last page (its WebSocket)
// has been gone for the grace period, the workspace stops.
func TestUpStopsWhenTheLastWindowCloses(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	cmd, url := startUp(t, root, ref, t.TempDir(), "--grace", "1s")
	base, token, _ := strings.Cut(url, "/?token=")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// No window yet: it waits, however long.
	select {
	case err := <-exited:
		t.Fatalf("cove up exited before any window came: %v", err)
	case <-time.After(2500 * time.Millisecond):
	}
	h := http.Header{"X-Cove-Token": {token}, "Origin": {base}}
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/term/new", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // a window open past the grace period: it stays
	select {
	case err := <-exited:
		t.Fatalf("cove up exited with a window open: %v", err)
	default:
	}
	ws.Close(websocket.StatusNormalClosure, "window closed")
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("cove up still runs after its last window closed")
	}
	if r := runProc(t, root, "", "ps", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("the workspace runs on: %s", r.stdout)
	}
}

// TestDevcontainerJSON: the image, the environment and a post-create
// command that runs once per workspace come from devcontainer.json.
func TestDevcontainerJSON(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	os.Mkdir(filepath.Join(project, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(project, ".devcontainer", "devcontainer.json"), []byte(`{
		// as VS Code writes it
		"image": "`+ref+`",
		"containerEnv": {"FROM_DEVCONTAINER": "yes"},
		"postCreateCommand": "echo created >> /workspace/post.txt",
	}`), 0o644)
	root := t.TempDir()
	name := workspace.Name(project)
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", name) })
	for i := 0; i < 2; i++ { // a start, and a restart on the same layer
		if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 || !strings.HasPrefix(r.stdout, "http://127.0.0.1:") {
			t.Fatalf("up --detach: %+v", r)
		}
		if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo $FROM_DEVCONTAINER"); r.stdout != "yes\n" {
			logs, _ := filepath.Glob(filepath.Join(root, "run", "workspaces", "*", "launcher.log"))
			var b []byte
			if len(logs) > 0 {
				b, _ = os.ReadFile(logs[0])
			}
			wl, _ := filepath.Glob(filepath.Join(root, "data", "workspaces", "*", "log"))
			var w []byte
			if len(wl) > 0 {
				w, _ = os.ReadFile(wl[0])
			}
			t.Errorf("containerEnv: %+v\nlauncher log: %s\nworkspace log: %s", r, b, w)
		}
		if r := runProc(t, root, "", "stop", "--time", "2", name); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(project, "post.txt")); string(b) != "created\n" {
		t.Errorf("post.txt = %q: postCreateCommand should have run once", b)
	}
}

// TestWorkspaceKeepsItsLayerUntilFresh: what is installed in a workspace
// outlives a stop, and --fresh drops it.
func TestWorkspaceKeepsItsLayerUntilFresh(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	root := t.TempDir()
	name := workspace.Name(project)
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", name) })
	up := func(extra ...string) {
		t.Helper()
		if r := runProc(t, root, "", append(append([]string{"up", "--detach", "--image", ref}, extra...), project)...); r.code != 0 {
			t.Fatalf("up: %+v", r)
		}
	}
	up()
	runProc(t, root, "", "exec", name, "sh", "-c", "echo installed > /etc/tool")
	runProc(t, root, "", "stop", "--time", "2", name)
	up()
	if r := runProc(t, root, "", "exec", name, "cat", "/etc/tool"); r.stdout != "installed\n" {
		t.Fatalf("after a restart: %+v", r)
	}
	// Another image: on the running workspace a note, on the stopped one
	// a refusal naming --fresh, and the layer kept.
	other, err := mutate.Config(layered(t), v1.Config{Env: []string{"OTHER=1"}, Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	ref2 := testregistry.Push(t, addr, other)
	if r := runProc(t, root, "", "shell", "--image", ref2, project); !strings.Contains(r.stderr, "--image "+ref2+" takes effect with --fresh") {
		t.Errorf("--image on a running workspace: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	if r := runProc(t, root, "", "shell", "--image", ref2, project); r.code == 0 || !strings.Contains(r.stderr, "was made from "+ref) || !strings.Contains(r.stderr, "--fresh") {
		t.Errorf("--image on a stopped workspace: %+v", r)
	}
	up()
	if r := runProc(t, root, "", "exec", name, "cat", "/etc/tool"); r.stdout != "installed\n" {
		t.Fatalf("the refused --image lost the layer: %+v", r)
	}
	up("--fresh")
	if r := runProc(t, root, "", "exec", name, "cat", "/etc/tool"); r.code == 0 {
		t.Fatalf("after --fresh the file is still there: %+v", r)
	}
}

// TestAgentChatOnStdin holds `cove agent`'s conversation (no -p) through
// the real command: two turns on standard input, the second seeing the
// first, then /exit; the session is named for resuming.
func TestAgentChatOnStdin(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Hello there."})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "You said hi."})},
	)
	root := t.TempDir()
	cmd, out, errb := coveProc(root, "agent", "--image", ref, "--mode", "edits", project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test-key")
	cmd.Stdin = strings.NewReader("hi\nwhat did I say?\n/exit\n")
	if err := cmd.Run(); err != nil {
		t.Fatalf("cove agent: %v\n%s", err, errb)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	if !strings.Contains(out.String(), "› Hello there.\n› You said hi.\n› ") {
		t.Errorf("chat output:\n%s", out)
	}
	if !strings.Contains(errb.String(), "cove agent -r ") {
		t.Errorf("stderr does not name the session:\n%s", errb)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || len(reqs[1].JSON(t)["messages"].([]any)) != 4 { // system, hi, hello, what
		t.Fatalf("requests: %d", len(reqs))
	}
}

// TestBrowserRunsAsSudoUser: `sudo cove` opens the app window as the user
// who ran sudo (their uid and home, the sandbox kept: no --no-sandbox),
// not as root. The "browser" is a script that says who it runs as.
func TestBrowserRunsAsSudoUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	u, err := user.Lookup("covetest")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no covetest user: scripts/test.sh makes it")
		}
		t.Skip("no covetest user (scripts/test.sh makes it)")
	}
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	// Not t.TempDir: its parent is 0700, closed to covetest.
	bin, err := os.MkdirTemp("", "cove-browser-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	os.Chmod(bin, 0o777)
	report := filepath.Join(bin, "browser.out")
	script := filepath.Join(bin, "browser")
	execfile.Write(script, []byte("#!/bin/sh\n{ id -u; echo \"$HOME\"; echo \"$DISPLAY\"; echo \"$@\"; } > "+report+".tmp && mv "+report+".tmp "+report+"\n"), 0o755)
	project, root := t.TempDir(), t.TempDir()
	// As under sudo: cove's environment has lost DISPLAY, the one sudo was
	// started with (its parent's, here a shell's) still has it.
	cmd, _, errb := coveProc(root, "up", "--image", ref, project)
	cmd.Args = append([]string{"sh", "-c", `env -u DISPLAY -u WAYLAND_DISPLAY "$@"; true`, "sh"}, cmd.Args...)
	cmd.Path = "/bin/sh"
	cmd.Env = append(cmd.Env, "COVE_BROWSER="+script, "SUDO_UID="+u.Uid, "SUDO_GID="+u.Gid, "SUDO_USER=covetest", "DISPLAY=:77")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		cmd.Wait()
		runProc(t, root, "", "rm", "-f", workspace.Name(project))
	})
	var b []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, err = os.ReadFile(report); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("the browser was not started: %v\n%s", err, errb)
	}
	lines := strings.SplitN(strings.TrimSpace(string(b)), "\n", 4)
	if len(lines) != 4 || lines[0] != u.Uid || lines[1] != u.HomeDir {
		t.Fatalf("the browser ran as uid/home %q, want %s %s", lines, u.Uid, u.HomeDir)
	}
	if lines[2] != ":77" {
		t.Errorf("the browser's DISPLAY is %q, want the session's :77", lines[2])
	}
	if strings.Contains(lines[3], "--no-sandbox") || !strings.Contains(lines[3], "--app=http://127.0.0.1:") {
		t.Errorf("browser arguments: %s", lines[3])
	}
	// Its profile is the user's, private, and not in /tmp, where another
	// user could have made it first.
	_, profile, _ := strings.Cut(lines[3], "--user-data-dir=")
	profile, _, _ = strings.Cut(profile, " ")
	if fi, err := os.Lstat(profile); err != nil || strings.HasPrefix(profile, os.TempDir()+"/cove-browser") || !fi.IsDir() ||
		fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid) != u.Uid || fi.Mode().Perm() != 0o700 {
		t.Errorf("the browser's profile %q: %v %v", profile, fi, err)
	}
}

// TestAgentChatCtrlCInTerminal presses Ctrl-C in a real terminal (a pty)
// while the model's answer is streaming: the kernel's SIGINT stops that
// turn, not cove; the chat takes the next line and the workspace runs on.
func TestAgentChatCtrlCInTerminal(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project, root := t.TempDir(), t.TempDir()
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Thinking very hard"})[:1], Hang: true},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Still here."})},
	)
	cmd, _, _ := coveProc(root, "agent", "--image", ref, project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=k",
		"XDG_STATE_HOME="+t.TempDir()) // the prompt history
	cmd.Stdout, cmd.Stderr = nil, nil
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	out := testbuf.New()
	go io.Copy(out, tty)
	out.WaitFor(t, "› ")
	io.WriteString(tty, "think\r")
	out.WaitFor(t, "Thinking very hard")
	tty.Write([]byte{3}) // Ctrl-C
	out.WaitFor(t, "stopped")
	io.WriteString(tty, "are you there?\r")
	out.WaitFor(t, "Still here.")
	io.WriteString(tty, "/exit\r")
	if code, ok := waitExit(cmd, 20*time.Second); !ok {
		t.Fatalf("cove agent did not leave on /exit:\n%s", out.String())
	} else if code != 0 {
		t.Fatalf("cove agent: exit status %d\n%s", code, out.String())
	}
	var list []psJSON
	json.Unmarshal([]byte(runProc(t, root, "", "ps", "--json").stdout), &list)
	if len(list) != 1 || list[0].Status != "running" {
		t.Errorf("the workspace after Ctrl-C: %+v", list)
	}
}

// TestRunCtrlCInTerminal: Ctrl-C on the terminal of a foreground `cove
// run`, pressed as soon as the workload speaks, reaches it (forwarded by
// the launcher, which catches it from before the start; init is in a
// session of its own), and it dies of it: status 130.
func TestRunCtrlCInTerminal(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	cmd, _, _ := coveProc(root, "run", "--rm", ref, "sh", "-c", "echo ready; exec sleep 30")
	cmd.Stdout, cmd.Stderr = nil, nil
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	out := testbuf.New()
	go io.Copy(out, tty)
	out.WaitFor(t, "ready")
	tty.Write([]byte{3})
	if code, ok := waitExit(cmd, 10*time.Second); !ok {
		t.Fatalf("Ctrl-C did not stop the workload:\n%s", out.String())
	} else if code != 130 {
		t.Errorf("cove run after Ctrl-C: exit status %d, want 130\n%s", code, out.String())
	}
}

// waitExit waits up to within for cmd to end and returns its exit status;
// ok is false if it had not ended (it is killed then).
func waitExit(cmd *exec.Cmd, within time.Duration) (code int, ok bool) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), true
		}
		if err != nil {
			return -1, true
		}
		return 0, true
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		return 0, false
	}
}

// TestAgentChatMarkdownInTerminal holds a chat in a real terminal (a pty):
// the answer, streamed in pieces that split its tokens and its code fence,
// shows rendered (bold, the code coloured); Up at the next prompt recalls
// the request, which goes to the model again; the history file keeps it.
func TestAgentChatMarkdownInTerminal(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project, root, state := t.TempDir(), t.TempDir(), t.TempDir()
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("stop",
			map[string]any{"content": "Use **bo"}, map[string]any{"content": "ld** steps:\n``"},
			map[string]any{"content": "`go\nfmt.Println(\"*hi*\")\n``"}, map[string]any{"content": "`\nDone."})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Again."})},
	)
	cmd, _, _ := coveProc(root, "agent", "--image", ref, project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=k",
		"XDG_STATE_HOME="+state, "TERM=xterm", "NO_COLOR=")
	cmd.Stdout, cmd.Stderr = nil, nil
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	out := testbuf.New()
	go io.Copy(out, tty)
	out.WaitFor(t, "› ")
	io.WriteString(tty, "show me the steps\r")
	out.WaitFor(t, "Done.")
	out.WaitForNth(t, "› ", 2)
	for _, want := range []string{
		"Use \x1b[1mbold\x1b[0m steps:",        // redrawn styled
		"\x1b[2m```go\x1b[0m",                  // the fence, dim
		"\x1b[36mfmt.Println(\"*hi*\")\x1b[0m", // the code, no inline styles
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the terminal:\n%q", want, out.String())
		}
	}
	io.WriteString(tty, "\x1b[A\r") // Up, Enter
	out.WaitFor(t, "Again.")
	out.WaitForNth(t, "› ", 3)
	io.WriteString(tty, "not this\x03\x03") // Ctrl-C clears the line, then leaves
	if code, ok := waitExit(cmd, 20*time.Second); !ok {
		t.Fatalf("cove agent did not leave on Ctrl-C:\n%q", out.String())
	} else if code != 130 {
		t.Fatalf("cove agent after Ctrl-C at the prompt: exit status %d, want 130\n%q", code, out.String())
	}
	out.WaitFor(t, "cove agent -r ")
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var prompts []string
	for _, m := range reqs[1].JSON(t)["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "user" {
			prompts = append(prompts, mm["content"].(string))
		}
	}
	if !slices.Equal(prompts, []string{"show me the steps", "show me the steps"}) {
		t.Errorf("the model got the requests %q", prompts)
	}
	hist := filepath.Join(state, "cove", "agent_history")
	b, err := os.ReadFile(hist)
	if err != nil || string(b) != "show me the steps\n" {
		t.Errorf("history file %q, %v", b, err)
	}
	if fi, err := os.Stat(hist); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("history file mode: %v", err)
	}
}

// TestRootlessInitBinaryIsReadOnly: a rootless container cannot write the
// binary its init runs, through /proc/1/exe. That is cove-init, written
// to the user's data directory, so the user's: init re-executes from its
// read-only bind (its owner is root inside). Where cove-init cannot be
// written, init is cove itself: executed once when cove is root's (the
// container maps no id that can write it), re-executed from the bind when
// it is the user's (~/.local/bin).
func TestRootlessInitBinaryIsReadOnly(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	u, uid, gid := testUser(t)
	ref := testregistry.Push(t, addr, layered(t))
	base := rootlessBase(t, "cove-rootless-exe-")
	own := filepath.Join(base, "cove")
	b, err := os.ReadFile(coveBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := execfile.Write(own, b, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(own, uid, gid)
	// Two stores: one where cove-init goes, one where its directory is a
	// file.
	for _, d := range []string{"root", "blocked", "blocked/data"} {
		os.Mkdir(filepath.Join(base, d), 0o755)
		os.Chown(filepath.Join(base, d), uid, gid)
	}
	must(t, os.WriteFile(filepath.Join(base, "blocked", "data", "bin"), nil, 0o644))
	script := `tr '\0' ' ' < /proc/1/cmdline; if (: >> /proc/1/exe) 2>/dev/null; then echo wrote; else echo refused; fi`
	for _, c := range []struct {
		bin, root string
		stage2    bool
	}{
		{coveBin, "root", true}, {own, "root", true},
		{coveBin, "blocked", false}, {own, "blocked", true},
	} {
		cmd, out, errb := coveProc(filepath.Join(base, c.root), "run", "--rm", ref, "sh", "-c", script)
		cmd.Path = c.bin
		asTestUser(cmd, u, uid, gid)
		if err := cmd.Run(); err != nil {
			t.Fatalf("rootless run with %s (%s): %v\n%s", c.bin, c.root, err, errb)
		}
		if !strings.HasSuffix(out.String(), " refused\n") || strings.Contains(out.String(), "--stage2") != c.stage2 {
			t.Errorf("rootless run with %s (%s): %q, want the write refused and --stage2 %v\n%s", c.bin, c.root, out, c.stage2, errb)
		}
	}
	progs, _ := filepath.Glob(filepath.Join(base, "root", "data", "bin", "cove-init-*"))
	if len(progs) != 1 {
		t.Fatalf("cove-init in the store: %q", progs)
	}
	if fi, err := os.Stat(progs[0]); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
		t.Errorf("cove-init is not the user's: %v", err)
	}
	if after, err := os.ReadFile(own); err != nil || !bytes.Equal(after, b) {
		t.Errorf("the user's cove binary changed (%v)", err)
	}
}
