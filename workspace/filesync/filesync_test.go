package filesync

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// pair is a local and a "remote" project directory on this machine.
type pair struct {
	t          *testing.T
	local, rem string
	s          *Syncer
}

func newPair(t *testing.T, git ...bool) *pair {
	t.Helper()
	p := &pair{t: t, local: t.TempDir(), rem: t.TempDir()}
	if len(git) > 0 && git[0] {
		// Git's rules apply in a git project (see projectwalk).
		os.Mkdir(filepath.Join(p.local, ".git"), 0o755)
		os.Mkdir(filepath.Join(p.rem, ".git"), 0o755)
	}
	l, err := OpenDir(p.local, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := OpenDir(p.rem, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); r.Close() })
	p.s = &Syncer{Local: l, Remote: r, Now: func() time.Time { return time.Date(2026, 12, 1, 14, 25, 30, 0, time.UTC) }}
	return p
}

func (p *pair) write(dir, name, body string) {
	p.t.Helper()
	f := filepath.Join(dir, name)
	os.MkdirAll(filepath.Dir(f), 0o755)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		p.t.Fatal(err)
	}
	// A second write within the same mtime tick must still be seen.
	future := time.Now().Add(time.Duration(len(body)) * time.Millisecond)
	os.Chtimes(f, future, future)
}

func (p *pair) read(dir, name string) string {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func (p *pair) sync() Report {
	p.t.Helper()
	rep, err := p.s.Sync(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	return rep
}

func TestSyncBothWays(t *testing.T) {
	p := newPair(t)
	p.write(p.local, "src/main.c", "int main;")
	p.write(p.rem, "README", "remote readme")
	rep := p.sync()
	if p.read(p.rem, "src/main.c") != "int main;" || p.read(p.local, "README") != "remote readme" {
		t.Fatalf("the first round did not unite the sides: %+v", rep)
	}
	if !p.sync().Empty() {
		t.Fatal("a second round with no change did something")
	}

	// Changes each way, a mode, a symlink.
	p.write(p.local, "src/main.c", "int main(void) { return 0; }")
	p.write(p.rem, "out.txt", "made in the workspace")
	os.Chmod(filepath.Join(p.rem, "README"), 0o755)
	os.Symlink("src/main.c", filepath.Join(p.local, "link"))
	rep = p.sync()
	if p.read(p.rem, "src/main.c") != "int main(void) { return 0; }" || p.read(p.local, "out.txt") != "made in the workspace" {
		t.Fatalf("changes were not carried: %+v", rep)
	}
	if fi, err := os.Stat(filepath.Join(p.local, "README")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the mode was not carried: %v %v", fi.Mode(), err)
	}
	if target, err := os.Readlink(filepath.Join(p.rem, "link")); err != nil || target != "src/main.c" {
		t.Errorf("the symlink: %q %v", target, err)
	}

	// A deletion is carried, and the directory it empties goes too.
	os.Remove(filepath.Join(p.rem, "src/main.c"))
	rep = p.sync()
	if _, err := os.Stat(filepath.Join(p.local, "src")); !os.IsNotExist(err) || !slices.Contains(rep.Removed, "src/main.c") {
		t.Errorf("the deletion: %v %+v", err, rep)
	}
}

// TestSyncConflictKeepsBoth: a file changed on both sides keeps both
// versions on both sides, and says so; a deletion never wins over a
// change.
func TestSyncConflictKeepsBoth(t *testing.T) {
	p := newPair(t)
	p.write(p.local, "notes.md", "v1")
	p.write(p.local, "gone.md", "v1")
	p.sync()
	p.write(p.local, "notes.md", "mine")
	p.write(p.rem, "notes.md", "the agent's")
	os.Remove(filepath.Join(p.local, "gone.md"))
	p.write(p.rem, "gone.md", "changed in the workspace")
	rep := p.sync()
	kept := "notes.md.conflict-20261201-142530"
	for _, dir := range []string{p.local, p.rem} {
		if p.read(dir, "notes.md") != "mine" || p.read(dir, kept) != "the agent's" {
			t.Errorf("%s: notes.md %q, %s %q", dir, p.read(dir, "notes.md"), kept, p.read(dir, kept))
		}
		if p.read(dir, "gone.md") != "changed in the workspace" {
			t.Errorf("%s: a deletion won over a change: %q", dir, p.read(dir, "gone.md"))
		}
	}
	if !slices.Contains(rep.Conflicts, Conflict{Path: "notes.md", Kept: kept}) || !slices.Contains(rep.Conflicts, Conflict{Path: "gone.md"}) {
		t.Errorf("the report: %+v", rep)
	}
	if !p.sync().Empty() {
		t.Error("the round after a conflict did something")
	}
	// Two sides that made the same file alike agree without a conflict.
	p.write(p.local, "same.txt", "alike")
	p.write(p.rem, "same.txt", "alike")
	if rep := p.sync(); len(rep.Conflicts) != 0 {
		t.Errorf("alike files conflicted: %+v", rep)
	}
}

// TestSyncLeavesIgnoredFiles: what .gitignore excludes stays on the side
// that made it (build outputs stay in the workspace).
func TestSyncLeavesIgnoredFiles(t *testing.T) {
	p := newPair(t, true)
	p.write(p.local, ".gitignore", "build/\n*.o\n")
	p.sync()
	p.write(p.rem, "build/app", "binary")
	p.write(p.rem, "main.o", "object")
	p.write(p.local, "build/local-only", "x")
	p.write(p.rem, "main.c", "source")
	p.sync()
	if p.read(p.local, "main.c") != "source" {
		t.Fatal("main.c was not carried")
	}
	for _, f := range []string{"build/app", "main.o"} {
		if _, err := os.Stat(filepath.Join(p.local, f)); !os.IsNotExist(err) {
			t.Errorf("ignored %s reached the local side", f)
		}
	}
	if _, err := os.Stat(filepath.Join(p.rem, "build/local-only")); !os.IsNotExist(err) {
		t.Error("an ignored local file reached the workspace")
	}
}

// TestSyncRefusesPathsOutside: a side that names a path outside the
// project (a hostile workspace answering a scan) is refused, and nothing
// outside is written.
func TestSyncRefusesPathsOutside(t *testing.T) {
	p := newPair(t)
	outside := filepath.Join(filepath.Dir(p.local), "canary")
	ctx := context.Background()
	for _, bad := range []string{"../canary", "/etc/passwd", "a/../../canary", "", "."} {
		if err := p.s.Local.Write(ctx, bad, Entry{Mode: 0o644, Size: 1, Sum: Sum([]byte("x"))}, []byte("x")); err == nil {
			t.Errorf("Write %q was allowed", bad)
		}
		if err := p.s.Local.Remove(ctx, bad); err == nil {
			t.Errorf("Remove %q was allowed", bad)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Error("something was written outside the project")
	}
	// A symlink out of the project is carried as a link, never followed.
	os.Symlink("/etc", filepath.Join(p.rem, "etc-link"))
	p.sync()
	if target, _ := os.Readlink(filepath.Join(p.local, "etc-link")); target != "/etc" {
		t.Errorf("the link arrived as %q", target)
	}
	if err := p.s.Local.Write(ctx, "etc-link/cove-canary", Entry{Mode: 0o644, Size: 1, Sum: Sum([]byte("x"))}, []byte("x")); err == nil {
		t.Errorf("a write through a link out of the project: %v", err)
	}
	if _, err := os.Stat("/etc/cove-canary"); err == nil {
		os.Remove("/etc/cove-canary")
		t.Fatal("a write went through a symlink out of the project")
	}
}
