package kube

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/workspace/filesync"
)

// TestHostilePodCannotReachTheHost: a workspace Pod replaces cove's sync
// server in /.cove with its own (any process in the Pod can write there)
// and answers the launcher's sync with lies: paths out of the project,
// into .git, through a symlink, absolute ones, odd modes, content other
// than listed, answers larger than cove reads. On the host nothing lands
// outside the project or in its .git, no setuid bit and no special file
// appears, the project's own files stay, and each lie is named.
func TestHostilePodCannotReachTheHost(t *testing.T) {
	k := testCluster(t)
	ref := busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := fmt.Sprintf("h%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	p, err := k.Ensure(ctx, Spec{Name: name, Image: ref, Volume: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}

	// The workspace's own sync server, put in place from inside.
	liar := filepath.Join(t.TempDir(), "hostilesync")
	build := exec.Command("go", "build", "-o", liar, "./testdata/hostilesync")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := os.Open(liar)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code, err := p.Exec(ctx, []string{"/bin/sh", "-c", "cat > " + CovePath + ".x && chmod 755 " + CovePath + ".x && mv " + CovePath + ".x " + CovePath}, ExecOptions{Stdin: f})
	if err != nil || code != 0 {
		t.Fatalf("the workspace could not replace cove's sync server (%d, %v): the test shows nothing", code, err)
	}

	// The laptop: a project with its history, and a directory beside it.
	parent := t.TempDir()
	laptop, outside := filepath.Join(parent, "project"), filepath.Join(parent, "outside")
	for _, d := range []string{laptop, outside, filepath.Join(laptop, ".git/hooks")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(laptop, "main.go"), []byte("package main\n"), 0o644)
	os.WriteFile(filepath.Join(laptop, ".git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	gitBefore := treeSum(t, filepath.Join(laptop, ".git"))
	local, err := filesync.OpenDir(laptop, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	// As a Session dials it: a stream cut for a lie is opened again.
	remote := filesync.DialRemote(p.SyncDialer(ctx), filesync.RemoteOptions{})
	defer remote.Close()
	syncer := &filesync.Syncer{Local: local, Remote: remote}
	if _, err := syncer.Sync(ctx); err != nil {
		t.Fatalf("an honest first round: %v", err)
	}

	attacks := []struct {
		mode, arg string
		refused   string // in the round's error; "" when the round may pass
	}{
		{"escape", "../outside", "refused path"},
		{"middle", "../outside", "refused path"},
		{"absolute", outside, "refused path"},
		{"git", "", "never carries .git"},
		{"subgit", "", "never carries .git"},
		{"nul", "", "refused path"},
		{"link", outside, "not a directory"},
		{"gitlink", "", "not a directory"},
		{"setuid", "", `"suid" is ugt`},
		{"special", "", "the workspace says"},
		{"sum", "", ""}, // read as other than listed: not taken, tried again next round
		// Cut where a file's answer ends (answerBudget): cove read more
		// than MaxFileSize before saying "the workspace sent N bytes".
		{"huge", "", "larger than cove reads"},
		// A scan of more entries than cove syncs is refused too
		// (TestRemoteRefusesAFlood); over this cluster's exec a million
		// entries take longer than a stream's opening is given.
	}
	for _, a := range attacks {
		if _, _, code := run(t, p, "sh", "-c", "rm -rf "+WorkspaceDir+"/ln "+WorkspaceDir+"/g; echo '"+a.mode+" "+a.arg+"' > "+WorkspaceDir+"/.attack"); code != 0 {
			t.Fatalf("%s: could not arm the attack", a.mode)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.HeapAlloc
		start := time.Now()
		_, err := syncer.Sync(ctx)
		runtime.ReadMemStats(&ms)
		t.Logf("%s: %v in %v (heap grew %d MiB)", a.mode, err, time.Since(start).Round(time.Millisecond), (int64(ms.HeapAlloc)-int64(before))>>20)
		switch {
		case a.refused != "" && (err == nil || !strings.Contains(err.Error(), a.refused)):
			t.Errorf("%s: the round's error %v does not name the lie (%q)", a.mode, err, a.refused)
		case a.refused == "" && err != nil:
			t.Errorf("%s: %v", a.mode, err)
		}

		// What must hold after every attack.
		if ents, _ := os.ReadDir(outside); len(ents) != 0 {
			t.Errorf("%s: %d entries appeared outside the project", a.mode, len(ents))
		}
		if treeSum(t, filepath.Join(laptop, ".git")) != gitBefore {
			t.Errorf("%s: the project's .git changed", a.mode)
		}
		if b, err := os.ReadFile(filepath.Join(laptop, "main.go")); err != nil || string(b) != "package main\n" {
			t.Errorf("%s: the project's own file: %q %v", a.mode, b, err)
		}
		filepath.WalkDir(laptop, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := os.Lstat(path)
			if err != nil {
				return nil
			}
			m := fi.Mode()
			if m&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky|fs.ModeDevice|fs.ModeCharDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
				t.Errorf("%s: %s is %v on the host", a.mode, path, m)
			}
			if strings.Contains(path, "vendor/x/.git") {
				t.Errorf("%s: %s was written", a.mode, path)
			}
			return nil
		})
	}
	// What the lies may write is plain files of the project's, no more.
	for _, name := range []string{"suid", "sum.txt", "huge", "fifo", "sock", "dev", "ln", "g"} {
		if _, err := os.Lstat(filepath.Join(laptop, name)); err == nil {
			t.Errorf("%s was written on the host", name)
		}
	}
	// The Pod told the truth again: the sync goes on.
	run(t, p, "rm", "-f", WorkspaceDir+"/.attack")
	run(t, p, "sh", "-c", "echo fine > "+WorkspaceDir+"/after.txt")
	// The stream the last lie broke is opened again after a backoff (a
	// quarter second at first): rounds go on as a session's would.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := syncer.Sync(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a round after the lies stopped: %v", err)
			break
		}
	}
	if b, _ := os.ReadFile(filepath.Join(laptop, "after.txt")); string(b) != "fine\n" {
		t.Errorf("the sync did not go on after the lies: %q", b)
	}
}

// treeSum is a digest of the names, modes and contents under dir.
func treeSum(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := os.Lstat(path)
		fmt.Fprintf(h, "%s %v\n", path, fi.Mode())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(path)
			h.Write(b)
		}
		return nil
	})
	return fmt.Sprintf("%x", h.Sum(nil))
}
