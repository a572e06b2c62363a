package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cove-sh/cove/devcontainer"
)

// A task's tree gets its files before its workspace starts exactly when
// the start reads them: an image built from the project, Compose; an
// initializeCommand and bind mounts only once trusted (untrusted, the
// start leaves them out); not for an image alone, a volume, nor without a
// devcontainer.json (--image); a broken one says yes (its start says why).
func TestFilesBeforeStart(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	const (
		initCmd   = `{"image": "debian", "initializeCommand": "./init"}`
		bindMount = `{"image": "debian", "mounts": ["source=${localWorkspaceFolder}/cache,target=/c,type=bind"]}`
	)
	for _, c := range []struct {
		config        string
		trusted, want bool
	}{
		{"", false, false},
		{`{"image": "debian"}`, false, false},
		{`{"image": "debian", "postCreateCommand": "make"}`, false, false},
		{`{"image": "debian", "mounts": ["source=cache,target=/c,type=volume"]}`, false, false},
		{initCmd, false, false},
		{initCmd, true, true},
		{bindMount, false, false},
		{bindMount, true, true},
		{`{"build": {"dockerfile": "Dockerfile", "context": ".."}}`, false, true},
		{`{"dockerComposeFile": "compose.yml", "service": "app"}`, false, true},
		{`{"image": `, false, true},
	} {
		dir := t.TempDir()
		if c.config != "" {
			os.Mkdir(filepath.Join(dir, ".devcontainer"), 0o755)
			os.WriteFile(filepath.Join(dir, ".devcontainer", "devcontainer.json"), []byte(c.config), 0o644)
		}
		if c.trusted {
			if _, _, err := devcontainer.Trust(dir, devcontainerOptions(Spec{Dir: dir})); err != nil {
				t.Fatal(err)
			}
		}
		if got := FilesBeforeStart(Spec{Dir: dir}); got != c.want {
			t.Errorf("%s (trusted %v): %v, want %v", c.config, c.trusted, got, c.want)
		}
	}
}
