package dirs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSecureTightensAnOlderInstall: the XDG layout an older cove made
// 0755 ($XDG_CACHE_HOME/cove and its store, the data and runtime
// directories) is 0700 after Secure, and what it did not make is made
// 0700; the state directory, made by ProjectState, is tightened too.
func TestSecureTightensAnOlderInstall(t *testing.T) {
	home := t.TempDir()
	l, err := Resolve(Env{UID: os.Geteuid(), Home: home, XDGRuntimeDir: filepath.Join(home, "run"), XDGStateHome: filepath.Join(home, "state"), SudoUID: -1, SudoGID: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(l.Images), l.Images, l.Data, l.State} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o755)
	}
	if err := l.Secure(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(l.Images), l.Images, l.Data, l.Runtime, l.State} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", d, fi.Mode(), err)
		}
	}
	// Not above cove's own: the user's cache directory keeps its mode.
	if fi, err := os.Stat(filepath.Dir(filepath.Dir(l.Images))); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the user's cache directory: %v %v, want it left 0755", fi.Mode(), err)
	}
}
