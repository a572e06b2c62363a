package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
