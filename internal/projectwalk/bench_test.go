package projectwalk

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// benchTree is a generated git project of about n files under a hundred
// top directories, ten below each, with nested .gitignores (negations,
// anchored and directory rules, **), a committed index, and ignored
// build output: the shape of a large real repository. It is made once
// in dir, which is kept when it already holds one (scripts/bench/ignore.sh
// passes PROJECTWALK_BENCH_TREE so repeated runs reuse it).
func benchTree(b *testing.B, dir string, n int) {
	b.Helper()
	if _, err := os.Stat(filepath.Join(dir, ".git", "index")); err == nil {
		return
	}
	per := max(n/1000, 1)
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.MkdirAll(dir, 0o755))
	must(os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.o\n!keep.o\n/tmp/\nbuild/\n**/gen/*.txt\n"), 0o644))
	for i := range 100 {
		top := filepath.Join(dir, fmt.Sprintf("pkg%03d", i))
		must(os.MkdirAll(top, 0o755))
		must(os.WriteFile(filepath.Join(top, ".gitignore"), []byte("*.tmp\n!important.tmp\n/local/\n"), 0o644))
		for j := range 10 {
			sub := filepath.Join(top, fmt.Sprintf("mod%d", j))
			for _, d := range []string{sub, filepath.Join(sub, "gen"), filepath.Join(sub, "build")} {
				must(os.MkdirAll(d, 0o755))
			}
			for k := range per {
				name := fmt.Sprintf("file%03d.go", k)
				switch k % 10 {
				case 1:
					name = fmt.Sprintf("obj%03d.o", k)
				case 2:
					name = fmt.Sprintf("scratch%03d.tmp", k)
				case 3:
					name = filepath.Join("gen", fmt.Sprintf("g%03d.txt", k))
				case 4:
					name = filepath.Join("build", fmt.Sprintf("out%03d", k))
				}
				must(os.WriteFile(filepath.Join(sub, name), []byte("package x\n"), 0o644))
			}
			must(os.WriteFile(filepath.Join(sub, "keep.o"), nil, 0o644))
			must(os.WriteFile(filepath.Join(sub, "important.tmp"), nil, 0o644))
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "tree"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	// Untracked files too: git reads the index and walks for these.
	for i := range 100 {
		must(os.WriteFile(filepath.Join(dir, fmt.Sprintf("pkg%03d", i), "new.go"), nil, 0o644))
		must(os.WriteFile(filepath.Join(dir, fmt.Sprintf("pkg%03d", i), "new.tmp"), nil, 0o644))
	}
}

// BenchmarkFiles lists a generated tree of PROJECTWALK_BENCH_FILES files
// (default 100000) in-process and with git ls-files --cached --others
// --exclude-standard -z (run on the tree the benchmark made, no config),
// after checking both list the same files. ns/op of the two compare.
func BenchmarkFiles(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("needs git to compare with")
	}
	n := 100_000
	if s := os.Getenv("PROJECTWALK_BENCH_FILES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("PROJECTWALK_BENCH_FILES: %v", err)
		}
	}
	dir := os.Getenv("PROJECTWALK_BENCH_TREE")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "tree")
	}
	benchTree(b, dir, n)
	walked := files(b, dir, nil, ".")
	if listed := gitFiles(b, dir); len(walked) != len(listed) {
		b.Fatalf("the walk lists %d files, git %d", len(walked), len(listed))
	}
	b.Logf("%d files listed", len(walked))
	b.Run("projectwalk", func(b *testing.B) {
		for b.Loop() {
			tree, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tree.Files(context.Background(), "."); err != nil {
				b.Fatal(err)
			}
			tree.Close()
		}
	})
	b.Run("git-ls-files", func(b *testing.B) {
		for b.Loop() {
			gitFiles(b, dir)
		}
	})
}
