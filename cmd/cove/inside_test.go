package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/testregistry"
)

// TestContainersRunCoveInside: a container's init is cove-inside (the
// small program scripts/build.sh puts in cove), written once to the data
// directory and shared by every container, as root and rootless; where it
// cannot be written, containers run cove itself, and cove doctor says why.
func TestContainersRunCoveInside(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	eachNetUser(t, "cove-inside-", func(t *testing.T, u netUser, _ string) {
		if r := u.cove(t, "", "pull", "-q", ref); r.code != 0 {
			t.Fatalf("pull: %+v", r)
		}
		// initOf starts a detached container and gives what its init
		// runs, as the host sees it.
		initOf := func(name string) os.FileInfo {
			t.Helper()
			if r := u.cove(t, "", "run", "-d", "--name", name, "--net", "none", ref, "sleep", "60"); r.code != 0 {
				t.Fatalf("run -d: %+v", r)
			}
			t.Cleanup(func() { u.cove(t, "", "rm", "-f", name) })
			var list []psJSON
			json.Unmarshal([]byte(u.cove(t, "", "ps", "--json").stdout), &list)
			for _, c := range list {
				if c.Name == name && c.PID > 0 {
					fi, err := os.Stat("/proc/" + strconv.Itoa(c.PID) + "/exe")
					if err != nil {
						t.Fatal(err)
					}
					return fi
				}
			}
			t.Fatalf("no running %s in ps: %+v", name, list)
			return nil
		}
		bin := filepath.Join(u.root, "data", "bin")
		a, b := initOf("a"), initOf("b")
		progs, _ := filepath.Glob(filepath.Join(bin, "cove-inside-*"))
		if len(progs) != 1 {
			t.Fatalf("programs in the data directory: %q, want one cove-inside", progs)
		}
		prog, err := os.Stat(progs[0])
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, prog) || !os.SameFile(b, prog) {
			t.Errorf("the containers' inits run %v and %v, not %s (%v)", a.Sys(), b.Sys(), progs[0], prog.Sys())
		}
		if cove, _ := os.Stat(coveBin); prog.Size() >= cove.Size()/2 {
			t.Errorf("cove-inside is %d bytes against cove's %d: not the small program", prog.Size(), cove.Size())
		}
		if r := u.cove(t, "", "doctor"); !strings.Contains(r.stdout, "containers run cove-inside ("+progs[0]+")") {
			t.Errorf("cove doctor does not name the program containers run:\n%s", r.stdout)
		}
		u.cove(t, "", "rm", "-f", "a", "b")

		// A data directory where it cannot go: cove runs itself.
		must(t, os.RemoveAll(bin))
		must(t, os.WriteFile(bin, []byte("not a directory"), 0o644))
		self, err := os.Stat(coveBin)
		if err != nil {
			t.Fatal(err)
		}
		if c := initOf("c"); !os.SameFile(c, self) {
			t.Errorf("with no cove-inside to be had, the init runs %v, not cove (%v)", c.Sys(), self.Sys())
		}
		if r := u.cove(t, "", "doctor"); !strings.Contains(r.stdout, "containers run cove itself as their init") {
			t.Errorf("cove doctor does not say containers run cove itself:\n%s", r.stdout)
		}
	})
}
