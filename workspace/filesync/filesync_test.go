package filesync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	// A deletion is carried; the directory it empties stays, as on the
	// side that deleted; its removal is carried too.
	os.Remove(filepath.Join(p.rem, "src/main.c"))
	rep = p.sync()
	if _, err := os.Stat(filepath.Join(p.local, "src/main.c")); !os.IsNotExist(err) || !slices.Contains(rep.Removed, "src/main.c") {
		t.Errorf("the deletion: %v %+v", err, rep)
	}
	if fi, err := os.Stat(filepath.Join(p.local, "src")); err != nil || !fi.IsDir() {
		t.Errorf("the directory the deletion emptied went: %v", err)
	}
	os.Remove(filepath.Join(p.rem, "src"))
	p.sync()
	if _, err := os.Stat(filepath.Join(p.local, "src")); !os.IsNotExist(err) {
		t.Errorf("the directory's removal was not carried: %v", err)
	}
	if !p.sync().Empty() {
		t.Error("a round after the removals did something")
	}
}

func (p *pair) isDir(dir, name string) (bool, os.FileMode) {
	fi, err := os.Lstat(filepath.Join(dir, name))
	if err != nil || !fi.IsDir() {
		return false, 0
	}
	return true, fi.Mode().Perm()
}

// TestSyncDirectories: directories are carried as files are, empty ones
// among them, made and removed on either side, with their permissions
// (the owner's always all there); a directory removed with what it held
// goes on the other side, but not what the other side made in it
// meanwhile nor what its ignore rules keep there; a file where the other
// side made a directory keeps both.
func TestSyncDirectories(t *testing.T) {
	p := newPair(t, true)
	p.write(p.local, ".gitignore", "build/\n")
	os.MkdirAll(filepath.Join(p.local, "empty/nested"), 0o755)
	os.Mkdir(filepath.Join(p.rem, "made-there"), 0o750)
	os.Mkdir(filepath.Join(p.rem, "locked"), 0o555)
	os.Mkdir(filepath.Join(p.rem, "lost+found"), 0o700) // a volume's root
	p.write(p.rem, "unreadable", "x")
	os.Chmod(filepath.Join(p.rem, "unreadable"), 0)
	p.sync()
	if fi, err := os.Stat(filepath.Join(p.local, "unreadable")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("a file made unreadable there is here as %v (%v), want readable by its owner", fi.Mode(), err)
	}
	if ok, _ := p.isDir(p.local, "lost+found"); ok {
		t.Error("the volume's lost+found came here")
	}
	for _, c := range []struct {
		dir, name string
		mode      os.FileMode
	}{{p.rem, "empty", 0o755}, {p.rem, "empty/nested", 0o755}, {p.local, "made-there", 0o750}, {p.local, "locked", 0o755}} {
		if ok, mode := p.isDir(c.dir, c.name); !ok || mode != c.mode {
			t.Errorf("%s in %s: a directory %v, mode %v; want %v", c.name, c.dir, ok, mode, c.mode)
		}
	}
	if !p.sync().Empty() {
		t.Error("a second round did something")
	}

	// Removed on either side: removed on the other.
	os.Remove(filepath.Join(p.rem, "empty/nested"))
	os.Remove(filepath.Join(p.local, "made-there"))
	p.sync()
	if ok, _ := p.isDir(p.local, "empty/nested"); ok {
		t.Error("empty/nested, removed there, is still here")
	}
	if ok, _ := p.isDir(p.rem, "made-there"); ok {
		t.Error("made-there, removed here, is still there")
	}
	if ok, _ := p.isDir(p.local, "empty"); !ok {
		t.Error("empty, kept on both sides, went")
	}

	// A tree removed whole here; there, a file made in it meanwhile and
	// build outputs the rules keep there. The file comes here (nothing is
	// lost), the outputs stay, and no round fails.
	p.write(p.local, "tree/a/one.txt", "one")
	p.write(p.local, "tree/b/two.txt", "two")
	p.write(p.local, "gone/x.txt", "x")
	p.sync()
	os.RemoveAll(filepath.Join(p.local, "tree"))
	os.RemoveAll(filepath.Join(p.local, "gone"))
	p.write(p.rem, "tree/b/new.txt", "made there meanwhile")
	p.write(p.rem, "gone/build/out.o", "output")
	p.sync()
	p.sync()
	if p.read(p.local, "tree/b/new.txt") != "made there meanwhile" {
		t.Error("a file made in a directory removed on the other side was lost")
	}
	for _, f := range []string{"tree/a", "tree/b/two.txt"} {
		if _, err := os.Lstat(filepath.Join(p.rem, f)); !os.IsNotExist(err) {
			t.Errorf("%s, removed here, is still there", f)
		}
	}
	if p.read(p.rem, "gone/build/out.o") != "output" {
		t.Error("what the ignore rules keep there went")
	}
	if _, err := os.Lstat(filepath.Join(p.rem, "gone/x.txt")); !os.IsNotExist(err) {
		t.Error("gone/x.txt, removed here, is still there")
	}
	if ok, _ := p.isDir(p.local, "gone"); ok {
		t.Error("gone, removed here, came back (it holds only what the rules keep there)")
	}
	if !p.sync().Empty() {
		t.Error("the round after did something")
	}

	// A file made here where a directory was made there: both kept.
	p.write(p.local, "both", "a file here")
	p.write(p.rem, "both/inside.txt", "a directory there")
	rep := p.sync()
	kept := "both.conflict-20261201-142530"
	if !slices.Contains(rep.Conflicts, Conflict{Path: "both", Kept: kept, Dir: true}) {
		t.Errorf("the clash: %+v", rep)
	}
	for _, dir := range []string{p.local, p.rem} {
		if p.read(dir, kept) != "a file here" || p.read(dir, "both/inside.txt") != "a directory there" {
			t.Errorf("%s after the clash: %q %q", dir, p.read(dir, kept), p.read(dir, "both/inside.txt"))
		}
	}

	// A directory replaced by a file, and a file by a directory.
	p.write(p.local, "was-dir/f", "f")
	p.write(p.local, "was-file", "f")
	p.sync()
	os.RemoveAll(filepath.Join(p.local, "was-dir"))
	p.write(p.local, "was-dir", "now a file")
	os.Remove(filepath.Join(p.rem, "was-file"))
	p.write(p.rem, "was-file/f", "now a directory")
	if _, err := p.s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{p.local, p.rem} {
		if p.read(dir, "was-dir") != "now a file" || p.read(dir, "was-file/f") != "now a directory" {
			t.Errorf("%s: was-dir %q, was-file/f %q", dir, p.read(dir, "was-dir"), p.read(dir, "was-file/f"))
		}
	}
	if !p.sync().Empty() {
		t.Error("the round after did something")
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

// planting is a hostile workspace's side: besides its real files, its
// scan claims files in .git (a hook git would run on the host) and under
// a symlink to .git.
type planting struct {
	Tree
	claims map[string]string // path: content, or "->target" for a symlink
}

func (p planting) Scan(ctx context.Context) (Listing, error) {
	l, err := p.Tree.Scan(ctx)
	if err != nil {
		return l, err
	}
	m := l.Entries
	for name, body := range p.claims {
		if target, ok := strings.CutPrefix(body, "->"); ok {
			m[name] = Entry{Mode: fs.ModeSymlink | 0o777, Size: int64(len(target)), Sum: target}
		} else {
			m[name] = Entry{Mode: 0o755, Size: int64(len(body)), Sum: Sum([]byte(body))}
		}
	}
	return l, nil
}

func (p planting) Read(ctx context.Context, name string) ([]byte, error) {
	if body, ok := p.claims[name]; ok {
		return []byte(strings.TrimPrefix(body, "->")), nil
	}
	return p.Tree.Read(ctx, name)
}

// TestSyncNeverWritesGit: the host never receives a .git the workspace
// wrote (its hooks and config would run on the host): neither straight
// into .git nor through a symlink to it; and the rest is synchronised
// all the same.
func TestSyncNeverWritesGit(t *testing.T) {
	p := newPair(t, true)
	os.MkdirAll(filepath.Join(p.local, ".git", "hooks"), 0o755)
	p.write(p.rem, "fine.txt", "fine")
	p.s.Remote = planting{Tree: p.s.Remote, claims: map[string]string{
		".git/hooks/pre-commit":    "#!/bin/sh\ntouch /tmp/pwned\n",
		"sub/.git/config":          "[core]\n\tfsmonitor = touch /tmp/pwned\n",
		"g":                        "->.git",
		"g/hooks/post-checkout":    "#!/bin/sh\ntouch /tmp/pwned\n",
		"deep/link":                "->../.git",
		"deep/link/hooks/pre-push": "#!/bin/sh\ntouch /tmp/pwned\n",
	}}
	p.s.Sync(context.Background())
	p.s.Sync(context.Background())
	for _, f := range []string{".git/hooks/pre-commit", "sub/.git/config", ".git/hooks/post-checkout", ".git/hooks/pre-push"} {
		if _, err := os.Lstat(filepath.Join(p.local, f)); !os.IsNotExist(err) {
			t.Errorf("the workspace wrote %s on the host", f)
		}
	}
	if p.read(p.local, "fine.txt") != "fine" {
		t.Error("the rest was not synchronised")
	}
}

// breaking is the workspace's side whose first write of a conflict copy
// is cut (the connection broke).
type breaking struct {
	Tree
	broke bool
}

func (b *breaking) Write(ctx context.Context, p string, e Entry, data []byte) error {
	if strings.Contains(p, ".conflict-") && !b.broke {
		b.broke = true
		return fmt.Errorf("%w: the stream ended", ErrAway)
	}
	return b.Tree.Write(ctx, p, e, data)
}

// TestSyncConflictOverABreak: a conflict whose round is cut half way (its
// copy made here, not yet there) is settled by the next round, a minute
// later, with one copy on each side, not one per attempt, and nothing
// lost.
func TestSyncConflictOverABreak(t *testing.T) {
	p := newPair(t)
	p.write(p.local, "notes.md", "v1")
	p.sync()
	p.write(p.local, "notes.md", "mine")
	p.write(p.rem, "notes.md", "the agent's")
	p.s.Remote = &breaking{Tree: p.s.Remote}
	if _, err := p.s.Sync(context.Background()); !errors.Is(err, ErrAway) {
		t.Fatalf("the cut round: %v", err)
	}
	p.s.Now = func() time.Time { return time.Date(2026, 12, 1, 14, 26, 30, 0, time.UTC) }
	rep := p.sync()
	kept := "notes.md.conflict-20261201-142530"
	if !slices.Equal(rep.Conflicts, []Conflict{{Path: "notes.md", Kept: kept}}) {
		t.Errorf("the round after the cut: %+v", rep)
	}
	for _, dir := range []string{p.local, p.rem} {
		names, _ := os.ReadDir(dir)
		if len(names) != 2 || p.read(dir, "notes.md") != "mine" || p.read(dir, kept) != "the agent's" {
			t.Errorf("%s holds %v: notes.md %q, %s %q", dir, names, p.read(dir, "notes.md"), kept, p.read(dir, kept))
		}
	}
	if !p.sync().Empty() {
		t.Error("the round after did something")
	}
}

// TestSyncRulesAreThisMachines: this machine's ignore rules decide for
// both sides, whatever the workspace's copy would make of its own (the
// Pod's has no .git, so git's rules do not apply there): build outputs
// made there stay there, and are not deleted there after a round trip;
// node_modules is carried neither way, and never deleted for it; a file
// a new rule hides stays on both sides.
func TestSyncRulesAreThisMachines(t *testing.T) {
	p := newPair(t)
	os.Mkdir(filepath.Join(p.local, ".git"), 0o755)
	l, err := OpenDir(p.local, nil) // a git project here, not there
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p.s.Local = l
	p.write(p.local, ".gitignore", "build/\n*.log\n")
	p.write(p.local, "notes.txt", "notes")
	p.write(p.local, "node_modules/here.js", "here")
	p.sync()
	p.write(p.rem, "build/app", "binary")
	p.write(p.rem, "out.log", "log")
	p.write(p.rem, "node_modules/there.js", "there")
	p.write(p.rem, "main.c", "source")
	p.sync()
	p.sync()
	if p.read(p.local, "main.c") != "source" {
		t.Fatal("main.c was not carried")
	}
	for _, f := range []string{"build/app", "out.log", "node_modules/there.js"} {
		if _, err := os.Lstat(filepath.Join(p.local, f)); !os.IsNotExist(err) {
			t.Errorf("%s came here", f)
		}
	}
	for f, want := range map[string]string{"build/app": "binary", "out.log": "log", "node_modules/there.js": "there"} {
		if got := p.read(p.rem, f); got != want {
			t.Errorf("%s there: %q", f, got)
		}
	}
	if p.read(p.local, "node_modules/here.js") != "here" {
		t.Error("node_modules here was deleted")
	}
	if _, err := os.Lstat(filepath.Join(p.rem, "node_modules/here.js")); !os.IsNotExist(err) {
		t.Error("node_modules went there")
	}
	p.write(p.local, ".gitignore", "build/\n*.log\nnotes.txt\n")
	p.sync()
	p.sync()
	if p.read(p.local, "notes.txt") != "notes" || p.read(p.rem, "notes.txt") != "notes" {
		t.Error("a file a new rule hides was deleted on a side")
	}
	if !p.sync().Empty() {
		t.Error("the round after did something")
	}
}

// failingScans is a Tree whose scans fail while fail is set.
type failingScans struct {
	Tree
	fail atomic.Bool
}

func (f *failingScans) Scan(ctx context.Context) (Listing, error) {
	if f.fail.Load() {
		return Listing{}, errors.New("scan refused")
	}
	return f.Tree.Scan(ctx)
}

// TestRunSaysTheEndOfAFailure: Run reports each failed round and then the
// first good one (empty, no error), so a listener that says a repeated
// failure once knows when it is over; good rounds with nothing to do are
// not reported.
func TestRunSaysTheEndOfAFailure(t *testing.T) {
	p := newPair(t)
	remote := &failingScans{Tree: p.s.Remote}
	p.s.Remote = remote
	remote.fail.Store(true)
	var mu sync.Mutex
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.s.Run(ctx, 10*time.Millisecond, func(r Report, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				got = append(got, "fail")
			} else if r.Empty() {
				got = append(got, "good")
			}
		})
	}()
	time.Sleep(100 * time.Millisecond)
	remote.fail.Store(false)
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	s := strings.Join(got, " ")
	if !strings.HasPrefix(s, "fail") || !strings.HasSuffix(s, "fail good") || strings.Count(s, "good") != 1 {
		t.Errorf("reports %q, want failures then one good", s)
	}
}

// TestSyncEmptiedSideDeletesNothing: a side that lost every file since
// the last round (the project directory removed under the session, and
// cloned again beside it; a volume that came back empty) is not carried
// over as the deletion of everything: the round fails saying so, and
// the other side's files stay. A side with one file left still syncs.
func TestSyncEmptiedSideDeletesNothing(t *testing.T) {
	p := newPair(t)
	p.write(p.local, "a.txt", "a")
	p.write(p.local, "src/b.go", "b")
	p.write(p.rem, "c.txt", "c")
	p.sync()
	os.RemoveAll(filepath.Join(p.local, "src"))
	os.Remove(filepath.Join(p.local, "a.txt"))
	os.Remove(filepath.Join(p.local, "c.txt"))
	_, err := p.s.Sync(context.Background())
	if !errors.Is(err, ErrEmptied) || !strings.Contains(err.Error(), "files here are all gone") {
		t.Fatalf("an emptied project directory: %v", err)
	}
	// Removed whole: the round fails too.
	if err := os.RemoveAll(p.local); err != nil {
		t.Fatal(err)
	}
	if _, err := p.s.Sync(context.Background()); err == nil {
		t.Fatal("a removed project directory: no error")
	}
	for _, f := range []string{"a.txt", "src/b.go", "c.txt"} {
		if _, err := os.Stat(filepath.Join(p.rem, f)); err != nil {
			t.Errorf("%s in the workspace: %v", f, err)
		}
	}

	q := newPair(t)
	q.write(q.local, "a.txt", "a")
	q.write(q.local, "keep.txt", "k")
	q.sync()
	entries, _ := os.ReadDir(q.rem)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(q.rem, e.Name()))
	}
	if _, err := q.s.Sync(context.Background()); !errors.Is(err, ErrEmptied) || !strings.Contains(err.Error(), "in the workspace are all gone") {
		t.Fatalf("an emptied workspace: %v", err)
	}
	if q.read(q.local, "a.txt") != "a" || q.read(q.local, "keep.txt") != "k" {
		t.Error("the local files went with the workspace's")
	}
	// One file left: a deletion like any other.
	q.write(q.rem, "keep.txt", "k")
	os.Remove(filepath.Join(q.local, "a.txt"))
	q.sync()
	if _, err := os.Stat(filepath.Join(q.rem, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt deleted here is still there: %v", err)
	}
}
