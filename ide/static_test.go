package ide

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/ide/web"
)

// TestEveryUIFileIsEmbedded: only the gzipped files of the built UI are
// in cove, so each file the build makes must have its NAME.gz, and that
// must unzip to the file: one the build did not gzip would be a 404.
func TestEveryUIFileIsEmbedded(t *testing.T) {
	n := 0
	err := filepath.WalkDir("web/dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".gz") {
			return err
		}
		n++
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(filepath.ToSlash(p), "web/dist/")
		gz, err := fs.ReadFile(web.Dist(), name+".gz")
		if err != nil {
			t.Errorf("%s is not embedded gzipped: %v", name, err)
			return nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Errorf("%s.gz: %v", name, err)
			return nil
		}
		if got, _ := io.ReadAll(zr); !bytes.Equal(got, want) {
			t.Errorf("%s.gz does not unzip to %s", name, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d files in web/dist", n)
	}
	if _, err := fs.ReadFile(web.Dist(), "app.js"); err == nil {
		t.Error("app.js itself is embedded beside app.js.gz: 2 MB that no browser asks for")
	}
}
