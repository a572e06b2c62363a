package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
		projectSearch{dir: dir}.ServeHTTP(rec, httptest.NewRequest("GET", "/api/search?"+query, nil))
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
	projectFiles{dir: dir}.ServeHTTP(rec, httptest.NewRequest("GET", "/api/files", nil))
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
		projectReplace{dir: dir}.ServeHTTP(rec, httptest.NewRequest("POST", "/api/replace", strings.NewReader(body)))
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
