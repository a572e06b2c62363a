package ide

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

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
//	GET /api/tree?path=DIR   a directory's entries, directories first (.git hidden)
//	GET /api/file?path=FILE  a file's bytes
//	PUT /api/file?path=FILE  replace it atomically, keeping its permissions
type files struct{ dir *projectfs.Dir }

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
		if err := f.dir.WriteFile(p, b); err != nil {
			httpError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.Error(w, "GET or PUT", http.StatusMethodNotAllowed)
	}
}

func httpError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		http.Error(w, err.Error(), http.StatusNotFound)
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
	f := files{dir: dir}
	t := &terminals{dir: dir.Root, shell: shell, terms: map[string]*Terminal{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/tree", f.tree)
	mux.HandleFunc("/api/file", f.file)
	mux.HandleFunc("GET /api/term/{id}", t.serve)
	mux.HandleFunc("GET /api/watch", f.watch)
	return mux
}
