package main

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path"
	"regexp"
	"strings"

	"github.com/cove-sh/cove/agent"
)

// projectSearch serves the IDE's search (GET /api/search?q=…, with re=1 for
// a regular expression and case=1 to match case) on the launcher's side,
// where git is sure to be, so that .gitignore counts whatever the image
// holds. It answers {"matches":[{path,line,text}],"more":bool}, or 400
// with what is wrong in the pattern.
type projectSearch struct{ dir string }

const maxIDESearchResults = 1000

func (s projectSearch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pattern := q.Get("q")
	if pattern == "" {
		http.Error(w, "nothing to search for", http.StatusBadRequest)
		return
	}
	if q.Get("re") != "1" {
		pattern = regexp.QuoteMeta(pattern)
	}
	if q.Get("case") != "1" {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		http.Error(w, "the pattern: "+err.Error(), http.StatusBadRequest)
		return
	}
	ws, err := agent.OpenWorkspace(s.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer ws.Close()
	matches, more, err := agent.Search(r.Context(), ws, re, ".", maxIDESearchResults)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if matches == nil {
		matches = []agent.Match{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"matches": matches, "more": more})
}

// ignoredNames serves GET /api/ignored?path=DIR: the names in DIR that the
// project's .gitignore files hide (the tree dims them), from git on the
// launcher's side; an empty list outside a git repository.
type ignoredNames struct{ dir string }

func (s ignoredNames) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rel := path.Clean("/" + r.URL.Query().Get("path"))[1:]
	if rel == "" {
		rel = "."
	}
	names := []string{}
	// --directory folds an ignored directory (node_modules) into one line.
	cmd := exec.CommandContext(r.Context(), "git", "-c", "safe.directory=*", "ls-files", "--others", "--ignored",
		"--exclude-standard", "--directory", "-z", "--", rel)
	cmd.Dir = s.dir
	if out, err := cmd.Output(); err == nil {
		prefix := rel + "/"
		if rel == "." {
			prefix = ""
		}
		for _, p := range strings.Split(string(out), "\x00") {
			name, ok := strings.CutPrefix(strings.TrimSuffix(p, "/"), prefix)
			if ok && name != "" && !strings.Contains(name, "/") {
				names = append(names, name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(names)
}

// projectFiles serves GET /api/files: the project's files as search sees
// them (.gitignore honoured), for the IDE's quick open (Ctrl+P):
// {"files":[…],"more":bool}, at most maxQuickOpenFiles.
type projectFiles struct{ dir string }

const maxQuickOpenFiles = 100_000

func (s projectFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := agent.OpenWorkspace(s.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer ws.Close()
	files, err := agent.ProjectFiles(r.Context(), ws, ".")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	more := len(files) > maxQuickOpenFiles
	if more {
		files = files[:maxQuickOpenFiles]
	}
	if files == nil {
		files = []string{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"files": files, "more": more})
}
