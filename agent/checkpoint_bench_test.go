package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchTree makes a project of 10,000 files (100 directories of 100, 0.5
// to 4.5 KiB each, 25 MB in all), like a mid-sized repository's source.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	line := strings.Repeat("the quick brown fox jumps over the lazy dog ", 2) + "\n"
	for d := range 100 {
		sub := filepath.Join(dir, fmt.Sprintf("pkg%02d", d))
		os.MkdirAll(sub, 0o755)
		for f := range 100 {
			n := 512 + (d*100+f)%4096
			body := fmt.Sprintf("// file %d/%d\n", d, f) + strings.Repeat(line, n/len(line)+1)[:n]
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%03d.go", f)), []byte(body), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// BenchmarkCheckpointSave measures a checkpoint of 10k files: "first"
// into an empty store (every file read, hashed and stored), "second"
// with nothing changed since the last (the stat cache: no file read).
// The files are taken as written long enough ago to be trusted by their
// stat, as a project's mostly are at a prompt.
func BenchmarkCheckpointSave(b *testing.B) {
	dir := benchTree(b)
	ctx := context.Background()
	b.Run("first", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			store := b.TempDir()
			cp, err := OpenCheckpoints(ctx, dir, filepath.Join(store, "checkpoints"))
			if err != nil {
				b.Fatal(err)
			}
			cp.racy = time.Nanosecond
			b.StartTimer()
			if _, err := cp.Save(ctx, "prompt"); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(store)
			b.StartTimer()
		}
	})
	b.Run("second", func(b *testing.B) {
		cp, err := OpenCheckpoints(ctx, dir, filepath.Join(b.TempDir(), "checkpoints"))
		if err != nil {
			b.Fatal(err)
		}
		cp.racy = time.Nanosecond
		if _, err := cp.Save(ctx, "prompt"); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := cp.Save(ctx, "prompt"); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if cp.hashed != 0 {
			b.Fatalf("an unchanged tree: %d files read", cp.hashed)
		}
	})
}

// BenchmarkCheckpointSaveGit is the same with the git checkpoints cove
// had before (git add --all into a fresh index, write-tree, commit-tree,
// update-ref in a repository of their own), for comparison.
func BenchmarkCheckpointSaveGit(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("no git")
	}
	dir := benchTree(b)
	git := func(b *testing.B, gitDir string, env []string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GIT_DIR="+gitDir, "GIT_WORK_TREE="+dir, "GIT_AUTHOR_NAME=cove",
			"GIT_AUTHOR_EMAIL=cove@localhost", "GIT_COMMITTER_NAME=cove", "GIT_COMMITTER_EMAIL=cove@localhost"), env...)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	save := func(b *testing.B, gitDir string) {
		index := filepath.Join(gitDir, "index-bench")
		os.Remove(index)
		env := []string{"GIT_INDEX_FILE=" + index}
		git(b, gitDir, env, "add", "--all", ".")
		tree := git(b, gitDir, env, "write-tree")
		commit := git(b, gitDir, nil, "commit-tree", tree, "-m", "prompt")
		git(b, gitDir, nil, "update-ref", "refs/cove/checkpoints", commit)
	}
	newRepo := func(b *testing.B) string {
		gitDir := filepath.Join(b.TempDir(), "checkpoints.git")
		if out, err := exec.Command("git", "init", "-q", "--bare", gitDir).CombinedOutput(); err != nil {
			b.Fatalf("%v %s", err, out)
		}
		return gitDir
	}
	b.Run("first", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			gitDir := newRepo(b)
			b.StartTimer()
			save(b, gitDir)
			b.StopTimer()
			os.RemoveAll(filepath.Dir(gitDir))
			b.StartTimer()
		}
	})
	b.Run("second", func(b *testing.B) {
		gitDir := newRepo(b)
		save(b, gitDir)
		b.ResetTimer()
		for range b.N {
			save(b, gitDir)
		}
	})
}
