package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestRmiKeepsWhatIsInUse: names are references and so is a container's
// use of its image. Many names of one image, removed at once, while a
// container runs on it: every other name stays usable, the running
// container keeps its files, a stopped one keeps its image, and prune
// takes the image only once the container is removed. As root and as
// covetest (rootless).
func TestRmiKeepsWhatIsInUse(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	img := layered(t)
	var refs []string
	for range 6 {
		refs = append(refs, testregistry.Push(t, addr, img))
	}
	for _, rootless := range []bool{false, true} {
		name := "root"
		if rootless {
			name = "rootless"
		}
		t.Run(name, func(t *testing.T) {
			base := rootlessBase(t, "cove-rmi-")
			root := filepath.Join(base, "root")
			os.Mkdir(root, 0o700)
			run := func(args ...string) result {
				t.Helper()
				cmd, out, errb := coveProc(root, args...)
				if rootless {
					u, uid, gid := testUser(t)
					os.Chown(root, uid, gid)
					asTestUser(cmd, u, uid, gid)
				}
				err := cmd.Run()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				return result{code: code, stdout: out.String(), stderr: errb.String()}
			}
			for _, ref := range refs {
				if r := run("pull", "-q", ref); r.code != 0 {
					t.Fatalf("pull: %+v", r)
				}
			}
			// checkImages asserts that every name listed has its rootfs
			// whole, and returns the names and rootfs paths.
			checkImages := func(step string) map[string]string {
				t.Helper()
				r := run("images", "--json")
				var list []imageJSON
				if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
					t.Fatalf("%s: images --json: %v %+v", step, err, r)
				}
				out := map[string]string{}
				for _, im := range list {
					if _, err := os.Stat(filepath.Join(im.RootFS, "bin/busybox")); err != nil && im.Ref != "" {
						t.Fatalf("%s: the name %s lost its image: %v", step, im.Ref, err)
					}
					out[im.Ref] = im.RootFS
				}
				return out
			}
			rootfs := checkImages("pulled")[refs[0]]
			if r := run("run", "-d", "--name", "user", refs[0], "sleep", "300"); r.code != 0 {
				t.Fatalf("run -d: %+v", r)
			}
			t.Cleanup(func() { run("rm", "-f", "user") })
			if r := run("run", "--name", "stopped", refs[1], "true"); r.code != 0 {
				t.Fatalf("run: %+v", r)
			}
			// One name: only that one goes.
			if r := run("rmi", refs[2]); r.code != 0 || !strings.Contains(r.stdout, "untagged") {
				t.Fatalf("rmi of one of many names: %+v", r)
			}
			left := checkImages("rmi one")
			for _, ref := range append(refs[:2:2], refs[3:]...) {
				if _, ok := left[ref]; !ok {
					t.Fatalf("rmi %s removed %s too", refs[2], ref)
				}
			}
			// The rest at once.
			var wg sync.WaitGroup
			for _, ref := range append(refs[:2:2], refs[3:]...) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if r := run("rmi", ref); r.code != 0 {
						t.Errorf("rmi %s: %+v", ref, r)
					}
				}()
			}
			wg.Wait()
			checkImages("rmi all")
			if _, err := os.Stat(filepath.Join(rootfs, "bin/busybox")); err != nil {
				t.Fatalf("rmi of the last name removed the rootfs under a running container: %v", err)
			}
			if r := run("exec", "user", "ls", "/bin/busybox"); r.code != 0 {
				t.Fatalf("the running container lost its files: %+v", r)
			}
			if r := run("prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 0 images") {
				t.Fatalf("prune while containers use the image: %+v", r)
			}
			if r := run("rm", "-f", "user"); r.code != 0 {
				t.Fatalf("rm: %+v", r)
			}
			// The stopped container holds it still.
			if r := run("prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 0 images") {
				t.Fatalf("prune while a stopped container uses the image: %+v", r)
			}
			if _, err := os.Stat(filepath.Join(rootfs, "bin/busybox")); err != nil {
				t.Fatalf("the stopped container's image is gone: %v", err)
			}
			if r := run("rm", "stopped"); r.code != 0 {
				t.Fatalf("rm: %+v", r)
			}
			if r := run("prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 1 images") {
				t.Fatalf("prune once nothing uses the image: %+v", r)
			}
			if _, err := os.Stat(rootfs); !os.IsNotExist(err) {
				t.Fatalf("prune kept an image nothing uses: %v", err)
			}
			if left := checkImages("pruned"); len(left) != 0 {
				t.Fatalf("images after prune: %v", left)
			}
		})
	}
}

// TestRmiDuringBuild: a build's use of its base image holds it: an rmi
// of the base's only name and a prune while a RUN step runs on it leave
// its files there, and the build finishes.
func TestRmiDuringBuild(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+ref+"\nRUN sleep 4.5; ls /bin/busybox > /seen\n"), 0o644)
	if r := runProc(t, root, "", "pull", "-q", ref); r.code != 0 {
		t.Fatalf("pull: %+v", r)
	}
	cmd, out, errb := coveProc(root, "build", "-t", "during:1", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// The RUN step runs (a sleep of this length is the test's).
		if exec.Command("pgrep", "-f", "^sleep 4.5$").Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the RUN step did not start: %s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := runProc(t, root, "", "rmi", ref); r.code != 0 {
		t.Fatalf("rmi: %+v", r)
	}
	if r := runProc(t, root, "", "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 0 images") {
		t.Fatalf("prune during the build: %+v", r)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the build failed with its base removed under it: %v\n%s%s", err, out, errb)
	}
	if r := runProc(t, root, "", "run", "--rm", "during:1", "cat", "/seen"); r.code != 0 || r.stdout != "/bin/busybox\n" {
		t.Fatalf("the built image: %+v", r)
	}
}

// TestRmiUnderAStoppedWorkspace: rmi of the only name of a stopped
// workspace's image keeps the image for it (untagged), and the next cove
// up starts it on that image, with the registry gone: not pulled again
// (which could bring another image under its kept layer, or none).
func TestRmiUnderAStoppedWorkspace(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	p := testregistry.NewProxy(t, addr)
	ref := p.Ref(testregistry.Push(t, addr, layered(t)))
	root, project := t.TempDir(), t.TempDir()
	name := workspace.Name(project)
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", name) })
	if r := runProc(t, root, "", "up", "--detach", "--image", ref, project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo kept > /kept"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if r := runProc(t, root, "", "stop", "--time", "2", name); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	if r := runProc(t, root, "", "rmi", ref); r.code != 0 || !strings.Contains(r.stdout, "untagged") {
		t.Fatalf("rmi under a stopped workspace: %+v", r)
	}
	if r := runProc(t, root, "", "prune"); r.code != 0 || !strings.Contains(r.stdout, "removed 0 images") {
		t.Fatalf("prune under a stopped workspace: %+v", r)
	}
	p.SetStatus(http.StatusServiceUnavailable) // the registry is gone
	if r := runProc(t, root, "", "up", "--detach", "--image", ref, project); r.code != 0 {
		t.Fatalf("up again, its image's name removed and the registry gone: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "cat /kept && ls /bin/busybox"); r.code != 0 || r.stdout != "kept\n/bin/busybox\n" {
		t.Fatalf("the workspace after its restart: %+v", r)
	}
}

// TestRestartKeepsTheImageItWasMadeOn: a stopped workspace whose image's
// name was pulled again as another image starts on the one its layer was
// made on, says so, and keeps what was installed; --fresh moves it.
func TestRestartKeepsTheImageItWasMadeOn(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root, project := t.TempDir(), t.TempDir()
	ws := workspace.Name(project)
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", ws) })
	if r := runProc(t, root, "", "up", "--detach", "--image", ref, project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	if r := runProc(t, root, "", "exec", ws, "sh", "-c", "echo kept > /kept"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	if r := runProc(t, root, "", "stop", "--time", "2", ws); r.code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	// The same name, now another image (busybox alone, no layered files).
	img, err := testimage.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	r0, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r0, img); err != nil {
		t.Fatal(err)
	}
	if r := runProc(t, root, "", "pull", "--pull", "always", ref); r.code != 0 {
		t.Fatalf("pull of the new image: %+v", r)
	}
	r := runProc(t, root, "", "up", "--detach", "--image", ref, project)
	if r.code != 0 || !strings.Contains(r.stderr, "starts on the one it was made on") {
		t.Fatalf("up again on the renamed image: %+v", r)
	}
	if r := runProc(t, root, "", "exec", ws, "sh", "-c", "cat /kept /srv/cfg/c"); r.code != 0 || r.stdout != "kept\nc\n" {
		t.Fatalf("the workspace after its restart is not on the image it was made on: %+v", r)
	}
}
