package ide

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestGitReadsTakeNoLock: the Source Control view's reads (status, a
// diff, the branches), which the page makes whenever a file changes, never
// take the repository's index.lock: one held when the user commits, in
// the view or in a terminal, fails that commit ("Unable to create
// '.git/index.lock': File exists"), as it did once in TestBrowserSourceControl.
// git status refreshes the index under that lock unless told not to.
func TestGitReadsTakeNoLock(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	project := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=T", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", project}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	f := filepath.Join(project, "f.txt")
	os.WriteFile(f, []byte("one\n"), 0o644)
	if out, err := exec.Command("git", "-C", project, "add", "f.txt").CombinedOutput(); err != nil {
		t.Fatalf("git add: %v %s", err, out)
	}
	// A stat that differs from the index's: a status would write it.
	later := time.Now().Add(time.Hour)
	os.Chtimes(f, later, later)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(filepath.Join(project, ".git")); err != nil {
		t.Fatal(err)
	}
	p, base := stack(t, project)
	c := authed(t, p)
	for _, path := range []string{"/api/git/status", "/api/git/diff?path=f.txt", "/api/git/diff?path=f.txt&staged=1", "/api/git/branches"} {
		if code, body := get(t, c, base+path, nil); code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	// fsnotify's events come in order: a last file made after the reads
	// is seen after any they made.
	os.WriteFile(filepath.Join(project, ".git", "cove-test-end"), nil, 0o644)
	for ev := range w.Events {
		if filepath.Base(ev.Name) == "index.lock" {
			t.Fatalf("a read of the Source Control view took .git/index.lock (%s)", ev.Op)
		}
		if filepath.Base(ev.Name) == "cove-test-end" {
			return
		}
	}
}
