package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushFeature publishes a Feature as the distribution spec has it (config
// application/vnd.devcontainers, one application/vnd.devcontainers.layer.v1+tar
// layer holding its files) to the test registry as addr/features/NAME:1,
// and returns its reference without the tag.
func pushFeature(t *testing.T, addr, feature string, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range []string{"devcontainer-feature.json", "install.sh"} {
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: "./" + n, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), "application/vnd.devcontainers")
	img, err := mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(buf.Bytes(), "application/vnd.devcontainers.layer.v1+tar")})
	if err != nil {
		t.Fatal(err)
	}
	bare := fmt.Sprintf("%s/features-%d/%s", addr, os.Getpid(), feature)
	ref, err := name.ParseReference(bare + ":1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return bare
}

// viaProxy is a Feature reference pushed by pushFeature, through proxy.
func viaProxy(p *testregistry.Proxy, bare string) string {
	return strings.TrimSuffix(p.Ref(bare+":1"), ":1")
}

// TestDevcontainerFeatures: Features are installed (they were named as
// not supported): OCI ones from a registry, and a local ./one, each
// install.sh run as root in a build container with its options as the
// spec names them (defaults too) and the users; dependsOn installs a
// dependency first (and brings it in unasked), installsAfter orders the
// local one after; a Feature's containerEnv is in the workspace and its
// postCreateCommand runs. A second start takes it all from the cache
// without the registry; a change of options asks for --fresh, which
// installs them again.
func TestDevcontainerFeatures(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	base := busyboxRef(t)
	proxy := testregistry.NewProxy(t, addr)
	zbase := viaProxy(proxy, pushFeature(t, addr, "z-base", map[string]string{
		"devcontainer-feature.json": `{"id": "z-base", "version": "1.0.0", "name": "z",
			"options": {"greeting": {"type": "string", "default": "hello"}, "flag-value": {"type": "boolean", "default": false}},
			"containerEnv": {"Z_HOME": "/opt/z", "PATH": "/opt/z/bin:${PATH}"},
			"postCreateCommand": "echo z-created >> feature-created.txt"}`,
		"install.sh": "#!/bin/sh\necho \"z-base $GREETING $FLAG_VALUE $_REMOTE_USER $_REMOTE_USER_HOME $(id -u)\" >> /features.log\nmkdir -p /opt/z/bin\n",
	}))
	auser := viaProxy(proxy, pushFeature(t, addr, "a-user", map[string]string{
		"devcontainer-feature.json": fmt.Sprintf(`{"id": "a-user", "version": "1.0.0", "name": "a",
			"options": {"1st.thing": {"type": "string", "default": "d"}},
			"dependsOn": {"%s:1": {"greeting": "from-dep"}}}`, zbase),
		"install.sh": "#!/bin/sh\necho \"a-user $_ST_THING\" >> /features.log\n",
	}))
	config := func(thing string) string {
		return fmt.Sprintf(`{"image": "%s", "features": {"%s:1": {"1st.thing": "%s"}, "./local-c": {}}}`, base, auser, thing)
	}
	project, root := devcontainerProject(t, config("one"))
	local := filepath.Join(project, ".devcontainer", "local-c")
	os.MkdirAll(local, 0o755)
	os.WriteFile(filepath.Join(local, "devcontainer-feature.json"), []byte(fmt.Sprintf(`{"id": "local-c", "version": "0.1.0", "installsAfter": ["%s"]}`, auser)), 0o644)
	execfile.Write(filepath.Join(local, "install.sh"), []byte("#!/bin/sh\necho \"local-c $(cat note.txt)\" >> /features.log\n"), 0o755)
	os.WriteFile(filepath.Join(local, "note.txt"), []byte("beside"), 0o644)
	name := workspace.Name(project)

	start := time.Now()
	r := runProc(t, root, "", "up", "--detach", project)
	cold := time.Since(start)
	if r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	// Without dependsOn, a-user would come first (names sort so); without
	// installsAfter, ./local-c would.
	want := "z-base from-dep false root /root 0\na-user one\nlocal-c beside\n"
	if r := runProc(t, root, "", "exec", name, "cat", "/features.log"); r.stdout != want {
		t.Errorf("/features.log: %+v, want %q", r, want)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo $Z_HOME $PATH"); !strings.HasPrefix(r.stdout, "/opt/z /opt/z/bin:/") {
		t.Errorf("the Feature's containerEnv: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "feature-created.txt")); string(b) != "z-created\n" {
		t.Errorf("the Feature's postCreateCommand: %q", b)
	}
	runProc(t, root, "", "stop", "--time", "2", name)

	// Warm: everything from the cache, the registry not asked (it would
	// fail now).
	proxy.SetStatus(500)
	start = time.Now()
	r = runProc(t, root, "", "up", "--detach", project)
	warm := time.Since(start)
	if r.code != 0 || !strings.Contains(r.stderr, "(6 of 6 layer steps cached") {
		t.Fatalf("second up: %+v", r)
	}
	t.Logf("cove up with 3 Features: cold %v, warm %v", cold, warm)
	runProc(t, root, "", "stop", "--time", "2", name)

	// Another option: installed again, after --fresh.
	proxy.SetStatus(0)
	os.WriteFile(filepath.Join(project, ".devcontainer", "devcontainer.json"), []byte(config("two")), 0o644)
	if r := runProc(t, root, "", "up", "--detach", project); r.code == 0 || !strings.Contains(r.stderr, "build or Features") || !strings.Contains(r.stderr, "--fresh") {
		t.Fatalf("up after an option changed: %+v", r)
	}
	if r := runProc(t, root, "", "up", "--detach", "--fresh", project); r.code != 0 {
		t.Fatalf("up --fresh: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/features.log"); r.stdout != strings.Replace(want, "one", "two", 1) {
		t.Errorf("after --fresh: %+v", r)
	}

	// The tag moves to a new z-base: a start keeps the Feature it has
	// (the registry is not asked); --fresh asks again and installs the new.
	pushFeature(t, addr, "z-base", map[string]string{
		"devcontainer-feature.json": `{"id": "z-base", "version": "1.1.0", "options": {"greeting": {"type": "string", "default": "hello"}}}`,
		"install.sh":                "#!/bin/sh\necho \"z-base-v2 $GREETING\" >> /features.log\n",
	})
	runProc(t, root, "", "stop", "--time", "2", name)
	if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 {
		t.Fatalf("up after the tag moved: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "head", "-1", "/features.log"); r.stdout != "z-base from-dep false root /root 0\n" {
		t.Errorf("a plain start after the tag moved: %+v", r)
	}
	if r := runProc(t, root, "", "up", "--detach", "--fresh", project); r.code != 0 {
		t.Fatalf("up --fresh after the tag moved: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "head", "-1", "/features.log"); r.stdout != "z-base-v2 from-dep\n" {
		t.Errorf("--fresh after the tag moved: %+v", r)
	}
	runProc(t, root, "", "rm", "-f", name)
	if r := runProc(t, root, "", "prune", "--build-cache"); r.code != 0 || !strings.Contains(r.stdout, "fetched devcontainer Features") {
		t.Errorf("prune --build-cache: %+v", r)
	}
	if fs, _ := os.ReadDir(filepath.Join(root, "data", "build", "features")); len(fs) != 0 {
		t.Errorf("after prune --build-cache the Features cache holds %d entries", len(fs))
	}
}

// TestDevcontainerFeatureTarball: a Feature published as a .tgz at a URL
// is fetched from this host, to any address the project wrote: only once
// the user trusted the file; before, it is held back and said.
func TestDevcontainerFeatureTarball(t *testing.T) {
	t.Parallel()
	needRoot(t)
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	for n, body := range map[string]string{"devcontainer-feature.json": `{"id": "tgz", "version": "1.0.0"}`,
		"install.sh": "#!/bin/sh\necho \"tgz $OPT\" > /tgz.log\n"} {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Write(tgz.Bytes())
	}))
	defer srv.Close()
	project, root := devcontainerProject(t, fmt.Sprintf(`{"image": "%s", "features": {"%s/devcontainer-feature-tgz.tgz": {"opt": "x"}}}`, busyboxRef(t), srv.URL))
	name := workspace.Name(project)
	env := []string{"HOME=" + t.TempDir()}
	if r := runEnv(t, root, env, "up", "--detach", project); r.code != 0 || !strings.Contains(r.stderr, "not installed until you trust the file") || fetched.Load() != 0 {
		t.Fatalf("untrusted: %+v (fetched %d)", r, fetched.Load())
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	// Its layer was made without the Feature: said, in words of the file.
	if r := runEnv(t, root, env, "up", "--detach", "--trust", project); r.code == 0 || !strings.Contains(r.stderr, "before "+filepath.Join(project, ".devcontainer", "devcontainer.json")+"'s build or Features: cove up --fresh") {
		t.Fatalf("trusted, the old layer: %+v", r)
	}
	if r := runEnv(t, root, env, "up", "--detach", "--fresh", project); r.code != 0 || fetched.Load() != 1 {
		t.Fatalf("trusted: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/tgz.log"); r.stdout != "tgz x\n" {
		t.Errorf("/tgz.log: %+v", r)
	}
}

// TestDevcontainerRootless: a user's cove builds devcontainer.json's
// Dockerfile and installs a local Feature on it (install.sh as root in
// the user namespace), and the workspace starts on the result. Its
// remoteUser (uid 1234, not the host user's) is the host user inside
// (keep-id): it writes the project (its files are the host user's on the
// host, a postCreateCommand's too) and its home; cove exec -u root is
// root and writes the image's /etc; the cost is said; cove rm leaves no
// file of a subordinate id behind.
func TestDevcontainerRootless(t *testing.T) {
	t.Parallel()
	needRoot(t)
	u, uid, gid := testUser(t)
	base := busyboxRef(t)
	dir := rootlessBase(t, "cove-rootless-devc-")
	project, root := filepath.Join(dir, "project"), filepath.Join(dir, "root")
	for _, d := range []string{project, root, filepath.Join(project, ".devcontainer"), filepath.Join(project, ".devcontainer", "feat")} {
		os.Mkdir(d, 0o755)
		os.Chown(d, uid, gid)
	}
	for p, body := range map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}, "features": {"./feat": {"word": "rootless"}},
			"remoteUser": "dev", "mounts": ["source=data,target=/data,type=volume"],
			"postCreateCommand": "id -u > /workspace/post.log && touch $HOME/post"}`,
		".devcontainer/Dockerfile":                     "FROM " + base + "\nRUN echo built > /built && echo dev:x:1234:1234::/home/dev:/bin/sh >> /etc/passwd && echo dev:x:1234: >> /etc/group && mkdir -p /home/dev && chown 1234:1234 /home/dev\n",
		".devcontainer/feat/devcontainer-feature.json": `{"id": "feat", "version": "1.0.0", "options": {"word": {"type": "string", "default": "x"}}}`,
		".devcontainer/feat/install.sh":                "#!/bin/sh\necho \"$WORD $(id -u) $_REMOTE_USER $_REMOTE_USER_HOME\" > /feat.log\n",
	} {
		execfile.Write(filepath.Join(project, p), []byte(body), 0o755)
		os.Chown(filepath.Join(project, p), uid, gid)
	}
	as := func(args ...string) result {
		cmd, out, errb := coveProc(root, args...)
		asTestUser(cmd, u, uid, gid)
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
	name := workspace.Name(project)
	defer as("rm", "-f", name)
	r := as("up", "--detach", project)
	if r.code != 0 {
		t.Fatalf("rootless up: %+v", r)
	}
	if !strings.Contains(r.stderr, "cove: note: rootless, you are the workspace's user dev (uid 1234) inside") ||
		!strings.Contains(r.stderr, "the project is that user's to write; for root, cove exec -u root "+name) {
		t.Errorf("rootless up should say what keep-id costs: %+v", r)
	}
	// The Feature is told the users; a new volume is remoteUser's.
	if r := as("exec", name, "sh", "-c", "cat /built /feat.log; touch /data/x && stat -c %u /data/x"); r.stdout != "built\nrootless 0 dev /home/dev\n1234\n" {
		t.Errorf("rootless: %+v", r)
	}
	// remoteUser writes the project and its home; the project is its own
	// inside, and the image's files keep the owners the image gave them
	// (its home is its own, /bin/sh root's).
	if r := as("exec", name, "sh", "-c", "id -u && touch /workspace/new $HOME/x && stat -c %u /workspace/new /workspace $HOME/x /bin/sh && cat /workspace/post.log && ls $HOME/post"); r.code != 0 ||
		r.stdout != "1234\n1234\n1234\n1234\n0\n1234\n/home/dev/post\n" {
		t.Errorf("remoteUser in the project and its home: %+v", r)
	}
	for _, f := range []string{"new", "post.log"} {
		fi, err := os.Stat(filepath.Join(project, f))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s is %d:%d on the host, want the host user's %d:%d", f, st.Uid, st.Gid, uid, gid)
		}
	}
	// Root inside is root: it writes the image's /etc, and what it makes
	// is its own.
	if r := as("exec", "-u", "root", name, "sh", "-c", "id -u && touch /etc/x && stat -c %u /etc/x"); r.code != 0 || r.stdout != "0\n0\n" {
		t.Errorf("cove exec -u root: %+v", r)
	}
	// updateRemoteUserUID false: the user is root inside again, and both
	// that and the layer made under keep-id are said.
	dcFile := filepath.Join(project, ".devcontainer", "devcontainer.json")
	b, _ := os.ReadFile(dcFile)
	os.WriteFile(dcFile, []byte(strings.Replace(string(b), `"remoteUser": "dev",`, `"remoteUser": "dev", "updateRemoteUserUID": false,`, 1)), 0o644)
	as("stop", name)
	r = as("up", "--detach", project)
	if r.code != 0 || !strings.Contains(r.stderr, "updateRemoteUserUID is false: the project and the image's files are root's inside, and the workspace's user dev (uid 1234) cannot write them") ||
		!strings.Contains(r.stderr, "kept layer was made with another user namespace mapping (keep-id 1234:1234, now root)") {
		t.Errorf("updateRemoteUserUID false: %+v", r)
	}
	if r := as("exec", name, "sh", "-c", "stat -c %u /workspace"); r.stdout != "0\n" {
		t.Errorf("updateRemoteUserUID false, the project should be root's inside: %+v", r)
	}
	if r := as("rm", "-f", name); r.code != 0 {
		t.Fatalf("rootless rm: %+v", r)
	}
	// Nothing of the workspace is left, of a subordinate id or another.
	filepath.WalkDir(filepath.Join(root, "data", "workspaces", name), func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			t.Errorf("left after cove rm: %s", p)
		}
		return nil
	})
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p == filepath.Join(root, "data", "build") || p == filepath.Join(root, "images", "images") {
			return filepath.SkipDir // the build's cache and the images, kept for the next start, with the ids the image gives
		}
		if fi, err := d.Info(); err == nil {
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
				t.Errorf("left after cove rm, owned by %d: %s", st.Uid, p)
			}
		}
		return nil
	})
}
