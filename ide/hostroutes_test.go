package ide

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/hostilerepo"
)

// TestProjectSearchQueries: plain text is literal and case-blind unless
// asked; a broken regular expression is a 400 that says so; binary files
// are skipped.
func TestProjectSearchQueries(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n// Hello (world)\nhello.x\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "blob.bin"), []byte("Hello\x00binary"), 0o644)
	get := func(query string) (int, []string) {
		rec := httptest.NewRecorder()
		ProjectRoutes{Dir: dir}.Search().ServeHTTP(rec, httptest.NewRequest("GET", "/api/search?"+query, nil))
		if rec.Code != http.StatusOK {
			return rec.Code, []string{rec.Body.String()}
		}
		var r struct {
			Matches []struct {
				Path, Text string
				Line       int
			}
		}
		json.Unmarshal(rec.Body.Bytes(), &r)
		var hits []string
		for _, m := range r.Matches {
			hits = append(hits, m.Path+":"+strings.TrimSpace(m.Text))
		}
		return rec.Code, hits
	}
	if _, hits := get("q=hello"); strings.Join(hits, "|") != "a.go:// Hello (world)|a.go:hello.x" {
		t.Errorf("case-blind: %q", hits)
	}
	if _, hits := get("q=Hello&case=1"); strings.Join(hits, "|") != "a.go:// Hello (world)" {
		t.Errorf("matching case: %q", hits)
	}
	if _, hits := get("q=(world)"); len(hits) != 1 {
		t.Errorf("literal parentheses: %q", hits)
	}
	if _, hits := get("q=hello.x&re=1"); len(hits) != 1 {
		t.Errorf("regular expression: %q", hits)
	}
	if code, body := get("q=(unclosed&re=1"); code != 400 || !strings.Contains(body[0], "the pattern") {
		t.Errorf("a broken pattern: %d %q", code, body)
	}
}

// TestProjectFilesHonoursGitignore: quick open lists what git would, not
// what .gitignore hides nor .git itself.
func TestProjectFilesHonoursGitignore(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"main.go": "", "pkg/util.go": "", ".gitignore": "build/\n", "build/out.bin": ""} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	rec := httptest.NewRecorder()
	ProjectRoutes{Dir: dir}.Files().ServeHTTP(rec, httptest.NewRequest("GET", "/api/files", nil))
	var r struct {
		Files []string
		More  bool
	}
	json.Unmarshal(rec.Body.Bytes(), &r)
	slices.Sort(r.Files)
	if strings.Join(r.Files, ",") != ".gitignore,main.go,pkg/util.go" || r.More {
		t.Errorf("files %q more %v", r.Files, r.More)
	}
}

// TestProjectReplace: literal and case-blind by default, $1 with a
// regular expression, never across a line's end, files .gitignore hides
// and binary ones untouched, modes kept; paths keeps it to some files.
func TestProjectReplace(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.go":       "Foo(x) and foo(y)\nfoo\r\nend\n",
		"b.sh":       "call foo_bar\n",
		"ignored.go": "foo\n",
		".gitignore": "ignored.go\n",
		"blob.bin":   "foo\x00",
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	os.Chmod(filepath.Join(dir, "b.sh"), 0o755)
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	replace := func(body string) (int, map[string]int) {
		rec := httptest.NewRecorder()
		ProjectRoutes{Dir: dir}.Replace().ServeHTTP(rec, httptest.NewRequest("POST", "/api/replace", strings.NewReader(body)))
		var got map[string]int
		json.Unmarshal(rec.Body.Bytes(), &got)
		return rec.Code, got
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return string(b)
	}
	if code, got := replace(`{"q":"foo(","with":"bar$1("}`); code != 200 || got["files"] != 1 || got["replacements"] != 2 {
		t.Fatalf("literal: %d %v", code, got)
	}
	if read("a.go") != "bar$1(x) and bar$1(y)\nfoo\r\nend\n" {
		t.Errorf("literal, case-blind: %q", read("a.go"))
	}
	if code, got := replace(`{"q":"(foo)_(bar)","re":true,"case":true,"with":"$2_$1"}`); code != 200 || got["replacements"] != 1 || read("b.sh") != "call bar_foo\n" {
		t.Errorf("regular expression: %d %v %q", code, got, read("b.sh"))
	}
	if fi, _ := os.Stat(filepath.Join(dir, "b.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("b.sh's mode: %v", fi.Mode().Perm())
	}
	if code, got := replace(`{"q":"o\\s+e","re":true,"with":"X"}`); code != 200 || got["replacements"] != 0 {
		t.Errorf("a match across a line's end: %d %v %q", code, got, read("a.go"))
	}
	if code, got := replace(`{"q":"foo","with":"qux","paths":["b.sh"]}`); code != 200 || got["replacements"] != 1 || !strings.Contains(read("a.go"), "foo\r\n") {
		t.Errorf("paths: %d %v", code, got)
	}
	if read("ignored.go") != "foo\n" || read("blob.bin") != "foo\x00" {
		t.Errorf("an ignored or binary file changed: %q %q", read("ignored.go"), read("blob.bin"))
	}
	if code, _ := replace(`{"q":"(","re":true,"with":"x"}`); code != 400 {
		t.Errorf("a broken pattern: %d", code)
	}
}

func TestBracedGroups(t *testing.T) {
	for in, want := range map[string]string{"$2_$1": "${2}_${1}", "$$1": "$$1", "a$": "a$", "$x": "$x", "${1}": "${1}", "$12z": "${12}z"} {
		if got := bracedGroups(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestHostRoutesRunNothingOfTheProject: the four host-side routes, on a
// repository whose .git/config and .gitattributes name programs for git
// (fsmonitor, hooks, ssh, pager, external diff, filters), start none of
// them, and still honour .gitignore (nested, negation, anchored,
// directory rules, **, .git/info/exclude). Against the code that ran
// git ls-files here, core.fsmonitor's program ran, as root.
func TestHostRoutesRunNothingOfTheProject(t *testing.T) {
	r := hostilerepo.New(t)
	routes := ProjectRoutes{Dir: r.Dir}
	serve := func(h http.Handler, method, target, body string) []byte {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Errorf("%s %s: %d %s", method, target, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	var files struct{ Files []string }
	json.Unmarshal(serve(routes.Files(), "GET", "/api/files", ""), &files)
	if !slices.Equal(files.Files, hostilerepo.Want) {
		t.Errorf("files %q, want %q", files.Files, hostilerepo.Want)
	}
	var found struct{ Matches []struct{ Path string } }
	json.Unmarshal(serve(routes.Search(), "GET", "/api/search?q=needle", ""), &found)
	var paths []string
	for _, m := range found.Matches {
		paths = append(paths, m.Path)
	}
	if want := slices.DeleteFunc(slices.Clone(hostilerepo.Want), func(f string) bool { return strings.HasPrefix(path.Base(f), ".git") }); !slices.Equal(paths, want) {
		t.Errorf("search found in %q, want %q", paths, want)
	}
	var dimmed []string
	json.Unmarshal(serve(routes.Ignored(), "GET", "/api/ignored?path=sub", ""), &dimmed)
	if want := []string{"local.txt", "vendor"}; !slices.Equal(dimmed, want) {
		t.Errorf("ignored in sub %q, want %q", dimmed, want)
	}
	var replaced map[string]int
	json.Unmarshal(serve(routes.Replace(), "POST", "/api/replace", `{"q":"needle","with":"pin"}`), &replaced)
	if replaced["files"] != len(paths) {
		t.Errorf("replace changed %v, want the %d files search finds", replaced, len(paths))
	}
	if b, _ := os.ReadFile(filepath.Join(r.Dir, "app.log")); !strings.Contains(string(b), "needle") {
		t.Errorf("replace changed an ignored file: %q", b)
	}
	if ran := r.Ran(t); len(ran) > 0 {
		t.Errorf("the host ran the project's programs: %q", ran)
	}
}

// TestHostRoutesBounded: a .gitignore that is a FIFO does not block quick
// open (against git ls-files it hung past the 2 s), one that is a
// symlink to a host file is not read, and a 2 GiB sparse file does not
// become 2 GiB of memory in search (it did: 2048 MiB allocated).
func TestHostRoutesBounded(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.WriteFile(filepath.Join(host, "rules"), []byte("*.go\n"), 0o644)
	for _, d := range []string{"fifo", "link"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
		os.WriteFile(filepath.Join(dir, d, "a.go"), []byte("needle\n"), 0o644)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo/.gitignore"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink(filepath.Join(host, "rules"), filepath.Join(dir, "link/.gitignore"))
	f, err := os.Create(filepath.Join(dir, "huge.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(2 << 30)
	f.WriteAt([]byte("needle\n"), 2<<30-7)
	f.Close()
	routes := ProjectRoutes{Dir: dir}
	done := make(chan []string, 1)
	go func() {
		rec := httptest.NewRecorder()
		routes.Files().ServeHTTP(rec, httptest.NewRequest("GET", "/api/files", nil))
		var r struct{ Files []string }
		json.Unmarshal(rec.Body.Bytes(), &r)
		done <- r.Files
	}()
	select {
	case got := <-done:
		if want := []string{"fifo/a.go", "huge.txt", "link/.gitignore", "link/a.go"}; !slices.Equal(got, want) {
			t.Errorf("files %q, want %q", got, want)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("/api/files still busy after 2 s with a FIFO for a .gitignore")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	routes.Search().ServeHTTP(rec, httptest.NewRequest("GET", "/api/search?q=needle", nil))
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; rec.Code != http.StatusOK || a > 64<<20 {
		t.Errorf("search: %d, allocated %d MiB", rec.Code, a>>20)
	}
	var found struct{ Matches []struct{ Path string } }
	json.Unmarshal(rec.Body.Bytes(), &found)
	if len(found.Matches) != 2 {
		t.Errorf("search found %v, want fifo/a.go and link/a.go", found.Matches)
	}
}
