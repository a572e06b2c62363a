package ide

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/cove-sh/cove/ide/web"
)

// static serves the embedded UI, gzipped for browsers that take it (the
// bundle is 1.3 MB, 0.4 MB gzipped). Each file is compressed once.
type static struct {
	files fs.FS
	mu    sync.Mutex
	gz    map[string][]byte
}

func newStatic() *static { return &static{files: web.Dist(), gz: map[string][]byte{}} }

func (s *static) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(path.Clean(r.URL.Path), "/")
	if name == "" {
		name = "index.html"
	}
	body, err := fs.ReadFile(s.files, name)
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
		w.Write(s.gzipped(name, body))
		return
	}
	w.Write(body)
}

func (s *static) gzipped(name string, body []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.gz[name]; ok {
		return b
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(body)
	zw.Close()
	s.gz[name] = buf.Bytes()
	return s.gz[name]
}
