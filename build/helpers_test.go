package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/testimage"
)

// coveBin is a static cove, built on first use by a test whose Dockerfile
// RUNs (the containers' init), removed when the tests end.
var coveBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if coveBin.dir != "" {
		os.RemoveAll(coveBin.dir)
	}
	os.Exit(code)
}

// binary is the static cove RUN's containers need; RUN in-process runs as
// root only (the rootless builds are cmd/cove's tests).
func binary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("RUN in-process needs root; cmd/cove's rootless build tests cover rootless RUN")
	}
	coveBin.once.Do(func() {
		coveBin.dir, coveBin.err = os.MkdirTemp("", "cove-build-test-")
		if coveBin.err != nil {
			return
		}
		os.Chmod(coveBin.dir, 0o755)
		coveBin.path = filepath.Join(coveBin.dir, "cove")
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", coveBin.path, "../cmd/cove")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			coveBin.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if coveBin.err != nil {
		t.Fatal(coveBin.err)
	}
	return coveBin.path
}

// testBuild is one in-process build: a Dockerfile, its context's files
// (a name ending in "@" is a symlink to the content), and more options.
type testBuild struct {
	dockerfile string
	files      map[string]string
	opts       Options // Context, CacheDir and Tag are set by run
	busybox    bool    // store busybox as busybox:test first, and give RUN a binary
	dir        string  // where the context, store and cache go (default: a new one)
}

// built is what a testBuild made.
type built struct {
	res   *Result
	cf    *v1.ConfigFile
	store *image.Store
}

// run builds tb, returning the build's error.
func (tb testBuild) run(t *testing.T) (*built, error) {
	t.Helper()
	dir := tb.dir
	if dir == "" {
		dir = t.TempDir()
	}
	ctxDir := filepath.Join(dir, "ctx")
	writeTree(t, ctxDir, tb.files)
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(tb.dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := image.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	o := tb.opts
	if tb.busybox {
		o.Binary = binary(t)
		storeBusybox(t, filepath.Join(dir, "store"))
	}
	o.Context, o.CacheDir, o.Tag = ctxDir, filepath.Join(dir, "cache"), "t:1"
	res, err := Build(context.Background(), store, o)
	if err != nil {
		return nil, err
	}
	cf, err := store.ConfigFile(res.Image)
	if err != nil {
		t.Fatal(err)
	}
	return &built{res: res, cf: cf, store: store}, nil
}

// mustRun is run, failing the test on the build's error.
func (tb testBuild) mustRun(t *testing.T) *built {
	t.Helper()
	b, err := tb.run(t)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// file reads p from the built image's root filesystem ("" if missing).
func (b *built) file(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.res.Image.RootFS, p))
	if err != nil {
		return ""
	}
	return string(data)
}

// writeTree writes files into dir (a name ending in "@" is a symlink to
// the content).
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, strings.TrimSuffix(name, "@"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if strings.HasSuffix(name, "@") {
			err = os.Symlink(body, p)
		} else {
			err = os.WriteFile(p, []byte(body), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// fileMode is p's mode in the built image, as ls shows it.
func fileMode(t *testing.T, b *built, p string) string {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(b.res.Image.RootFS, p))
	if err != nil {
		return err.Error()
	}
	return fi.Mode().String()
}

// storeBusybox stores busybox as busybox:test in the store at dir.
func storeBusybox(t *testing.T, dir string) {
	t.Helper()
	store, err := image.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := testimage.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(context.Background(), img, "busybox:test"); err != nil {
		t.Fatal(err)
	}
}
