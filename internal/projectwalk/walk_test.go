package projectwalk

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/hostilerepo"
	"github.com/cove-sh/cove/internal/testuser"
)

// write makes the files of tree (path → contents) under dir; a contents
// of "->TARGET" makes a symlink.
func write(t testing.TB, dir string, tree map[string]string) {
	t.Helper()
	for name, body := range tree {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(body, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// gitFiles is what git lists in dir, run here on a tree the test made,
// with no config but git's defaults.
func gitFiles(t testing.TB, dir string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "XDG_CONFIG_HOME=/nonexistent")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) == 1 && files[0] == "" {
		return nil
	}
	return files
}

func files(t testing.TB, dir string, opts *Options, under string) []string {
	t.Helper()
	tree, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	got, err := tree.Files(context.Background(), under)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestFilesAsGitListsThem: for trees whose rules use each part of git's
// syntax, the walk lists exactly what git ls-files does, in its order.
func TestFilesAsGitListsThem(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git to compare with")
	}
	for name, tree := range map[string]map[string]string{
		"hostilerepo's tree":                  hostilerepo.Tree,
		"a/** then !a/keep re-includes":       {".gitignore": "a/**\n!a/keep\n", "a/keep": "", "a/other": "", "a/b/deep": "", "ab": ""},
		"a dir excluded cannot be re-entered": {".gitignore": "a/\n!a/keep\n", "a/keep": "", "b": ""},
		"** as a prefix and in the middle": {".gitignore": "**/gen\nx/**/y.txt\n", "gen": "", "p/q/gen/f": "", "x/y.txt": "",
			"x/1/2/y.txt": "", "x/1/z.txt": "", "w/x/y.txt": ""},
		"** inside a component is *": {".gitignore": "foo**\nd/ba**r\n", "foobar": "", "xfoo": "", "d/baXr": "", "d/e/bar": ""},
		"classes, [!…] and escapes": {".gitignore": "[!a]*.txt\n\\#hash\n\\!bang\nf[0-9].c\n", "a.txt": "", "b.txt": "", "#hash": "",
			"!bang": "", "f1.c": "", "fx.c": ""},
		"trailing spaces, escaped or not": {".gitignore": "sp  \nesc\\ \n", "sp": "", "esc ": "", "esc": ""},
		"CRLF and a BOM":                  {".gitignore": "\xef\xbb\xbffirst\r\nsecond\r\n", "first": "", "second": "", "third": ""},
		"anchored and not":                {".gitignore": "/top\nany\nd/mid\n", "top": "", "s/top": "", "s/any": "", "d/mid": "", "s/d/mid": ""},
		"dir-only rules skip files":       {".gitignore": "tmp/\n", "tmp/a": "", "s/tmp": "", "s/tmp2/x": ""},
		"nested rules win and scope": {".gitignore": "*.o\n", "s/.gitignore": "!keep.o\n/local\n", "a.o": "", "s/keep.o": "",
			"s/b.o": "", "s/local": "", "local": "", "t/keep.o": ""},
		"symlinks listed, not followed": {".gitignore": "", "ln": "->/etc", "dirln": "->sub", "sub/f": "", "broken": "->nowhere"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, tree)
			if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			want := gitFiles(t, dir)
			if got := files(t, dir, nil, "."); !slices.Equal(got, want) {
				t.Errorf("walk lists %q\n git lists %q", got, want)
			}
			// The per-path predicate (the checkpoints' walk) agrees.
			tr, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ignored := tr.Ignorer()
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				rel, _ := filepath.Rel(dir, p)
				if err != nil || rel == "." || d.IsDir() {
					if d != nil && d.Name() == ".git" {
						return filepath.SkipDir
					}
					return nil
				}
				if listed := slices.Contains(want, rel); ignored(rel, false) == listed {
					t.Errorf("Ignorer says %s is ignored: %v; git lists it: %v", rel, !listed, listed)
				}
				return nil
			})
		})
	}
}

// TestHostileRepoWant: hostilerepo.Want is what git lists, so the tests
// that use it compare with git.
func TestHostileRepoWant(t *testing.T) {
	r := hostilerepo.New(t)
	if got := files(t, r.Dir, nil, ""); !slices.Equal(got, hostilerepo.Want) {
		t.Errorf("walk lists %q, want %q", got, hostilerepo.Want)
	}
	if ran := r.Ran(t); len(ran) > 0 {
		t.Errorf("the walk ran the project's programs: %q", ran)
	}
}

// TestUnder: listing below a directory keeps the rules above it; below an
// ignored directory or .git nothing is listed; a file lists itself.
func TestUnder(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{".gitignore": "*.tmp\nout/\n", "s/a.go": "", "s/b.tmp": "", "out/x.go": "", ".git/HEAD": "",
		".git/info/exclude": "s/x/\n", "s/x/y": ""})
	for under, want := range map[string][]string{"s": {"s/a.go"}, "out": nil, "s/x": nil, ".git": nil, "s/a.go": {"s/a.go"}, "s/b.tmp": nil} {
		if got := files(t, dir, nil, under); !slices.Equal(got, want) {
			t.Errorf("under %s: %q, want %q", under, got, want)
		}
	}
	tree, _ := Open(dir, nil)
	defer tree.Close()
	if _, err := tree.Files(context.Background(), "../x"); err == nil {
		t.Errorf("../x: no error")
	}
}

// TestNotGit: without .git at the root, every file is listed but those in
// node_modules (and any .git), whatever a .gitignore says.
func TestNotGit(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{".gitignore": "*.go\n", "a.go": "", "node_modules/x/y.js": "", "s/node_modules/z": "", "s/.git/config": "", "s/b": ""})
	if got, want := files(t, dir, nil, ""), []string{".gitignore", "a.go", "s/b"}; !slices.Equal(got, want) {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestFilesAndDirs: the directories a file sync carries are those the
// walk enters, empty ones among them, never .git, an ignored one or
// node_modules outside git; a symlink to a directory is a file.
func TestFilesAndDirs(t *testing.T) {
	for _, git := range []bool{true, false} {
		dir := t.TempDir()
		write(t, dir, map[string]string{".gitignore": "build/\n", "src/a.c": "", "build/out.o": "", "node_modules/x/y.js": "", "link": "->src"})
		for _, d := range []string{"empty/nested", "src/sub", "build/more"} {
			os.MkdirAll(filepath.Join(dir, d), 0o755)
		}
		want := []string{"empty", "empty/nested", "src", "src/sub"}
		if git {
			os.MkdirAll(filepath.Join(dir, ".git/hooks"), 0o755)
			want = append(want[:2:2], "node_modules", "node_modules/x", "src", "src/sub")
		} else {
			want = []string{"build", "build/more", "empty", "empty/nested", "src", "src/sub"}
		}
		tree, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		l, err := tree.FilesAndDirs(context.Background(), "")
		tree.Close()
		if err != nil {
			t.Fatal(err)
		}
		files, dirs := l.Files, l.Dirs
		if !slices.Equal(dirs, want) {
			t.Errorf("git %v: dirs %q, want %q", git, dirs, want)
		}
		if !slices.Contains(files, "link") || !slices.Contains(files, "src/a.c") || slices.Contains(files, "src") {
			t.Errorf("git %v: files %q", git, files)
		}
	}
}

// TestFilesAndDirsUnreadable: a directory the walk cannot open (chmod
// 000) or enter (readable, not searchable: it names what it holds and
// can give none of it) is said once, with why, not left out unsaid, as a
// file sync would take its files for deleted, nor once for each file in
// it; the rest is listed. Asked for itself, it is
// an error, not an empty listing. Runs as a user other than root, whom
// chmod stops.
func TestFilesAndDirsUnreadable(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	dir := t.TempDir()
	write(t, dir, map[string]string{"a/x": "", "closed/y": "", "noexec/f": "", "noexec/sub/z": ""})
	for name, mode := range map[string]os.FileMode{"closed": 0, "noexec": 0o644} {
		os.Chmod(filepath.Join(dir, name), mode)
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, name), 0o755) })
	}
	tree, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	l, err := tree.FilesAndDirs(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Unreadable{{Path: "closed", Dir: true, Err: syscall.EACCES}, {Path: "noexec", Dir: true, Err: syscall.EACCES}}
	if !slices.Equal(l.Unreadable, want) {
		t.Errorf("unreadable %+v, want %+v", l.Unreadable, want)
	}
	if !slices.Equal(l.Files, []string{"a/x"}) || !slices.Equal(l.Dirs, []string{"a", "noexec"}) {
		t.Errorf("files %q, dirs %q", l.Files, l.Dirs)
	}
	if _, err := tree.FilesAndDirs(context.Background(), "closed"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("listing closed itself: %v", err)
	}
}

// TestFilesAndDirsUnreadableRules: a directory whose .gitignore cannot
// be read is unreadable to the walk (what its rules hide is unknown: to
// the sync, a file they hide would look new and be carried); the rest is
// listed as before.
func TestFilesAndDirsUnreadableRules(t *testing.T) {
	if testuser.Rerun(t) {
		return
	}
	dir := t.TempDir()
	write(t, dir, map[string]string{".git/HEAD": "", "a/x": "", "s/.gitignore": "secret.env\n", "s/secret.env": "", "s/kept": ""})
	os.Chmod(filepath.Join(dir, "s", ".gitignore"), 0)
	tree, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	l, err := tree.FilesAndDirs(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Unreadable{{Path: "s", Dir: true, Err: syscall.EACCES}}; !slices.Equal(l.Unreadable, want) {
		t.Errorf("unreadable %+v, want %+v", l.Unreadable, want)
	}
	if slices.Contains(l.Files, "s/secret.env") || !slices.Contains(l.Files, "a/x") {
		t.Errorf("files %q", l.Files)
	}
}

// TestIgnored: the names a directory's listing hides, for the tree's
// dimming; all of them inside an ignored directory; never .git.
func TestIgnored(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{".gitignore": "*.log\nbuild/\n", "a.log": "", "a.go": "", "build/x": "", "s/.gitignore": "!b.log\n",
		"s/a.log": "", "s/b.log": "", ".git/HEAD": ""})
	tree, _ := Open(dir, nil)
	defer tree.Close()
	for in, want := range map[string][]string{"": {"a.log", "build"}, "s": {"a.log"}, "build": {"x"}} {
		got, err := tree.Ignored(context.Background(), in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ignored in %q: %q %v, want %q", in, got, err, want)
		}
	}
}

// TestGlobalExcludesOnlyFromTheHost: the host user's excludes file
// counts; the project cannot name another (core.excludesFile in its
// .git/config is not read).
func TestGlobalExcludesOnlyFromTheHost(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "ignore"), []byte("*.swp\n"), 0o644)
	os.WriteFile(filepath.Join(host, "project-chosen"), []byte("*.go\n"), 0o644)
	write(t, dir, map[string]string{"a.swp": "", "a.go": "", ".git/HEAD": "",
		".git/config": "[core]\n\texcludesFile = " + filepath.Join(host, "project-chosen") + "\n"})
	if got := files(t, dir, &Options{ExcludesFile: filepath.Join(host, "ignore")}, ""); !slices.Equal(got, []string{"a.go"}) {
		t.Errorf("%q, want [a.go]", got)
	}
	if got := UserExcludesFile("/home/u", ""); got != "/home/u/.config/git/ignore" {
		t.Errorf("UserExcludesFile: %s", got)
	}
}

// TestRuleFilesThatAreNotFiles: a .gitignore that is a FIFO, a symlink to
// a host file or a 2 MiB file is not read (its rules do not count) and
// nothing blocks.
func TestRuleFilesThatAreNotFiles(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "rules"), []byte("*.go\n"), 0o644)
	write(t, dir, map[string]string{".git/HEAD": "", "fifo/a.go": "", "link/b.go": "", "link/.gitignore": "->" + filepath.Join(host, "rules"),
		"big/c.go": "", "big/.gitignore": "*.go\n" + strings.Repeat("#", 2<<20), "info/d.go": ""})
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo/.gitignore"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, ".git/info"))
	os.MkdirAll(filepath.Join(dir, ".git/info"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, ".git/info/exclude"), 0o644)
	done := make(chan []string, 1)
	go func() { done <- files(t, dir, nil, "") }()
	select {
	case got := <-done:
		want := []string{"big/.gitignore", "big/c.go", "fifo/a.go", "info/d.go", "link/.gitignore", "link/b.go"}
		if !slices.Equal(got, want) {
			t.Errorf("%q, want %q", got, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("still listing after 2 s")
	}
}

// TestSearchBounded: a 2 GiB sparse file, a FIFO and a symlink out of the
// project are not read; what is left is searched.
func TestSearchBounded(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "secret"), []byte("needle on the host\n"), 0o644)
	write(t, dir, map[string]string{"a.txt": "x\nneedle\n", "out": "->" + filepath.Join(host, "secret"), "in": "->a.txt"})
	syscall.Mkfifo(filepath.Join(dir, "fifo.txt"), 0o644)
	f, err := os.Create(filepath.Join(dir, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(2 << 30)
	f.WriteAt([]byte("needle\n"), 2<<30-7)
	f.Close()
	tree, _ := Open(dir, nil)
	defer tree.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ms, more, err := tree.Search(context.Background(), regexp.MustCompile("needle"), "", 10)
	runtime.ReadMemStats(&after)
	if err != nil || more || len(ms) != 1 || ms[0] != (Match{Path: "a.txt", Line: 2, Text: "needle", Len: 6}) {
		t.Errorf("search: %v %v %v", ms, more, err)
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 16<<20 {
		t.Errorf("search allocated %d MiB", a>>20)
	}
	for _, name := range []string{"huge.txt", "fifo.txt", "out", "in"} {
		if _, err := tree.ReadFile(name); err == nil {
			t.Errorf("ReadFile(%s) read it", name)
		}
	}
}

// TestSearchSaysWhereTheMatchIs: a hit says where its first match starts
// and how long it is, in UTF-16 units (a browser's), so the IDE selects
// the match itself: é is one unit, 😀 two, an invalid byte one.
func TestSearchSaysWhereTheMatchIs(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{"a.txt": "é😀\xff Needle-7 and needle-8\n"})
	tree, _ := Open(dir, nil)
	defer tree.Close()
	ms, _, err := tree.Search(context.Background(), regexp.MustCompile("(?i)needle-[0-9]"), "", 10)
	if err != nil || len(ms) != 1 || ms[0].Col != 5 || ms[0].Len != 8 {
		t.Errorf("search: %+v %v", ms, err)
	}
}
