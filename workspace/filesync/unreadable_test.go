package filesync

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cove-sh/cove/internal/testuser"
)

// overAStream puts p's remote side behind Serve and a Remote, as a Pod's
// is: what it could not read crosses the wire.
func (p *pair) overAStream() {
	a, b := net.Pipe()
	go Serve(b, p.s.Remote)
	r := NewRemote(a)
	p.t.Cleanup(func() { r.Close() })
	p.s.Remote = r
}

// closeUp makes name under dir unreadable (chmod 000) until open, or the
// test's end, gives it mode back.
func (p *pair) closeUp(dir, name string, mode os.FileMode) (open func()) {
	p.t.Helper()
	f := filepath.Join(dir, name)
	if err := os.Chmod(f, 0); err != nil {
		p.t.Fatal(err)
	}
	open = func() { os.Chmod(f, mode) }
	p.t.Cleanup(open) // or the temporary directory cannot be removed
	return open
}

// TestSyncLeavesUnreadableDirsAlone: a directory one side cannot read
// (chmod 000, as a user other than root) does not look deleted there:
// nothing in it is deleted or written on either side, each side says so
// once, naming it; once it can be read again, what changed meanwhile on
// either side is carried, and later changes too. Both ways: here, and in
// the workspace (over the stream).
func TestSyncLeavesUnreadableDirsAlone(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	p := newPair(t)
	p.overAStream()
	p.write(p.local, "keep/a.txt", "a")
	p.write(p.local, "keep/sub/same.txt", "same")
	p.write(p.local, "keep/sub/changed.txt", "v1")
	p.write(p.rem, "there/c.txt", "c v1")
	p.write(p.rem, "there/deep/d.txt", "d")
	p.sync()
	if p.read(p.rem, "keep/sub/same.txt") != "same" || p.read(p.local, "there/deep/d.txt") != "d" {
		t.Fatal("the first round did not unite the sides")
	}

	openHere := p.closeUp(p.local, "keep/sub", 0o755)
	openThere := p.closeUp(p.rem, "there", 0o755)
	p.write(p.rem, "keep/sub/changed.txt", "v2 from the workspace")
	p.write(p.local, "there/c.txt", "c v2 from here")
	rep, err := p.s.Sync(context.Background())
	if err != nil {
		t.Errorf("the round with unreadable directories: %v", err)
	}
	for _, c := range []struct{ dir, name, want string }{
		{p.rem, "keep/sub/same.txt", "same"},
		{p.rem, "keep/sub/changed.txt", "v2 from the workspace"},
		{p.local, "there/c.txt", "c v2 from here"},
		{p.local, "there/deep/d.txt", "d"},
	} {
		if got := p.read(c.dir, c.name); got != c.want {
			t.Errorf("%s in %s: %q, want %q (the other side could not read it)", c.name, c.dir, got, c.want)
		}
	}
	if len(rep.Removed) != 0 || len(rep.Conflicts) != 0 {
		t.Errorf("the round removed %q, conflicts %+v", rep.Removed, rep.Conflicts)
	}
	wantHere := []Unreadable{{Path: "keep/sub", Dir: true, Why: "permission denied"}}
	wantThere := []Unreadable{{Path: "there", Dir: true, Why: "permission denied"}}
	if !slices.Equal(rep.UnreadableLocal, wantHere) || !slices.Equal(rep.UnreadableRemote, wantThere) {
		t.Errorf("unreadable here %+v, there %+v; want %+v, %+v", rep.UnreadableLocal, rep.UnreadableRemote, wantHere, wantThere)
	}
	if rep := p.sync(); !rep.Empty() {
		t.Errorf("the next round, nothing changed, reported %+v (said once)", rep)
	}

	openHere()
	openThere()
	rep = p.sync()
	for _, dir := range []string{p.local, p.rem} {
		if got := p.read(dir, "keep/sub/changed.txt"); got != "v2 from the workspace" {
			t.Errorf("keep/sub/changed.txt in %s once readable: %q", dir, got)
		}
		if got := p.read(dir, "there/c.txt"); got != "c v2 from here" {
			t.Errorf("there/c.txt in %s once readable: %q", dir, got)
		}
		if p.read(dir, "keep/sub/same.txt") != "same" || p.read(dir, "there/deep/d.txt") != "d" {
			t.Errorf("%s lost a file once readable", dir)
		}
	}
	if len(rep.Conflicts) != 0 || len(rep.Removed) != 0 {
		t.Errorf("the round once readable: %+v", rep)
	}
	p.write(p.local, "keep/sub/same.txt", "later, here")
	os.Remove(filepath.Join(p.rem, "there/deep/d.txt"))
	p.sync()
	if p.read(p.rem, "keep/sub/same.txt") != "later, here" {
		t.Error("a later change was not carried")
	}
	if _, err := os.Lstat(filepath.Join(p.local, "there/deep/d.txt")); !os.IsNotExist(err) {
		t.Error("a later deletion was not carried")
	}
	if rep := p.sync(); !rep.Empty() {
		t.Errorf("the round after: %+v", rep)
	}

	// Closed again: said again.
	p.closeUp(p.local, "keep/sub", 0o755)
	if rep := p.sync(); !slices.Equal(rep.UnreadableLocal, wantHere) {
		t.Errorf("closed again: %+v", rep.UnreadableLocal)
	}
}

// TestSyncLeavesUnreadableFilesAlone: a file one side cannot read is
// neither deleted on the other nor overwritten by it, and the rest of the
// project is synchronised all the same (it held every round up before);
// once readable, what changed meanwhile on both sides is kept.
func TestSyncLeavesUnreadableFilesAlone(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	p := newPair(t)
	p.overAStream()
	p.write(p.local, "secret.txt", "v1")
	p.write(p.rem, "theirs.txt", "v1")
	p.sync()
	p.write(p.local, "secret.txt", "mine, unreadable")
	openHere := p.closeUp(p.local, "secret.txt", 0o644)
	p.write(p.rem, "secret.txt", "the workspace's")
	openThere := p.closeUp(p.rem, "theirs.txt", 0o644)
	p.write(p.local, "other.txt", "made here meanwhile")
	rep, err := p.s.Sync(context.Background())
	if err != nil {
		t.Errorf("the round with unreadable files: %v", err)
	}
	if p.read(p.rem, "other.txt") != "made here meanwhile" {
		t.Error("the rest was not synchronised")
	}
	openHere()
	openThere()
	if p.read(p.local, "secret.txt") != "mine, unreadable" || p.read(p.rem, "secret.txt") != "the workspace's" {
		t.Errorf("secret.txt, unreadable here: here %q, there %q", p.read(p.local, "secret.txt"), p.read(p.rem, "secret.txt"))
	}
	if p.read(p.local, "theirs.txt") != "v1" {
		t.Errorf("theirs.txt, unreadable there, is here %q", p.read(p.local, "theirs.txt"))
	}
	if want := []Unreadable{{Path: "secret.txt", Why: "permission denied"}}; !slices.Equal(rep.UnreadableLocal, want) {
		t.Errorf("unreadable here: %+v, want %+v", rep.UnreadableLocal, want)
	}
	if want := []Unreadable{{Path: "theirs.txt", Why: "permission denied"}}; !slices.Equal(rep.UnreadableRemote, want) {
		t.Errorf("unreadable there: %+v, want %+v", rep.UnreadableRemote, want)
	}
	rep = p.sync()
	kept := "secret.txt.conflict-20261201-142530"
	if !slices.Equal(rep.Conflicts, []Conflict{{Path: "secret.txt", Kept: kept}}) {
		t.Errorf("once readable: %+v", rep)
	}
	for _, dir := range []string{p.local, p.rem} {
		if p.read(dir, "secret.txt") != "mine, unreadable" || p.read(dir, kept) != "the workspace's" {
			t.Errorf("%s once readable: secret.txt %q, %s %q", dir, p.read(dir, "secret.txt"), kept, p.read(dir, kept))
		}
	}
}

// TestSyncUnreadableIgnoredIsNotSaid: a directory the workspace cannot
// read where this machine's rules hide it (build outputs in a Pod's copy,
// which has no .git for git's rules to apply) is not said: the sync does
// not carry it anyway.
func TestSyncUnreadableIgnoredIsNotSaid(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	p := newPair(t)
	os.Mkdir(filepath.Join(p.local, ".git"), 0o755)
	l, err := OpenDir(p.local, nil) // a git project here, not there
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p.s.Local = l
	p.overAStream()
	p.write(p.local, ".gitignore", "build/\n")
	p.write(p.rem, "build/out/app", "binary")
	p.write(p.rem, "src/closed/x.c", "x")
	p.closeUp(p.rem, "build/out", 0o755)
	p.closeUp(p.rem, "src/closed", 0o755)
	rep := p.sync()
	if want := []Unreadable{{Path: "src/closed", Dir: true, Why: "permission denied"}}; !slices.Equal(rep.UnreadableRemote, want) {
		t.Errorf("unreadable there: %+v, want %+v", rep.UnreadableRemote, want)
	}
}
