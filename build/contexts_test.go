package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildContexts: a named context (--build-context) is what FROM,
// COPY --from and RUN --mount from= name by its name: a directory read
// as the main context is (its own .dockerignore applied, no symlink out
// of it followed), or docker-image://REF, found by the image's short name
// too; a stage of that name is the context instead of its instructions.
func TestBuildContexts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	extra := filepath.Join(dir, "extra")
	writeTree(t, extra, map[string]string{"f": "extra-f", "sub/g": "extra-g", "ignored": "x", ".dockerignore": "ignored\n",
		"out@": "/etc"})
	df := "FROM scratch AS replaced\nCOPY missing-in-main /\n" +
		"FROM extra AS fromctx\n" +
		"FROM scratch\nCOPY --from=extra f /from-extra\nCOPY --from=fromctx /sub/g /from-stage\n" +
		"COPY --from=replaced f /from-replaced\nCOPY --from=docker.io/library/alpine:latest /bin/busybox /bb\n"
	b := testBuild{dir: dir, dockerfile: df, opts: Options{Contexts: map[string]string{
		"extra": extra, "replaced": extra, "alpine": "docker-image://busybox:test"}}}
	// busybox:test is only stored, never run: no binary needed.
	storeBusybox(t, filepath.Join(dir, "store"))
	got := b.mustRun(t)
	for p, want := range map[string]string{"from-extra": "extra-f", "from-stage": "extra-g", "from-replaced": "extra-f"} {
		if g := got.file(t, p); g != want {
			t.Errorf("/%s: %q, want %q", p, g, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(got.res.Image.RootFS, "bb")); err != nil || fi.Size() == 0 {
		t.Errorf("COPY --from=alpine (docker-image://busybox:test): %v", err)
	}

	for name, df := range map[string]string{
		"dockerignore": "FROM scratch\nCOPY --from=extra ignored /x\n",
		"symlink out":  "FROM scratch\nCOPY --from=extra out/hostname /x\n",
	} {
		if _, err := (testBuild{dockerfile: df, opts: Options{Contexts: map[string]string{"extra": extra}}}).run(t); err == nil {
			t.Errorf("%s: the build read what the context does not give", name)
		}
	}
}

// TestConfinedBuildContext: a confined build (an untrusted project's
// Dockerfile) takes a context directory only by a path with no symlink
// in it: a workspace could have made one lead elsewhere. An unconfined
// build follows the path as given, as docker build does.
func TestConfinedBuildContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	writeTree(t, secret, map[string]string{"key": "private"})
	if err := os.Symlink(secret, filepath.Join(dir, "shared")); err != nil {
		t.Fatal(err)
	}
	df := "FROM scratch\nCOPY --from=shared key /key\n"
	via := map[string]string{"shared": filepath.Join(dir, "shared")}
	_, err := testBuild{dockerfile: df, opts: Options{Confined: true, Contexts: via}}.run(t)
	if err == nil || !strings.Contains(err.Error(), "no symlink") {
		t.Errorf("confined, a context through a symlink: %v", err)
	}
	b := testBuild{dockerfile: df, opts: Options{Confined: true, Contexts: map[string]string{"shared": secret}}}.mustRun(t)
	if b.file(t, "key") != "private" {
		t.Errorf("confined, a context by its real path: /key %q", b.file(t, "key"))
	}
	if b := (testBuild{dockerfile: df, opts: Options{Contexts: via}}).mustRun(t); b.file(t, "key") != "private" {
		t.Errorf("unconfined, a context through a symlink: /key %q", b.file(t, "key"))
	}
	// Nor does a context make a confined build take an image from a file
	// of this machine's.
	local := map[string]string{"base": "docker-image://oci:" + filepath.Join(dir, "layout") + ":v1"}
	_, err = testBuild{dockerfile: "FROM base\n", opts: Options{Confined: true, Contexts: local}}.run(t)
	if err == nil || !strings.Contains(err.Error(), "registries only") {
		t.Errorf("confined, docker-image://oci:DIR: %v", err)
	}
}

// TestParseBuildContexts: what cove build takes as --build-context, and
// what it refuses with what to do (it builds offline: no URL, no git).
func TestParseBuildContexts(t *testing.T) {
	t.Parallel()
	got, err := ParseBuildContexts([]string{"a=./dir", "b=docker-image://alpine:3", "c=/abs=with=equals"})
	if err != nil || got["a"] != "./dir" || got["b"] != "docker-image://alpine:3" || got["c"] != "/abs=with=equals" {
		t.Errorf("%v %v", got, err)
	}
	for spec, want := range map[string]string{
		"noequals":                          "want NAME=DIR",
		"x=https://example.com/ctx.tar":     "fetches no URL or git",
		"x=git@github.com:moby/buildkit":    "fetches no URL or git",
		"x=oci-layout:///l@sha256:abcd":     "docker-image://oci:DIR:TAG",
		"x=docker-image://":                 "names no image",
		"x=https://github.com/moby/b.git#v": "fetches no URL or git",
	} {
		if _, err := ParseBuildContexts([]string{spec}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
}

// TestContextKey: a context is found by an image's short name whatever
// form the Dockerfile names it in, as BuildKit finds it.
func TestContextKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"alpine": "alpine", "alpine:latest": "alpine", "docker.io/library/alpine": "alpine",
		"alpine:3": "alpine:3", "ghcr.io/x/y:latest": "ghcr.io/x/y", "Stage": "stage", "127.0.0.1:5000/a:b": "127.0.0.1:5000/a:b",
	} {
		if got := contextKey(in); got != want {
			t.Errorf("contextKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDockerfileIgnoreFile: <Dockerfile>.dockerignore beside the
// Dockerfile is the build's ignore file instead of the context's
// .dockerignore, as BuildKit reads it; read from the context only (a
// symlink there out of it is refused, not followed).
func TestDockerfileIgnoreFile(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a": "a", "b": "b", ".dockerignore": "a\n", "Dockerfile.dockerignore": "b\n"}
	b := testBuild{dockerfile: "FROM scratch\nCOPY . /c/\n", files: files}.mustRun(t)
	if b.file(t, "c/a") != "a" || b.file(t, "c/b") != "" {
		t.Errorf("with Dockerfile.dockerignore: /c/a %q /c/b %q, want a and none", b.file(t, "c/a"), b.file(t, "c/b"))
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"outside": "b\n"})
	files = map[string]string{"b": "b", "Dockerfile.dockerignore@": filepath.Join(dir, "outside")}
	if _, err := (testBuild{dockerfile: "FROM scratch\nCOPY . /c/\n", files: files}).run(t); err == nil || !strings.Contains(err.Error(), "leads out of the build context") {
		t.Errorf("an ignore file that is a symlink out of the context: %v", err)
	}
}
