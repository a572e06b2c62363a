package workspace

import (
	"slices"
	"testing"

	"github.com/cove-sh/cove/workspace/compose"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestServiceArgvResetsAsComposeDoes: a service's entrypoint and command
// over its image's as Compose has them: an entrypoint (even []) drops the
// image's command, [] resets to nothing, unset keeps the image's.
func TestServiceArgvResetsAsComposeDoes(t *testing.T) {
	t.Parallel()
	img := &v1.ConfigFile{Config: v1.Config{Entrypoint: []string{"/docker-entrypoint.sh"}, Cmd: []string{"postgres"}}}
	for _, c := range []struct {
		name                string
		entrypoint, command []string
		want                []string
	}{
		{"unset", nil, nil, []string{"/docker-entrypoint.sh", "postgres"}},
		{"command only", nil, []string{"sleep", "1"}, []string{"/docker-entrypoint.sh", "sleep", "1"}},
		{"entrypoint [] and a command", []string{}, []string{"sleep", "1"}, []string{"sleep", "1"}},
		{"entrypoint [] alone", []string{}, nil, []string{}},
		{"command []", nil, []string{}, []string{"/docker-entrypoint.sh"}},
		{"entrypoint", []string{"tini", "--"}, nil, []string{"tini", "--"}},
	} {
		got := serviceArgv(img, &compose.Service{Entrypoint: c.entrypoint, Command: c.command})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if img.Config.Entrypoint[0] != "/docker-entrypoint.sh" || img.Config.Cmd[0] != "postgres" {
		t.Errorf("the image's config changed: %+v", img.Config)
	}
}
