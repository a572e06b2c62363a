package devimage

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/devcontainer"
)

func TestOptionEnvName(t *testing.T) {
	for in, want := range map[string]string{"version": "VERSION", "flag-value": "FLAG_VALUE", "1st.thing": "_ST_THING",
		"__x": "_X", "installZsh": "INSTALLZSH"} {
		if got := OptionEnvName(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestInstallOrder: dependsOn before, installsAfter (only among the
// Features there) before, overrideFeatureInstallOrder first, name order
// within a round, and a cycle said.
func TestInstallOrder(t *testing.T) {
	mk := func(id string, after []string, deps ...*feature) *feature {
		f := &feature{id: id + ":1", bare: id, canonical: id + "@sha256:0"}
		f.meta.InstallsAfter = after
		for _, d := range deps {
			f.deps = append(f.deps, d.key())
		}
		return f
	}
	ids := func(fs []*feature) string {
		var s []string
		for _, f := range fs {
			s = append(s, f.bare)
		}
		return strings.Join(s, " ")
	}
	z := mk("r/z", nil)
	a := mk("r/a", nil, z)
	b := mk("r/b", []string{"r/c", "r/missing"})
	c := mk("r/c", nil)
	for _, tc := range []struct {
		override []string
		want     string
	}{
		{nil, "r/c r/z r/a r/b"},
		{[]string{"r/b"}, "r/c r/z r/b r/a"},          // b waits for c (installsAfter), then goes before a
		{[]string{"r/a", "r/z:1"}, "r/z r/a r/c r/b"}, // a needs z: z goes, then a, by priority
	} {
		got, err := installOrder([]*feature{a, b, c, z}, tc.override)
		if err != nil || ids(got) != tc.want {
			t.Errorf("override %v: %s %v, want %s", tc.override, ids(got), err, tc.want)
		}
	}
	if _, err := installOrder([]*feature{a, z}, []string{"r/q"}); err == nil || !strings.Contains(err.Error(), "overrideFeatureInstallOrder names r/q") {
		t.Errorf("unknown override: %v", err)
	}
	x := mk("r/x", []string{"r/y"})
	y := mk("r/y", []string{"r/x"})
	if _, err := installOrder([]*feature{x, y}, nil); err == nil || !strings.Contains(err.Error(), "circle") {
		t.Errorf("cycle: %v", err)
	}
}

func TestLegacyFeatureID(t *testing.T) {
	for in, want := range map[string]string{"git": "ghcr.io/devcontainers/features/git:1", "golang": "ghcr.io/devcontainers/features/go:1",
		"common": "ghcr.io/devcontainers/features/common-utils:1"} {
		if got := legacyFeatureID(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// TestFeatureRegistryUnreachable: a Feature whose registry this machine
// cannot reach says so, and what to do (bring it where it can be), before
// anything is built.
func TestFeatureRegistryUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing answers there now
	dir := t.TempDir()
	body := `{"image": "debian:bookworm", "features": {"` + addr + `/features/go:1": {}}}`
	dc, err := devcontainer.Parse(dir, filepath.Join(dir, ".devcontainer.json"), []byte(body), devcontainer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = InstallFeatures(context.Background(), dc, "debian:bookworm", "cove-test/f", Options{CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the registry") || !strings.Contains(err.Error(), "crane copy "+addr+"/features/go:1 REGISTRY/NAME") {
		t.Errorf("an unreachable Feature: %v", err)
	}
}
