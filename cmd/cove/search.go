package main

import (
	"encoding/json"
	"net/http"
	"regexp"

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
