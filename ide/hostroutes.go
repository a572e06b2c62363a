package ide

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/projectwalk"
)

// ProjectRoutes are the IDE routes the launcher serves itself, on the
// host, from the project directory: search, replace, quick open and the
// names the tree dims. The project is the workspace's to write, so they
// run nothing of it: the ignore rules are matched in-process
// (projectwalk), no git runs, no symlink is followed out of the project,
// and what is read is bounded. Each handler opens the project per
// request; they are safe for concurrent use.
type ProjectRoutes struct {
	// Dir is the project directory on the host.
	Dir string
	// Walk holds what the host adds to the project's ignore rules (the
	// host user's global excludes); nil adds nothing.
	Walk *projectwalk.Options
}

// Search serves GET /api/search?q=…, with re=1 for a regular expression
// and case=1 to match case, over the files quick open lists (binary ones
// and those over projectwalk.MaxFileSize skipped). It answers
// {"matches":[{path,line,text}],"more":bool}, at most 1000 matches, or
// 400 with what is wrong in the pattern.
func (p ProjectRoutes) Search() http.Handler { return http.HandlerFunc(p.search) }

// Ignored serves GET /api/ignored?path=DIR: the names in DIR that the
// ignore rules hide (the tree dims them), as a JSON array.
func (p ProjectRoutes) Ignored() http.Handler { return http.HandlerFunc(p.ignored) }

// Files serves GET /api/files: the project's files as search sees them,
// for quick open (Ctrl+P): {"files":[…],"more":bool}, at most 100000.
func (p ProjectRoutes) Files() http.Handler { return http.HandlerFunc(p.files) }

// Replace serves POST /api/replace, the IDE's replace in files:
// {"q","re","case"} as for search, "with" (with $1 for a group when re,
// as an editor has it), and "paths" to keep to some files. Every match in
// the files search reads is replaced, each file written atomically
// through projectfs with its mode and owner kept; symlinks are not
// written through. It answers {"files":N,"replacements":M}.
func (p ProjectRoutes) Replace() http.Handler { return http.HandlerFunc(p.replace) }

const (
	maxSearchResults  = 1000
	maxQuickOpenFiles = 100_000
)

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

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (p ProjectRoutes) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	re, err := searchPattern(q.Get("q"), q.Get("re") == "1", q.Get("case") == "1")
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	t, err := projectwalk.Open(p.Dir, p.Walk)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer t.Close()
	matches, more, err := t.Search(r.Context(), re, ".", maxSearchResults)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if matches == nil {
		matches = []projectwalk.Match{}
	}
	writeJSON(w, map[string]any{"matches": matches, "more": more})
}

func (p ProjectRoutes) ignored(w http.ResponseWriter, r *http.Request) {
	rel := path.Clean("/" + r.URL.Query().Get("path"))[1:]
	names := []string{}
	if t, err := projectwalk.Open(p.Dir, p.Walk); err == nil {
		// A directory that cannot be listed dims nothing: the tree
		// works the same without it.
		if n, err := t.Ignored(r.Context(), rel); err == nil {
			names = n
		}
		t.Close()
	}
	writeJSON(w, names)
}

// projectFiles opens the project and lists its files as search sees
// them; the caller closes the tree.
func (p ProjectRoutes) projectFiles(r *http.Request) (*projectwalk.Tree, []string, error) {
	t, err := projectwalk.Open(p.Dir, p.Walk)
	if err != nil {
		return nil, nil, err
	}
	files, err := t.Files(r.Context(), ".")
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	return t, files, nil
}

func (p ProjectRoutes) files(w http.ResponseWriter, r *http.Request) {
	t, files, err := p.projectFiles(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	t.Close()
	more := len(files) > maxQuickOpenFiles
	if more {
		files = files[:maxQuickOpenFiles]
	}
	if files == nil {
		files = []string{}
	}
	writeJSON(w, map[string]any{"files": files, "more": more})
}

func (p ProjectRoutes) replace(w http.ResponseWriter, r *http.Request) {
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
	t, files, err := p.projectFiles(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer t.Close()
	ws, err := projectfs.Open(p.Dir)
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
		// Read as search reads: regular files only (a symlink would be
		// replaced by a file), bounded, binary ones skipped.
		b, err := t.ReadFile(f)
		if err != nil || projectwalk.Binary(b) {
			continue
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
	writeJSON(w, map[string]int{"files": changed, "replacements": count})
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
