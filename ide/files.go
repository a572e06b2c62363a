package ide

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
)

// maxFileSize is the largest file the editor opens or saves (8 MiB).
const maxFileSize = 8 << 20

// entry is one item of a directory listing.
type entry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir"`
	Size int64  `json:"size"`
	Link bool   `json:"link,omitempty"`
}

// files serves the project's files, never a path outside it (symlinks
// included: projectfs resolves through os.Root):
//
//	GET    /api/tree?path=DIR     a directory's entries, directories first (.git hidden)
//	GET    /api/file?path=FILE    a file's bytes, with an ETag of its contents
//	PUT    /api/file?path=FILE    replace it atomically, keeping its permissions;
//	                              If-Match: ETAG refuses (412) if it changed since,
//	                              If-None-Match: * if it exists (a new file)
//	DELETE /api/file?path=PATH    remove a file or a directory and all in it
//	POST   /api/dir?path=DIR      make a directory
//	POST   /api/rename?from=A&to=B  move a file or directory; never over another (409)
type files struct {
	dir       *projectfs.Dir
	keepalive time.Duration // how often a watch's WebSocket is pinged (keepalive.go)
}

// etag names a file's contents, so that a save can tell whether the file
// changed on disk since the editor read it.
func etag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func (f files) tree(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "."
	}
	rel, err := f.dir.Rel(p)
	if err != nil {
		httpError(w, err)
		return
	}
	ents, err := fs.ReadDir(f.dir.FS(), rel)
	if err != nil {
		httpError(w, err)
		return
	}
	out := []entry{}
	for _, e := range ents {
		if e.Name() == ".git" {
			continue
		}
		en := entry{Name: e.Name(), Dir: e.IsDir(), Link: e.Type()&fs.ModeSymlink != 0}
		if fi, err := f.dir.Stat(path.Join(rel, e.Name())); err == nil {
			en.Dir, en.Size = fi.IsDir(), fi.Size()
		}
		out = append(out, en)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir
		}
		return strings.ToLower(out[i].Name) < strings.ToLower(out[j].Name)
	})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (f files) file(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	switch r.Method {
	case http.MethodGet:
		if fi, err := f.dir.Stat(p); err == nil && fi.Size() > maxFileSize {
			http.Error(w, "file too large for the editor", http.StatusRequestEntityTooLarge)
			return
		}
		b, err := f.dir.ReadFile(p)
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", etag(b))
		w.Write(b)
	case http.MethodPut:
		b, err := io.ReadAll(io.LimitReader(r.Body, maxFileSize+1))
		if err != nil {
			httpError(w, err)
			return
		}
		if len(b) > maxFileSize {
			http.Error(w, "file too large for the editor", http.StatusRequestEntityTooLarge)
			return
		}
		if err := f.precondition(r, p); err != nil {
			http.Error(w, err.Error(), http.StatusPreconditionFailed)
			return
		}
		if err := f.dir.WriteFile(p, b); err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("ETag", etag(b))
		w.WriteHeader(http.StatusNoContent)
	case http.MethodDelete:
		if err := f.dir.Remove(p); err != nil {
			httpError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET, PUT or DELETE", http.StatusMethodNotAllowed)
	}
}

// precondition checks a save's If-Match and If-None-Match against the file
// on disk. (A write between the check and the save can still slip in;
// the window is a few microseconds, against minutes of editing.)
func (f files) precondition(r *http.Request, p string) error {
	match, noneMatch := r.Header.Get("If-Match"), r.Header.Get("If-None-Match")
	if match == "" && noneMatch == "" {
		return nil
	}
	cur, err := f.dir.ReadFile(p)
	exists := err == nil
	switch {
	case noneMatch == "*" && exists:
		return fmt.Errorf("%s exists already", p)
	case match != "" && !exists:
		return fmt.Errorf("%s is no longer on disk", p)
	case match != "" && match != "*" && match != etag(cur):
		return fmt.Errorf("%s changed on disk since it was opened", p)
	}
	return nil
}

func (f files) mkdir(w http.ResponseWriter, r *http.Request) {
	if err := f.dir.Create(r.URL.Query().Get("path"), true); err != nil {
		httpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f files) rename(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if err := f.dir.Rename(q.Get("from"), q.Get("to")); err != nil {
		httpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func httpError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, err.Error(), http.StatusNotFound)
	case errors.Is(err, fs.ErrExist):
		http.Error(w, err.Error(), http.StatusConflict)
	case errors.Is(err, fs.ErrPermission):
		http.Error(w, err.Error(), http.StatusForbidden)
	default:
		// os.Root's escape refusals and bad paths land here.
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

// NewHandler serves the in-container API for the project in dir: its
// files, and terminals running shell (argv). It is what `cove ide serve`
// runs on its Unix socket; the agent joins it next.
func NewHandler(dir *projectfs.Dir, shell []string) http.Handler {
	return newHandler(dir, shell, keepaliveEvery)
}

// newHandler is NewHandler with its WebSockets pinged every every: a
// test's milliseconds, where a drop is noticed in well under a second.
func newHandler(dir *projectfs.Dir, shell []string, every time.Duration) http.Handler {
	f := files{dir: dir, keepalive: every}
	t := &terminals{dir: dir.Root, shell: shell, terms: map[string]*Terminal{}, keepalive: every}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tree", f.tree)
	mux.HandleFunc("/api/file", f.file)
	mux.HandleFunc("POST /api/dir", f.mkdir)
	mux.HandleFunc("POST /api/rename", f.rename)
	mux.HandleFunc("GET /api/term/{id}", t.serve)
	mux.HandleFunc("DELETE /api/term/{id}", t.close)
	mux.HandleFunc("GET /api/watch", f.watch)
	mux.HandleFunc("GET /api/ports/listening", servePortsListening)
	mux.HandleFunc("GET /api/ports/tunnel", serveTunnel)
	l := &languages{dir: dir, keepalive: every, running: map[string]*lspProcess{}}
	mux.HandleFunc("GET /api/lsp", l.info)
	mux.HandleFunc("GET /api/lsp/{name}", l.serve)
	g := gitAPI{dir: dir}
	mux.HandleFunc("GET /api/git/status", g.status)
	mux.HandleFunc("GET /api/git/diff", g.diff)
	mux.HandleFunc("GET /api/git/branches", g.branches)
	mux.HandleFunc("POST /api/git/{op}", g.change)
	mux.HandleFunc("POST /api/git/stage-hunk", g.hunk)
	mux.HandleFunc("POST /api/git/unstage-hunk", g.hunk)
	return mux
}
