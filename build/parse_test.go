package build

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cove-sh/cove/image"
)

// buildErr builds dockerfile in-process (FROM scratch stages only) with
// o's target and build args, and returns the stored image's env, or the
// build's error.
func buildErr(t *testing.T, dockerfile string, o Options) ([]string, error) {
	t.Helper()
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "ctx")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := image.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
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
	return cf.Config.Env, nil
}

// TestParseAndTarget: the Dockerfile's parse errors name their line;
// --target picks the stage, and a stage it does not need is not built
// (its failing instruction never runs); global ARGs take --build-arg, a
// predefined platform value, or their default expanded.
func TestParseAndTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, dockerfile, target, want string }{
		{"no from", "ARG A=1\n", "", "the Dockerfile has no FROM"},
		{"unknown", "FROM scratch\nFROBNICATE x\n", "", "line 2: unknown instruction FROBNICATE"},
		{"no such target", "FROM scratch AS a\n", "b", "--target b: no stage has that name"},
		{"bad global arg", "ARG A=${B:?missing}\nFROM scratch\n", "", "line 1: ARG: "},
		{"the broken stage as target", "FROM scratch AS a\nFROM scratch AS broken\nADD --keep-git-dir=true x /x\n", "broken",
			"line 3: ADD: --keep-git-dir is only for git sources"},
	} {
		if _, err := buildErr(t, tc.dockerfile, Options{Target: tc.target}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	env, err := buildErr(t, "ARG G=dflt\nARG GIVEN\nARG TARGETARCH\nARG E=${G}-x\n"+
		"FROM scratch AS a\nARG G\nARG GIVEN\nARG TARGETARCH\nARG E\nENV G=$G GIVEN=$GIVEN ARCH=$TARGETARCH E=$E\n"+
		"FROM scratch AS broken\nADD --keep-git-dir=true x /x\n",
		Options{Target: "a", BuildArgs: map[string]string{"GIVEN": "given"}})
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(env)
	for k, v := range map[string]string{"G": "dflt", "GIVEN": "given", "ARCH": runtime.GOARCH, "E": "dflt-x"} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q (env %q)", k, got[k], v, env)
		}
	}
}
