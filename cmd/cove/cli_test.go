package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// coveBin is the cove binary built once for the tests that need a real
// process (kill -9, several processes at once).
var coveBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cove-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // TestRootlessPull runs it as another user
	coveBin = filepath.Join(dir, "cove")
	out, err := exec.Command("go", "build", "-o", coveBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
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
	r := cove(t, t.TempDir(), "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "cove ") || !strings.Contains(r.stdout, "go1.") {
		t.Fatalf("version: %+v", r)
	}
}

func TestHelpOnEveryCommand(t *testing.T) {
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
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	r := cove(t, filepath.Join(file, "root"), "images")
	if r.code != 1 || !strings.Contains(r.stderr, "image store") {
		t.Fatalf("images with an impossible root: %+v", r)
	}
}

// TestRootlessPull runs cove as an unprivileged user: the pull works, every
// file of the rootfs belongs to that user, and cove says how many owners it
// could not keep.
func TestRootlessPull(t *testing.T) {
	addr := testregistry.Addr(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run cove as the covetest user")
	}
	u, err := user.Lookup("covetest")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no covetest user: scripts/test.sh creates it")
		}
		t.Skip("no covetest user (useradd -m covetest)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
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
	cmd.Env = append(cmd.Env, "HOME="+u.HomeDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := cmd.Run(); err != nil {
		t.Fatalf("rootless pull: %v\n%s", err, errb)
	}
	if !digestLine.MatchString(out.String()) {
		t.Fatalf("stdout %q", out)
	}
	if !strings.Contains(errb.String(), "belong to you instead of their owner") {
		t.Errorf("no note on dropped owners: %q", errb)
	}
	rootfs := filepath.Join(root, "images", "images", strings.TrimPrefix(strings.TrimSpace(out.String()), "sha256:"), "rootfs")
	n := 0
	err = filepath.Walk(rootfs, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s owned by %d, want %d", p, st.Uid, uid)
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
}
