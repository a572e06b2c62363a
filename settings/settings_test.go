package settings

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoad: a missing file is the defaults; the file's image and mirrors
// and the editor's settings are read; an unknown key, an editor setting
// out of range, a bad image name or a mirror with a scheme is
// an error naming the file (a setting silently dropped would pull from
// where the user said not to).
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if s, err := Load(path); err != nil || s.Image != "" || s.RegistryMirrors != nil || s.Path != path {
		t.Errorf("missing file: %+v %v", s, err)
	}
	os.WriteFile(path, []byte(`{"image": "ghcr.io/me/dev:1", "registryMirrors": {"docker.io": ["127.0.0.1:5000", "m.example/hub"]}}`), 0o644)
	s, err := Load(path)
	if err != nil || s.Image != "ghcr.io/me/dev:1" || strings.Join(s.RegistryMirrors["docker.io"], ",") != "127.0.0.1:5000,m.example/hub" {
		t.Errorf("read: %+v %v", s, err)
	}
	os.WriteFile(path, []byte(`{"editor": {"fontSize": 16, "tabSize": 2, "wordWrap": true, "formatOnSave": false}}`), 0o644)
	if s, err := Load(path); err != nil || s.Editor.FontSize != 16 || s.Editor.TabSize != 2 || !s.Editor.WordWrap || s.Editor.FormatOnSave == nil || *s.Editor.FormatOnSave {
		t.Errorf("the editor's settings: %+v %v", s.Editor, err)
	}
	for _, bad := range []string{`{"img": "x"}`, `{"image": "Not A Ref"}`, `{"registryMirrors": {"docker.io": ["https://m.example"]}}`, `{`,
		`{"editor": {"fontSize": 400}}`, `{"editor": {"tabSize": 0.5}}`, `{"editor": {"theme": "x"}}`} {
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestPathHonoursXDGConfigHome: the file is in $XDG_CONFIG_HOME/cove when
// that is absolute, else in HOME/.config/cove (a relative one is ignored,
// as the XDG spec says), and only for the user whose home is $HOME.
func TestPathHonoursXDGConfigHome(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if p := Path("/home/u"); p != "/x/cfg/cove/settings.json" {
		t.Errorf("with XDG_CONFIG_HOME: %s", p)
	}
	if p := Path("/tmp/other-home"); p != "/tmp/other-home/.config/cove/settings.json" {
		t.Errorf("another home: %s", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "rel")
	if p := Path("/home/u"); p != "/home/u/.config/cove/settings.json" {
		t.Errorf("with a relative XDG_CONFIG_HOME: %s", p)
	}
}
