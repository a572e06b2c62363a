package ide

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/cove-sh/cove/ide/web"
)

// static serves the embedded UI, gzipped for browsers that take it: the
// build gzips every file beside it (NAME.gz), so nothing is compressed
// here.
type static struct{ files fs.FS }

func newStatic() *static { return &static{files: web.Dist()} }

func (s *static) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	if strings.HasSuffix(name, ".gz") {
		http.NotFound(w, r)
		return
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-cache") // a new cove may bring a new UI
	w.Header().Add("Vary", "Accept-Encoding")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		if gz, err := fs.ReadFile(s.files, name+".gz"); err == nil {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz)
			return
		}
	}
	body, err := fs.ReadFile(s.files, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Write(body)
}
