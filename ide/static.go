package ide

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/cove-sh/cove/ide/web"
)

// static serves the embedded UI. The build gzips every file (NAME.gz) and
// only those are embedded: a browser gets them as they are, a client that
// does not take gzip gets them unzipped here.
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
	gz, err := fs.ReadFile(s.files, name+".gz")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-cache") // a new cove may bring a new UI
	w.Header().Add("Vary", "Accept-Encoding")
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		http.Error(w, "the embedded UI is damaged", http.StatusInternalServerError)
		return
	}
	io.Copy(w, zr)
}
