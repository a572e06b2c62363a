package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// TestNothingCoveMakesIsOpenToOthers: after a pull, a build, a container
// and a workspace start (with a setuid program written into its layer),
// another user of the machine (nobody) reaches nothing below cove's
// directories: not a layer, not an image, not a socket. An install an
// older cove made 0755 is tightened on the next command. As root and as
// covetest (rootless), under a COVE_ROOT others may enter.
func TestNothingCoveMakesIsOpenToOthers(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	for _, rootless := range []bool{false, true} {
		name := "root"
		if rootless {
			name = "rootless"
		}
		t.Run(name, func(t *testing.T) {
			base := rootlessBase(t, "cove-private-")
			root, project := filepath.Join(base, "root"), filepath.Join(base, "project")
			// An older cove's install: its directories 0755.
			tops := []string{"images", "data", "run"}
			for _, d := range append([]string{""}, tops...) {
				os.Mkdir(filepath.Join(root, d), 0o755)
			}
			os.Chmod(root, 0o755)
			os.Mkdir(project, 0o755)
			os.WriteFile(filepath.Join(project, "Dockerfile"), []byte("FROM "+ref+"\nRUN echo built > /built\n"), 0o644)
			u, uid, gid := testUser(t)
			if rootless {
				filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, gid) })
			}
			run := func(args ...string) result {
				t.Helper()
				cmd, out, errb := coveProc(root, args...)
				if rootless {
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
			if r := run("pull", "-q", ref); r.code != 0 {
				t.Fatalf("pull: %+v", r)
			}
			if r := run("build", "-t", "private:1", project); r.code != 0 {
				t.Fatalf("build: %+v", r)
			}
			if r := run("run", "-d", "--name", "box", "private:1", "sleep", "300"); r.code != 0 {
				t.Fatalf("run -d: %+v", r)
			}
			t.Cleanup(func() { run("rm", "-f", "box") })
			if r := run("up", "--detach", "--image", ref, project); r.code != 0 {
				t.Fatalf("up: %+v", r)
			}
			ws := workspace.Name(project)
			t.Cleanup(func() { run("rm", "-f", ws) })
			// Root in the workspace makes a setuid program in its layer.
			if r := run("exec", ws, "sh", "-c", "cp /bin/busybox /suid && chmod 4755 /suid"); r.code != 0 {
				t.Fatalf("exec: %+v", r)
			}
			for _, d := range tops {
				fi, err := os.Stat(filepath.Join(root, d))
				if err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: %v %v, want 0700", d, fi.Mode(), err)
				}
			}
			// What nobody can reach: only the names in the COVE_ROOT
			// itself, which the test made open.
			find := exec.Command("runuser", "-u", "nobody", "--", "find", root)
			find.Dir = "/"
			out, _ := find.Output()
			allowed := []string{root}
			for _, d := range append(tops, "state") {
				allowed = append(allowed, filepath.Join(root, d))
			}
			var reached []string
			for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if p != "" && !slices.Contains(allowed, p) {
					reached = append(reached, p)
				}
			}
			if len(reached) > 0 {
				t.Errorf("another user reaches %d paths below cove's directories, e.g. %v", len(reached), reached[:min(5, len(reached))])
			}
			// The setuid program is there, for its owner only.
			var found bool
			filepath.Walk(filepath.Join(root, "data"), func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Name() == "suid" && fi.Mode()&os.ModeSetuid != 0 {
					found = true
				}
				return nil
			})
			if !found {
				t.Error("the workspace's setuid program is not in its layer: the test did not test")
			}
		})
	}
}
