package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path"
	"regexp"
	"slices"
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

// searchPattern is what the IDE's search box means: text taken literally
// unless re, matched whatever its case unless matchCase.
func searchPattern(q string, re, matchCase bool) (*regexp.Regexp, error) {
	if q == "" {
		return nil, errors.New("nothing to search for")
	}
	if !re {
		q = regexp.QuoteMeta(q)
	}
	if !matchCase {
		q = "(?i)" + q
	}
	p, err := regexp.Compile(q)
	if err != nil {
		return nil, fmt.Errorf("the pattern: %w", err)
	}
	return p, nil
}

func (s projectSearch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	re, err := searchPattern(q.Get("q"), q.Get("re") == "1", q.Get("case") == "1")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
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

// openProjectFiles opens the project at dir and lists its files as search
// sees them; the caller closes the workspace.
func openProjectFiles(ctx context.Context, dir string) (*agent.Workspace, []string, error) {
	ws, err := agent.OpenWorkspace(dir)
	if err != nil {
		return nil, nil, err
	}
	files, err := agent.ProjectFiles(ctx, ws, ".")
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, files, nil
}

// projectFiles serves GET /api/files: the project's files as search sees
// them (.gitignore honoured), for the IDE's quick open (Ctrl+P):
// {"files":[…],"more":bool}, at most maxQuickOpenFiles.
type projectFiles struct{ dir string }

const maxQuickOpenFiles = 100_000

func (s projectFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, files, err := openProjectFiles(r.Context(), s.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	ws.Close()
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

// projectReplace serves POST /api/replace, the IDE's replace in files:
// {"q","re","case"} as for search, "with" (with $1 for a group when re,
// as an editor has it),
// and "paths" to keep to some files. Every match in the files search sees
// (.gitignore honoured, binary files skipped) is replaced, each file
// written atomically with its mode and owner kept. It answers
// {"files":N,"replacements":M}.
type projectReplace struct{ dir string }

func (s projectReplace) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Q     string   `json:"q"`
		Re    bool     `json:"re"`
		Case  bool     `json:"case"`
		With  string   `json:"with"`
		Paths []string `json:"paths"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req) != nil {
		http.Error(w, "POST a JSON body: q, with, and re, case, paths if wanted", http.StatusBadRequest)
		return
	}
	re, err := searchPattern(req.Q, req.Re, req.Case)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ws, files, err := openProjectFiles(r.Context(), s.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer ws.Close()
	with := []byte(req.With)
	if req.Re {
		with = []byte(bracedGroups(req.With))
	}
	if req.Paths != nil {
		files = slices.DeleteFunc(files, func(f string) bool { return !slices.Contains(req.Paths, f) })
	}
	var changed, count int
	for _, f := range files {
		if fi, err := ws.Stat(f); err != nil || !fi.Mode().IsRegular() || fi.Size() > 8<<20 {
			continue
		}
		b, err := ws.ReadFile(f)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // unreadable or binary, as search has it
		}
		out, n := replaceLines(b, re, with, req.Re)
		if n == 0 {
			continue
		}
		if err := ws.WriteFile(f, out); err != nil {
			http.Error(w, fmt.Sprintf("%s: %v (%d files changed before it)", f, err, changed), http.StatusInternalServerError)
			return
		}
		changed, count = changed+1, count+n
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]int{"files": changed, "replacements": count})
}

// replaceLines replaces re's matches line by line, as search finds them
// (a pattern never reaches across a line's end), expanding $1 in with
// when expand; it returns the text and how many it replaced.
func replaceLines(b []byte, re *regexp.Regexp, with []byte, expand bool) ([]byte, int) {
	var out []byte
	n := 0
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		body := bytes.TrimSuffix(line, []byte("\n"))
		body = bytes.TrimSuffix(body, []byte("\r"))
		end := line[len(body):]
		if m := len(re.FindAllIndex(body, -1)); m > 0 {
			n += m
			if expand {
				body = re.ReplaceAll(body, with)
			} else {
				body = re.ReplaceAllLiteral(body, with)
			}
		}
		out = append(append(out, body...), end...)
	}
	return out, n
}

// bracedGroups writes $1 as ${1}: in a replacement typed as in an editor,
// "$2_$1" means group 2, then _, then group 1, where Go's Expand would
// read a group named "2_". $$ stays a dollar.
func bracedGroups(with string) string {
	var b strings.Builder
	for i := 0; i < len(with); i++ {
		if with[i] != '$' || i+1 == len(with) {
			b.WriteByte(with[i])
			continue
		}
		if with[i+1] == '$' {
			b.WriteString("$$")
			i++
			continue
		}
		j := i + 1
		for j < len(with) && with[j] >= '0' && with[j] <= '9' {
			j++
		}
		if j == i+1 {
			b.WriteByte('$')
			continue
		}
		b.WriteString("${" + with[i+1:j] + "}")
		i = j - 1
	}
	return b.String()
}
