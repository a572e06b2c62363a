package agent

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectwalk"
)

// openCheckpoints opens dir's checkpoints in a host-only store of the
// test's, with secret.txt ignored (as the project's .gitignore says; the
// in-process matcher is wired in by the caller).
func openCheckpoints(t testing.TB, dir string) *Checkpoints {
	t.Helper()
	cp, err := OpenCheckpoints(context.Background(), dir, filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	cp.Ignore = func(rel string, isDir bool) bool { return rel == "secret.txt" || DefaultIgnore(rel, isDir) }
	return cp
}

func TestCheckpointsRewindByteForByte(t *testing.T) {
	for _, repo := range []bool{false, true} {
		name := "plain directory"
		if repo {
			name = "git repository"
		}
		t.Run(name, func(t *testing.T) {
			dir := project(t)
			ctx := context.Background()
			gitStatus := func() string {
				out, _ := exec.Command("git", "-C", dir, "status", "--porcelain", "--branch").CombinedOutput()
				return string(out)
			}
			if repo {
				if _, err := exec.LookPath("git"); err != nil {
					t.Skip("no git to make the user's repository with")
				}
				for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "base"}} {
					if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
						t.Fatalf("git %v: %v %s", args, err, out)
					}
				}
			}
			os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
			os.Symlink("notes/a.txt", filepath.Join(dir, "link"))
			os.MkdirAll(filepath.Join(dir, "node_modules", "dep"), 0o755)
			os.WriteFile(filepath.Join(dir, "node_modules", "dep", "index.js"), []byte("kept\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 2000), 0o644)
			syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644) // read, it would hang the save
			before := gitStatus()
			cp := openCheckpoints(t, dir)
			cp.MaxFile = 1000
			first, err := cp.Save(ctx, "fix the tests")
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(filepath.Join(dir, "add.go"))
			os.WriteFile(filepath.Join(dir, "add.go"), []byte("changed\n"), 0o644)
			os.Remove(filepath.Join(dir, "notes/a.txt"))
			os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644)
			os.MkdirAll(filepath.Join(dir, "made/since"), 0o755)
			os.WriteFile(filepath.Join(dir, "made/since/x.txt"), []byte("new\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("ignored, kept\n"), 0o644)
			os.Chmod(filepath.Join(dir, "run.sh"), 0o644)
			os.Remove(filepath.Join(dir, "link"))
			os.Symlink("elsewhere", filepath.Join(dir, "link"))
			os.WriteFile(filepath.Join(dir, "node_modules", "dep", "index.js"), []byte("changed, ignored\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "big.bin"), make([]byte, 3000), 0o644)
			os.WriteFile(filepath.Join(dir, "big-new.bin"), make([]byte, 3000), 0o644)
			if _, err := cp.Save(ctx, "second prompt"); err != nil {
				t.Fatal(err)
			}
			if list, _ := cp.List(ctx); len(list) != 2 || list[0].ID != first || list[0].Label != "fix the tests" || list[1].Label != "second prompt" {
				t.Fatalf("list %+v", list)
			}
			if err := cp.Rewind(ctx, first); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{"add.go": string(orig), "notes/a.txt": "one\ntwo\none\n",
				"secret.txt": "ignored, kept\n", "node_modules/dep/index.js": "changed, ignored\n"} {
				if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
					t.Errorf("%s = %q, want %q", name, b, want)
				}
			}
			for _, name := range []string{"new.txt", "made"} {
				if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
					t.Errorf("%s, made since, is still there (%v)", name, err)
				}
			}
			if fi, _ := os.Stat(filepath.Join(dir, "run.sh")); fi.Mode().Perm() != 0o755 {
				t.Errorf("run.sh's mode: %v", fi.Mode())
			}
			if target, _ := os.Readlink(filepath.Join(dir, "link")); target != "notes/a.txt" {
				t.Errorf("link -> %q", target)
			}
			for name, size := range map[string]int64{"big.bin": 3000, "big-new.bin": 3000} {
				if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() != size {
					t.Errorf("%s, too big to keep, was touched: %v", name, err)
				}
			}
			if fi, err := os.Lstat(filepath.Join(dir, "fifo")); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
				t.Errorf("the FIFO: %v %v", fi, err)
			}
			if repo {
				os.Remove(filepath.Join(dir, "big-new.bin"))
				if after := gitStatus(); after != before {
					t.Errorf("the user's repository changed:\n%s\nwas\n%s", after, before)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, ".cove")); !os.IsNotExist(err) {
				t.Errorf("cove wrote into the project's .cove: %v", err)
			}
		})
	}
}

// TestCheckpointsStatCache: a second save reads only what changed (a file
// rewritten with the same size, one chmodded, one new), and the
// checkpoint still has every file.
func TestCheckpointsStatCache(t *testing.T) {
	dir := project(t)
	ctx := context.Background()
	cp := openCheckpoints(t, dir)
	cp.racy = time.Nanosecond // the files were written just now
	if _, err := cp.Save(ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if cp.hashed != 5 { // secret.txt is ignored
		t.Fatalf("first save hashed %d files", cp.hashed)
	}
	second, err := cp.Save(ctx, "two")
	if err != nil || cp.hashed != 0 {
		t.Fatalf("an unchanged project: %d files read again (%v)", cp.hashed, err)
	}
	orig, _ := os.ReadFile(filepath.Join(dir, "add.go"))
	os.WriteFile(filepath.Join(dir, "add.go"), []byte(strings.Repeat("x", len(orig))), 0o644) // as long as before
	os.Chmod(filepath.Join(dir, "go.mod"), 0o600)
	os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644)
	if _, err := cp.Save(ctx, "three"); err != nil || cp.hashed != 3 {
		t.Fatalf("after three changes: %d files read (%v)", cp.hashed, err)
	}
	// A new Checkpoints (the next cove) takes the cache from the store.
	again, err := OpenCheckpoints(ctx, dir, cp.Store)
	if err != nil {
		t.Fatal(err)
	}
	again.Ignore, again.racy = cp.Ignore, cp.racy
	if _, err := again.Save(ctx, "four"); err != nil || again.hashed != 0 {
		t.Fatalf("the next cove read %d files (%v)", again.hashed, err)
	}
	if err := again.Rewind(ctx, second); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "add.go")); !strings.Contains(string(b), "return a - b") {
		t.Errorf("add.go after the rewind: %q", b)
	}
	if err := again.Rewind(ctx, "../../etc/passwd"); err == nil {
		t.Error("a rewind to a path, not an id, went through")
	}
}

// TestCheckpointsRunNothingFromTheProject: the workspace arms the
// checkpoint repository older cove kept in the project (fsmonitor, hooks,
// a filter the project's .gitattributes applies) and the user's own
// .git; a checkpoint and a rewind run none of it. (It failed on the git
// checkpoints: the filter and the hook ran on the host.)
func TestCheckpointsRunNothingFromTheProject(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to make the repositories the attack plants")
	}
	dir := project(t)
	canary := filepath.Join(t.TempDir(), "CANARY") // host-only
	touch := func(why string) string { return fmt.Sprintf("sh -c 'touch %s.%s; cat'", canary, why) }
	for _, repo := range []string{filepath.Join(dir, ".cove", "checkpoints.git"), filepath.Join(dir, ".git")} {
		if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		config := fmt.Sprintf("[core]\n\tfsmonitor = %q\n\thooksPath = %s\n[filter \"evil\"]\n\tclean = %q\n\tsmudge = %q\n\trequired = true\n",
			touch("fsmonitor"), filepath.Join(repo, "evil-hooks"), touch("clean"), touch("smudge"))
		f, _ := os.OpenFile(filepath.Join(repo, "config"), os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(config)
		f.Close()
		for _, dir := range []string{"hooks", "evil-hooks"} {
			os.MkdirAll(filepath.Join(repo, dir), 0o755)
			for _, hook := range []string{"reference-transaction", "post-commit", "post-checkout", "pre-commit"} {
				os.WriteFile(filepath.Join(repo, dir, hook), []byte("#!/bin/sh\ntouch "+canary+".hook\n"), 0o755)
			}
		}
	}
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("* filter=evil\n"), 0o644)
	ctx := context.Background()
	cp := openCheckpoints(t, dir)
	id, err := cp.Save(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "add.go"), []byte("changed\n"), 0o644)
	if _, err := cp.Save(ctx, "second"); err != nil {
		t.Fatal(err)
	}
	if err := cp.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ran, _ := filepath.Glob(canary + "*"); len(ran) > 0 {
		t.Errorf("the workspace's commands ran on the host: %v", ran)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "add.go")); !strings.Contains(string(b), "func Add") {
		t.Errorf("add.go after the rewind: %q", b)
	}
}

// TestRewindKeepsTheBytes: a project's .gitattributes (eol=crlf, text)
// does not change what a rewind brings back. (It failed on the git
// checkpoints: LF came back as CRLF.)
func TestRewindKeepsTheBytes(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{".gitattributes": "* text eol=crlf\n", "lf.txt": "one\ntwo\n", "mixed.txt": "a\r\nb\nc",
		"bin.dat": "\x00\x01\r\n\xff"}
	for name, body := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	ctx := context.Background()
	cp := openCheckpoints(t, dir)
	id, err := cp.Save(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if name != ".gitattributes" {
			os.WriteFile(filepath.Join(dir, name), []byte("changed\n"), 0o644)
		}
	}
	if err := cp.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != want {
			t.Errorf("%s = %q, want %q", name, b, want)
		}
	}
}

// TestNothingThroughACoveSymlink: .cove a symlink to a host directory:
// a checkpoint, a rewind, a session and saved output write nothing there,
// nor read it. (It failed before: .cove/.gitignore, the session and the
// checkpoint repository were written through it.)
func TestNothingThroughACoveSymlink(t *testing.T) {
	dir := project(t)
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "host-secret.txt"), []byte("host\n"), 0o600)
	if err := os.Symlink(host, filepath.Join(dir, ".cove")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	ctx := context.Background()
	cp, err := OpenCheckpoints(ctx, dir, filepath.Join(state, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cp.Save(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "add.go"), []byte("changed\n"), 0o644)
	if err := cp.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(filepath.Join(state, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "hi"}})
	s.Close()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bash := &BashTool{W: w, Out: filepath.Join(state, "out")}
	defer bash.Close()
	out, _, err := bash.run(ctx, "head -c 40000 /dev/zero | tr '\\0' x", time.Minute, nil)
	if err != nil || !strings.Contains(out, "read cove-out:") {
		t.Fatalf("long output: %.200q %v", out, err)
	}
	entries, _ := os.ReadDir(host)
	if len(entries) != 1 || entries[0].Name() != "host-secret.txt" {
		t.Errorf("written through the symlink: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "host-secret.txt")); string(b) != "host\n" {
		t.Errorf("the host's file: %q", b)
	}
	m, err := cp.load(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.Entries {
		if strings.HasPrefix(e.Path, ".cove/") {
			t.Errorf("the checkpoint went through the symlink: %s", e.Path)
		}
	}
	if target, _ := os.Readlink(filepath.Join(dir, ".cove")); target != host {
		t.Errorf(".cove after the rewind -> %q", target)
	}
}

// TestSavedOutputReadable: the model reads a command's saved output by the
// name the bash tool gave it, and nothing else by that way.
func TestSavedOutputReadable(t *testing.T) {
	dir := project(t)
	out := filepath.Join(t.TempDir(), "out")
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bash := &BashTool{W: w, Out: out}
	defer bash.Close()
	ctx := context.Background()
	res, _, err := bash.run(ctx, "seq 1 20000", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, name, ok := strings.Cut(res, "read ")
	name, _, _ = strings.Cut(name, ")")
	if !ok || !strings.HasPrefix(name, "cove-out:") {
		t.Fatalf("no saved output named: %.300q", res)
	}
	read := func(p string, offset int) (string, error) {
		act, err := ReadTool{W: w, Out: out}.Plan(ctx, []byte(fmt.Sprintf(`{"path":%q,"offset":%d,"limit":1}`, p, offset)))
		if err != nil {
			return "", err
		}
		return act.Do(ctx)
	}
	if got, err := read(name, 15000); err != nil || got != " 15000\t15000\n(5000 more lines: read with offset 15001)\n" {
		t.Errorf("line 15000 of %s: %q %v", name, got, err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the saved output's directory: %v", err)
	}
	os.WriteFile(filepath.Join(filepath.Dir(out), "secret.txt"), []byte("x\n"), 0o644)
	for _, p := range []string{"cove-out:../secret.txt", "cove-out:/etc/passwd", "cove-out:1-1.txt"} {
		if got, err := read(p, 1); err == nil {
			t.Errorf("%s read: %q", p, got)
		}
	}
}

// TestStateStaysTheOwners: run as root through sudo on a user's project,
// the agent's state (checkpoints, sessions, in the user's state directory)
// and the files a rewind brings back are the user's.
func TestStateStaysTheOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u, err := user.Lookup("covetest")
	if err != nil {
		t.Skip("no covetest user (scripts/test.sh makes it)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	project, err := os.MkdirTemp("", "cove-owner-") // t.TempDir's parent is closed to others
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(project) })
	os.Chmod(project, 0o755)
	os.WriteFile(filepath.Join(project, "kept.txt"), []byte("kept\n"), 0o644)
	for _, p := range []string{project, filepath.Join(project, "kept.txt")} {
		os.Chown(p, uid, gid)
	}
	home := t.TempDir()
	os.Chown(home, uid, gid)
	layout, err := dirs.Resolve(dirs.Env{UID: 0, Home: "/root", SudoUID: uid, SudoGID: gid, SudoHome: home})
	if err != nil {
		t.Fatal(err)
	}
	state, err := layout.ProjectState("project-abc123")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, ".local/state/cove/projects/project-abc123"); state != want {
		t.Fatalf("state in %s, want %s", state, want)
	}
	ctx := context.Background()
	cp, err := OpenCheckpoints(ctx, project, filepath.Join(state, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cp.Save(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(filepath.Join(state, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "hi"}})
	s.Close()
	os.Remove(filepath.Join(project, "kept.txt"))
	os.MkdirAll(filepath.Join(project, "gone"), 0o755)
	if err := cp.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, tree := range []string{project, home} {
		filepath.Walk(tree, func(p string, fi os.FileInfo, err error) error {
			if err == nil {
				if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
					t.Errorf("%s is owned by %d, want covetest (%d)", p, st.Uid, uid)
				}
			}
			return nil
		})
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the state directory: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "kept.txt")); string(b) != "kept\n" {
		t.Errorf("kept.txt after the rewind: %q", b)
	}
}

// TestCheckpointsHonourGitignore: with the in-process matcher wired in as
// cove agent does, what the project's .gitignore hides (nested rules
// too, and rules added after the first save) is neither saved nor
// removed by a rewind, while a file made since is.
func TestCheckpointsHonourGitignore(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\nbuild/\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	os.WriteFile(filepath.Join(dir, "sub", ".gitignore"), []byte("local.txt\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.c"), []byte("int main;\n"), 0o644)
	tree, err := projectwalk.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	cp, err := OpenCheckpoints(context.Background(), dir, filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	cp.NewIgnore = tree.Ignorer
	id, err := cp.Save(context.Background(), "before")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"made-since.c": "x", "run.log": "kept", "build/out.o": "kept", "sub/local.txt": "kept"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	if err := cp.Rewind(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "made-since.c")); err == nil {
		t.Error("a file made since the checkpoint survived the rewind")
	}
	for _, name := range []string{"run.log", "build/out.o", "sub/local.txt"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "kept" {
			t.Errorf("the rewind touched the ignored %s: %q %v", name, b, err)
		}
	}
}

// TestCheckpointsShareSiblingsCopies: a store given another's (Share)
// links the copies that one holds instead of writing them again; each
// keeps its links, so the first store removed, the second still rewinds
// its project to the bytes saved; a copy it did not hold is written.
func TestCheckpointsShareSiblingsCopies(t *testing.T) {
	ctx := context.Background()
	first, second := project(t), project(t)
	a := openCheckpoints(t, first)
	if _, err := a.Save(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(second, "only-here.txt"), []byte("new in the second\n"), 0o644)
	b := openCheckpoints(t, second)
	b.Share = []string{"/nonexistent", a.Store}
	id, err := b.Save(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	linked, written := 0, 0
	filepath.WalkDir(filepath.Join(b.Store, "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, _ := d.Info()
		if fi.Sys().(*syscall.Stat_t).Nlink == 2 {
			linked++
		} else {
			written++
		}
		return nil
	})
	if linked == 0 || written != 1 {
		t.Errorf("the second store: %d copies linked from the first, %d written (want all but only-here.txt linked)", linked, written)
	}
	want, _ := os.ReadFile(filepath.Join(second, "notes", "a.txt"))
	if err := os.RemoveAll(a.Store); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(second, "notes", "a.txt"), []byte("changed\n"), 0o644)
	if err := b.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(second, "notes", "a.txt")); string(got) != string(want) || len(want) == 0 {
		t.Errorf("rewound after the first store went: %q, want %q", got, want)
	}
}
