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
