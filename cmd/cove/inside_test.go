package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/testregistry"
)

// TestContainersRunCoveInside: a container's init is cove-init (the
// smallest of the programs scripts/build.sh puts in cove), written once to
// the data directory and shared by every container, as root and rootless,
// and /.cove/cove in it is cove-inside (a workspace's IDE server); where
// they cannot be written, containers run cove itself, and cove doctor says
// why.
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
		progs, _ := filepath.Glob(filepath.Join(bin, "cove-init-*"))
		insides, _ := filepath.Glob(filepath.Join(bin, "cove-inside-*"))
		if len(progs) != 1 || len(insides) != 1 {
			t.Fatalf("programs in the data directory: %q and %q, want one cove-init and one cove-inside", progs, insides)
		}
		prog, err := os.Stat(progs[0])
		if err != nil {
			t.Fatal(err)
		}
		inside, err := os.Stat(insides[0])
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, prog) || !os.SameFile(b, prog) {
			t.Errorf("the containers' inits run %v and %v, not %s (%v)", a.Sys(), b.Sys(), progs[0], prog.Sys())
		}
		if cove, _ := os.Stat(coveBin); inside.Size() >= cove.Size()/2 || prog.Size() >= inside.Size()/2 {
			t.Errorf("cove-init is %d bytes, cove-inside %d, cove %d: each should be less than half of the next", prog.Size(), inside.Size(), cove.Size())
		}
		// What a container sees: the init at /.cove/init, cove-inside at
		// /.cove/cove (what a workspace's IDE server runs).
		r := u.cove(t, "", "run", "--rm", "--net", "none", ref, "sh", "-c", "wc -c < /.cove/init; wc -c < /.cove/cove")
		if want := strconv.FormatInt(prog.Size(), 10) + "\n" + strconv.FormatInt(inside.Size(), 10) + "\n"; r.code != 0 || strings.ReplaceAll(r.stdout, " ", "") != want {
			t.Errorf("/.cove/init and /.cove/cove in a container: %+v, want sizes %q", r, want)
		}
		if r := u.cove(t, "", "doctor"); !strings.Contains(r.stdout, "containers run cove-init ("+progs[0]+"), workspaces' servers cove-inside ("+insides[0]+")") {
			t.Errorf("cove doctor does not name the programs containers run:\n%s", r.stdout)
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
			t.Errorf("with no cove-init to be had, the init runs %v, not cove (%v)", c.Sys(), self.Sys())
		}
		if r := u.cove(t, "", "doctor"); !strings.Contains(r.stdout, "containers run cove itself instead") {
			t.Errorf("cove doctor does not say containers run cove itself:\n%s", r.stdout)
		}
	})
}

// TestRootWritesProgramsForEveryUser: cove installed by root
// (PREFIX/bin/cove, root's alone) and `cove system write-programs` run as
// root (install.sh does) give every user root's copies of cove-init and
// cove-inside in PREFIX/lib/cove. A rootless container then runs its init
// from a file it cannot write, without re-executing it (one exec fewer),
// and the user's data directory gets no copy of its own; copies that
// someone else could have changed are not taken.
func TestRootWritesProgramsForEveryUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	u, uid, gid := testUser(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	prefix, err := os.MkdirTemp("/var/lib", "cove-prefix-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prefix) })
	must(t, os.Chmod(prefix, 0o755))
	must(t, os.Mkdir(filepath.Join(prefix, "bin"), 0o755))
	bin := filepath.Join(prefix, "bin", "cove")
	b, err := os.ReadFile(coveBin)
	if err != nil {
		t.Fatal(err)
	}
	must(t, execfile.Write(bin, b, 0o755))

	// As a user: only root writes them.
	asUser := func(root string, args ...string) (string, string, error) {
		cmd, out, errb := coveProc(root, args...)
		cmd.Path = bin
		asTestUser(cmd, u, uid, gid)
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if _, errs, err := asUser(t.TempDir(), "system", "write-programs"); err == nil || !strings.Contains(errs, "run it as root") {
		t.Fatalf("write-programs as a user: %v %s", err, errs)
	}
	cmd, out, errb := coveProc(t.TempDir(), "system", "write-programs")
	cmd.Path = bin
	if err := cmd.Run(); err != nil {
		t.Fatalf("write-programs as root: %v\n%s", err, errb)
	}
	written := strings.Fields(out.String())
	lib := filepath.Join(prefix, "lib", "cove")
	if len(written) != 2 || filepath.Dir(written[0]) != lib || !strings.HasPrefix(filepath.Base(written[0]), "cove-init-") {
		t.Fatalf("write-programs wrote %q, want cove-init and cove-inside in %s", written, lib)
	}

	base := rootlessBase(t, "cove-rootless-sys-")
	must(t, os.Chown(base, uid, gid))
	script := `tr '\0' ' ' < /proc/1/cmdline; if (: >> /proc/1/exe) 2>/dev/null; then echo wrote; else echo refused; fi`
	run := func(want2 bool) {
		t.Helper()
		out, errs, err := asUser(base, "run", "--rm", "--net", "none", ref, "sh", "-c", script)
		if err != nil || !strings.HasSuffix(out, " refused\n") || strings.Contains(out, "--stage2") != want2 {
			t.Fatalf("rootless run: %v %q, want the write refused and --stage2 %v\n%s", err, out, want2, errs)
		}
	}
	run(false)
	if own, _ := filepath.Glob(filepath.Join(base, "data", "bin", "cove-init-*")); len(own) != 0 {
		t.Errorf("the user's data directory got its own cove-init: %q", own)
	}
	if out, _, _ := asUser(base, "doctor"); !strings.Contains(out, "containers run cove-init ("+written[0]+")") {
		t.Errorf("cove doctor does not name root's copy:\n%s", out)
	}
	// A directory others may write: root's copies are not taken.
	must(t, os.Chmod(lib, 0o777))
	run(true)
	if own, _ := filepath.Glob(filepath.Join(base, "data", "bin", "cove-init-*")); len(own) != 1 {
		t.Errorf("with root's copies not to be trusted, the user's data directory has %q, want its own cove-init", own)
	}
}
