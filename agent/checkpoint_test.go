package agent

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestCheckpointsRewindByteForByte(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
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
				for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "base"}} {
					if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
						t.Fatalf("git %v: %v %s", args, err, out)
					}
				}
			}
			before := gitStatus()
			cp, err := OpenCheckpoints(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			first, err := cp.Save(ctx, "fix the tests")
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(filepath.Join(dir, "add.go"))
			os.WriteFile(filepath.Join(dir, "add.go"), []byte("changed\n"), 0o644)
			os.Remove(filepath.Join(dir, "notes/a.txt"))
			os.WriteFile(filepath.Join(dir, "new.txt"), []byte("new\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("ignored, kept\n"), 0o644)
			if _, err := cp.Save(ctx, "second prompt"); err != nil {
				t.Fatal(err)
			}
			if list, _ := cp.List(ctx); len(list) != 2 || list[0].ID != first || list[0].Label != "fix the tests" {
				t.Fatalf("list %+v", list)
			}
			if err := cp.Rewind(ctx, first); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "add.go")); string(b) != string(orig) {
				t.Errorf("add.go = %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "notes/a.txt")); string(b) != "one\ntwo\none\n" {
				t.Errorf("the removed file did not come back: %q", b)
			}
			if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
				t.Errorf("the file made since is still there")
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "secret.txt")); string(b) != "ignored, kept\n" {
				t.Errorf("an ignored file was touched: %q", b)
			}
			if repo {
				if after := gitStatus(); after != before {
					t.Errorf("the user's repository changed:\n%s\nwas\n%s", after, before)
				}
			}
		})
	}
}

// TestStateStaysTheOwners: run as root on a user's project (sudo cove),
// the agent's own state (.cove: checkpoints, sessions) and the files a
// rewind brings back are the user's.
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
	ctx := context.Background()
	cp, err := OpenCheckpoints(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	id, err := cp.Save(ctx, "first")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(filepath.Join(project, ".cove", "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "hi"}})
	s.Close()
	os.Remove(filepath.Join(project, "kept.txt"))
	if err := cp.Rewind(ctx, id); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(project, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
				t.Errorf("%s is owned by %d, want covetest (%d)", p, st.Uid, uid)
			}
		}
		return nil
	})
	if b, _ := os.ReadFile(filepath.Join(project, "kept.txt")); string(b) != "kept\n" {
		t.Errorf("kept.txt after the rewind: %q", b)
	}
}
