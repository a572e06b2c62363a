package build

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cove-sh/cove/image"
	"golang.org/x/sys/unix"
)

// buildTree builds dockerfile (FROM scratch stages, no RUN) in-process
// with a context of files (nested paths made; a name ending in / is a
// directory, its content its octal mode) whose xattrs are set as given
// ("path" → "user.NAME=VALUE"), and returns the image's root filesystem
// and its environment.
func buildTree(t *testing.T, dockerfile string, files, xattrs map[string]string) (string, map[string]string) {
	t.Helper()
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "ctx")
	files["Dockerfile"] = dockerfile
	for name, data := range files {
		p := filepath.Join(ctxDir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "/") {
			mode, _ := strconv.ParseUint(data, 8, 32)
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, os.FileMode(mode)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, attr := range xattrs {
		k, v, _ := strings.Cut(attr, "=")
		if err := unix.Lsetxattr(filepath.Join(ctxDir, name), k, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	store, err := image.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), store, Options{Context: ctxDir, CacheDir: filepath.Join(dir, "cache"), Tag: "t:1"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := store.ConfigFile(res.Image)
	if err != nil {
		t.Fatal(err)
	}
	return res.Image.RootFS, envMap(cf.Config.Env)
}

// TestCopySemantics: what COPY writes, as the Dockerfile reference and
// BuildKit have it, where cove once did otherwise (found side by side with
// podman: cmd/cove's TestBuildSameAsPodman).
func TestCopySemantics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dockerfile string
		files, xattrs    map[string]string
		want             map[string]string // path → content ("" absent; "dir" a directory)
	}{
		{
			// "automatically removes any parent directory navigation".
			name: "../ removed from a source", dockerfile: "FROM scratch\nCOPY ../f /g\nCOPY /../d/../f /h\n",
			files: map[string]string{"f": "f"}, want: map[string]string{"g": "f", "h": "f"},
		},
		{
			// .dockerignore as BuildKit reads it: an exception brings a
			// file back from below an excluded directory, which is made
			// for it.
			name: "dockerignore exception below an excluded directory", dockerfile: "FROM scratch\nCOPY . /ctx/\n",
			files: map[string]string{".dockerignore": "build/\n!build/keep\nother\n", "build/keep": "k", "build/x": "x", "other/y": "y"},
			want:  map[string]string{"ctx/build": "dir", "ctx/build/keep": "k", "ctx/build/x": "", "ctx/other": ""},
		},
		{
			// With --parents, ** matches any number of directories, none
			// too.
			name: "** with --parents", dockerfile: "FROM scratch\nCOPY --parents ./src/**/*.txt /deep/\n",
			files: map[string]string{"src/a.txt": "a", "src/x/y/c.txt": "c", "src/x/d.md": "d"},
			want:  map[string]string{"deep/src/a.txt": "a", "deep/src/x/y/c.txt": "c", "deep/src/x/d.md": ""},
		},
		{
			// "Regular here-doc variable expansion ... rules apply".
			name: "heredoc expanded unless quoted",
			dockerfile: "FROM scratch\nARG NAME=world\nCOPY <<EOF /expanded\nhello $NAME\nEOF\n" +
				"COPY <<\"EOF\" /literal\nhello $NAME\nEOF\n",
			files: map[string]string{}, want: map[string]string{"expanded": "hello world\n", "literal": "hello $NAME\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, _ := buildTree(t, tc.dockerfile, tc.files, tc.xattrs)
			for p, want := range tc.want {
				fi, err := os.Lstat(filepath.Join(root, p))
				switch {
				case want == "" && !os.IsNotExist(err):
					t.Errorf("/%s: %v, want none", p, err)
				case want == "dir" && (err != nil || !fi.IsDir()):
					t.Errorf("/%s: %v, want a directory", p, err)
				case want != "" && want != "dir":
					if b, err := os.ReadFile(filepath.Join(root, p)); err != nil || string(b) != want {
						t.Errorf("/%s: %q %v, want %q", p, b, err, want)
					}
				}
			}
		})
	}
}

// TestCopyCarriesXattrs: COPY carries a file's user.* xattrs, through a
// stage too, as BuildKit and buildah do; not a directory source's own
// (its contents are copied), nor cove's owner record, which a context
// must not be able to forge.
func TestCopyCarriesXattrs(t *testing.T) {
	t.Parallel()
	root, _ := buildTree(t, "FROM scratch AS s\nCOPY f /f\nFROM scratch\nCOPY f /f\nCOPY d /d/\nCOPY --from=s /f /from-stage\n",
		map[string]string{"f": "f", "d/g": "g"},
		map[string]string{"f": "user.origin=context", "d": "user.dir=yes", "d/g": ownerXattr + "=0:0"})
	for p, want := range map[string]string{"f": "context", "from-stage": "context", "d": "", "d/g": ""} {
		name := "user.origin"
		if p == "d" {
			name = "user.dir"
		}
		if p == "d/g" {
			name = ownerXattr
		}
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(filepath.Join(root, p), name, buf)
		if want == "" && err == nil || want != "" && (err != nil || string(buf[:n]) != want) {
			t.Errorf("/%s %s: %q %v, want %q", p, name, buf[:max(n, 0)], err, want)
		}
	}
}

// TestCopyMadeDirectories: the directories a COPY makes for its
// destination are its --chown owner's, with its --chmod mode (else 0755),
// as BuildKit makes them; a directory source's mode is not given to its
// destination.
func TestCopyMadeDirectories(t *testing.T) {
	t.Parallel()
	root, env := buildTree(t, "FROM scratch\nCOPY --chown=55:66 f /a/b/\nCOPY --chmod=0750 d /moded/\nCOPY d /plain\n",
		map[string]string{"f": "f", "d/": "700", "d/g": "g"}, nil)
	for p, want := range map[string][3]uint32{"a": {0o755, 55, 66}, "a/b": {0o755, 55, 66}, "moded": {0o750, 0, 0}, "plain": {0o755, 0, 0}} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != want[0] || os.Geteuid() == 0 && (st.Uid != want[1] || st.Gid != want[2]) {
			t.Errorf("/%s: %o %d:%d, want %o %d:%d", p, st.Mode&0o7777, st.Uid, st.Gid, want[0], want[1], want[2])
		}
	}
	// A stage FROM scratch has BuildKit's PATH.
	if env["PATH"] != defaultPath {
		t.Errorf("PATH %q, want %q", env["PATH"], defaultPath)
	}
}

// TestStageInheritsArgs: "An ARG variable declared within a build stage
// is automatically inherited by other stages based on that stage."
func TestStageInheritsArgs(t *testing.T) {
	t.Parallel()
	_, env := buildTree(t, "FROM scratch AS parent\nARG I=from-parent\nFROM parent\nENV A=$I\nFROM scratch\nENV B=x$I\n"+
		"FROM parent\nENV A=$I B=x$I\n", map[string]string{}, nil)
	if env["A"] != "from-parent" || env["B"] != "xfrom-parent" {
		t.Errorf("env %v, want A=from-parent B=xfrom-parent", env)
	}
	_, env = buildTree(t, "FROM scratch AS parent\nARG I=from-parent\nFROM scratch\nENV B=x$I\n", map[string]string{}, nil)
	if env["B"] != "x" {
		t.Errorf("an unrelated stage sees the ARG: env %v", env)
	}
}
