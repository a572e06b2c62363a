package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// runEnv is runProc with extra environment (HOME, a host variable).
func runEnv(t *testing.T, root string, env []string, args ...string) result {
	t.Helper()
	cmd, out, errb := coveProc(root, args...)
	cmd.Env = append(cmd.Env, env...)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("cove %v hung; stderr: %s", args, errb)
	}
	return result{}
}

// devcontainerProject writes body as the project's devcontainer.json
// and returns the project and a COVE_ROOT; the workspace goes at the end.
func devcontainerProject(t *testing.T, body string) (project, root string) {
	t.Helper()
	project, root = t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(project, ".devcontainer"), 0o755)
	if err := os.WriteFile(filepath.Join(project, ".devcontainer", "devcontainer.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	return project, root
}

func running(t *testing.T, root, name string) bool {
	t.Helper()
	r := runProc(t, root, "", "ps")
	return strings.Contains(r.stdout, name)
}

// TestDevcontainerComposeMissingFile: a Compose config whose file is not
// there stops before anything starts, naming the file.
func TestDevcontainerComposeMissingFile(t *testing.T) {
	t.Parallel()
	needRoot(t)
	project, root := devcontainerProject(t, `{"name": "app", "dockerComposeFile": ["../docker-compose.yml"], "service": "app",
		"runServices": ["app", "db"], "workspaceFolder": "/workspaces/app"}`)
	r := runProc(t, root, "", "up", "--detach", project)
	if r.code == 0 || !strings.Contains(r.stderr, filepath.Join(project, "docker-compose.yml")) || !strings.Contains(r.stderr, "no such file") {
		t.Fatalf("compose: %+v", r)
	}
	if running(t, root, workspace.Name(project)) {
		t.Fatal("a refused config left a container")
	}
	if _, err := os.Stat(filepath.Join(root, "data", "workspaces", workspace.Name(project), "upper")); err == nil {
		t.Error("a refused config made a layer")
	}
}

// TestDevcontainerLifecycle: the lifecycle commands in the spec's order
// and frequency, in their three forms, in the workspace folder (an array
// with ./script is the folder's, not init's), and the environment as the
// spec says: a number accepted, null unsets, ${containerEnv:PATH} and
// ${containerWorkspaceFolder} resolved. The image's ENTRYPOINT is not
// put in front of cove's server. Each of those was wrong before.
func TestDevcontainerLifecycle(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	img, err := mutate.Config(layered(t), v1.Config{Entrypoint: []string{"/bin/false"}, Cmd: []string{"sh"},
		Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "FOO=from-image"}})
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	project, root := devcontainerProject(t, `{
		"image": "`+ref+`",
		"workspaceFolder": "/src/app",
		"containerEnv": {"PORT": 8080},
		"remoteEnv": {"FOO": null, "PATH": "${containerWorkspaceFolder}/bin:${containerEnv:PATH}"},
		"onCreateCommand": ["./setup.sh", "on-create"],
		"updateContentCommand": "echo update-content >> order.txt",
		"postCreateCommand": {"a": "echo post-create-a >> a.txt", "b": ["sh", "-c", "echo post-create-b >> b.txt"]},
		"postStartCommand": "echo post-start >> order.txt; echo start >> /cache/starts",
		"mounts": ["source=cache,target=/cache,type=volume"],
		"postAttachCommand": "echo post-attach >> order.txt",
	}`)
	os.WriteFile(filepath.Join(project, "setup.sh"), []byte("#!/bin/sh\necho \"$1 $PWD\" >> order.txt\n"), 0o755)
	name := workspace.Name(project)
	for i := 0; i < 2; i++ {
		if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 {
			t.Fatalf("up: %+v", r)
		}
		runProc(t, root, "", "stop", "--time", "2", name)
	}
	b, _ := os.ReadFile(filepath.Join(project, "order.txt"))
	if want := "on-create /src/app\nupdate-content\npost-start\npost-attach\npost-start\npost-attach\n"; string(b) != want {
		t.Errorf("order.txt:\n%s\nwant\n%s", b, want)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if b, _ := os.ReadFile(filepath.Join(project, f)); !strings.HasPrefix(string(b), "post-create-") || strings.Count(string(b), "\n") != 1 {
			t.Errorf("%s = %q: the parallel postCreateCommand should have run once", f, b)
		}
	}
	if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	r := runProc(t, root, "", "exec", name, "sh", "-c", `echo "$PORT|${FOO-unset}|$PATH|$PWD"`)
	if want := "8080|unset|/src/app/bin:/usr/sbin:/usr/bin:/sbin:/bin|/src/app\n"; r.stdout != want {
		t.Errorf("env: %+v, want %q", r, want)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/cache/starts"); r.stdout != "start\nstart\nstart\n" {
		t.Errorf("the volume is not kept across starts: %+v", r)
	}
	if r := runProc(t, root, "", "exec", "-w", "/src/app", name, "./setup.sh", "exec"); r.code != 0 {
		t.Errorf("cove exec ./script in -w: %+v", r)
	}
}

// TestDevcontainerDefaultFolder: without workspaceFolder the project is
// at /workspace, cove's place, and at the spec's /workspaces/NAME too,
// where a project's command may name it.
func TestDevcontainerDefaultFolder(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "postCreateCommand": "cat /workspaces/${localWorkspaceFolderBasename}/marker > seen.txt; pwd >> seen.txt"}`)
	os.WriteFile(filepath.Join(project, "marker"), []byte("here\n"), 0o644)
	if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "seen.txt")); string(b) != "here\n/workspace\n" {
		t.Errorf("seen.txt = %q", b)
	}
}

// TestDevcontainerMissingBindSource: a trusted mount of a host path this
// machine lacks (Docker's socket, on a machine without Docker) stops the
// start before the image is pulled, naming the path and what to do.
func TestDevcontainerMissingBindSource(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	missing := filepath.Join(t.TempDir(), "run", "docker.sock")
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "mounts": ["source=`+missing+`,target=/var/run/docker.sock,type=bind"]}`)
	r := runEnv(t, root, []string{"HOME=" + t.TempDir()}, "up", "--detach", "--trust", project)
	if r.code == 0 || !strings.Contains(r.stderr, "mounts: the host path "+missing+" does not exist on this machine: it is Docker's socket") || strings.Contains(r.stderr, "pulling") {
		t.Errorf("a missing bind source: %+v", r)
	}
	if running(t, root, workspace.Name(project)) {
		t.Error("the workspace runs")
	}
}

// TestDevcontainerBindStaysInProject: a trusted bind of a path in the
// project is bound while it stays in the project; once the workspace has
// made it a symlink to a host directory, the next start refuses, and the
// host's files are not shown to it.
func TestDevcontainerBindStaysInProject(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "mounts": ["source=${localWorkspaceFolder}/cache,target=/cache,type=bind"]}`)
	os.Mkdir(filepath.Join(project, "cache"), 0o755)
	os.WriteFile(filepath.Join(project, "cache", "mine"), []byte("project's\n"), 0o644)
	env := []string{"HOME=" + t.TempDir()}
	name := workspace.Name(project)
	if r := runEnv(t, root, env, "up", "--detach", "--trust", project); r.code != 0 {
		t.Fatalf("up: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/cache/mine"); r.stdout != "project's\n" {
		t.Fatalf("the bind: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	// What the workspace can do to the project: cache becomes a symlink.
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "id_ed25519"), []byte("host secret\n"), 0o600)
	os.RemoveAll(filepath.Join(project, "cache"))
	if err := os.Symlink(host, filepath.Join(project, "cache")); err != nil {
		t.Fatal(err)
	}
	r := runEnv(t, root, env, "up", "--detach", project)
	if r.code == 0 || !strings.Contains(r.stderr, "is in the project but leads out of it") {
		t.Errorf("a bind source made a symlink out of the project: %+v", r)
	}
	if got := runProc(t, root, "", "exec", name, "cat", "/cache/id_ed25519"); strings.Contains(got.stdout, "host secret") {
		t.Errorf("the workspace reads the host's file: %+v", got)
	}
}

// TestDevcontainerFailedCreateStops: a create-time command that fails
// says which and its status, and leaves no container running (it used
// to warn and keep it); the layer stays and the next up runs it again.
func TestDevcontainerFailedCreateStops(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project, root := devcontainerProject(t, `{"image": "`+ref+`",
		"postCreateCommand": {"ok": "echo ok >> ok.txt", "bad": "echo bad >&2; exit 3"}}`)
	name := workspace.Name(project)
	r := runProc(t, root, "", "up", "--detach", project)
	if r.code == 0 || !strings.Contains(r.stderr, "postCreateCommand (bad: echo bad >&2; exit 3) failed with exit status 3") ||
		!strings.Contains(r.stderr, "is stopped") {
		t.Fatalf("a failing postCreateCommand: %+v", r)
	}
	if running(t, root, name) {
		t.Error("a failed create left the workspace running")
	}
	if _, err := os.Stat(filepath.Join(root, "data", "workspaces", name, "upper")); err != nil {
		t.Errorf("the layer is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "workspaces", name, "created-done")); err == nil {
		t.Error("a failed create marked as done")
	}
}

// TestDevcontainerTrust: an untrusted devcontainer.json cannot read a
// host variable into the workspace or run its initializeCommand on the
// host; cove up --trust lets that content do both, and a change to the
// file is untrusted again.
func TestDevcontainerTrust(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	canaryDir := t.TempDir()
	canary := filepath.Join(canaryDir, "initialize-ran")
	body := `{"image": "` + ref + `",
		"containerEnv": {"LEAK": "${localEnv:COVE_TEST_SECRET}", "DEF": "${localEnv:COVE_TEST_SECRET:none}"},
		"initializeCommand": "touch ` + canary + `",
		"mounts": ["source=` + canaryDir + `,target=/host-dir,type=bind"]}`
	project, root := devcontainerProject(t, body)
	name := workspace.Name(project)
	env := []string{"HOME=" + t.TempDir(), "COVE_TEST_SECRET=s3cr3t"}
	r := runEnv(t, root, env, "up", "--detach", project)
	if r.code != 0 || !strings.Contains(r.stderr, "initializeCommand (it runs on this host)") || !strings.Contains(r.stderr, "COVE_TEST_SECRET in containerEnv.LEAK") ||
		!strings.Contains(r.stderr, "cove up --trust") {
		t.Fatalf("untrusted up: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo $LEAK/$DEF"); r.stdout != "/none\n" {
		t.Errorf("untrusted: the host's variable reached the workspace: %+v", r)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Error("untrusted: initializeCommand ran on the host")
	}
	if r := runProc(t, root, "", "exec", name, "ls", "/host-dir"); r.code == 0 {
		t.Errorf("untrusted: a host path was bound in: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	r = runEnv(t, root, env, "up", "--detach", "--trust", project)
	if r.code != 0 || !strings.Contains(r.stderr, "trusting "+filepath.Join(project, ".devcontainer", "devcontainer.json")) ||
		!strings.Contains(r.stderr, "what takes effect now:\n  - initializeCommand (it runs on this host): touch "+canary+"\n  - mounts: the host path "+canaryDir) {
		t.Fatalf("up --trust: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo $LEAK/$DEF"); r.stdout != "s3cr3t/s3cr3t\n" {
		t.Errorf("trusted: %+v", r)
	}
	if _, err := os.Stat(canary); err != nil {
		t.Error("trusted: initializeCommand did not run on the host")
	}
	if r := runProc(t, root, "", "exec", name, "ls", "/host-dir"); r.stdout != "initialize-ran\n" {
		t.Errorf("trusted: the bind mount is not there: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	os.Remove(canary)
	os.WriteFile(filepath.Join(project, ".devcontainer", "devcontainer.json"), []byte(strings.Replace(body, "none", "other", 1)), 0o644)
	if r := runEnv(t, root, env, "up", "--detach", project); r.code != 0 || !strings.Contains(r.stderr, "cove up --trust") {
		t.Fatalf("changed file: %+v", r)
	}
	if _, err := os.Stat(canary); err == nil {
		t.Error("a changed file's initializeCommand ran on the host")
	}
}

// TestDevcontainerRemoteUser: the user named only in the image's
// devcontainer.metadata label (as the devcontainers images do) runs the
// lifecycle commands (the label's first, then the file's), cove exec and
// the IDE server, with its HOME; a file it makes in the project belongs
// to the project's owner on the host (updateRemoteUserUID), and -u
// still chooses another. Before, everything ran as root.
func TestDevcontainerRemoteUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	_, uid, gid := testUser(t)
	addr := testregistry.Addr(t)
	home := testimage.Dir("home/vscode", 0o755)
	home.UID, home.GID = 1234, 1234
	accounts, err := testimage.Layer(testimage.Dir("home", 0o755), home,
		testimage.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nvscode:x:1234:1234::/home/vscode:/bin/sh\n", 0o644),
		testimage.File("etc/group", "root:x:0:\nvscode:x:1234:\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), accounts)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"},
		Labels: map[string]string{"devcontainer.metadata": `[{"id": "base"}, {"remoteUser": "vscode", "containerEnv": {"FROM_LABEL": "1"},
			"postCreateCommand": "id -u > label.txt", "capAdd": ["SYS_PTRACE"], "entrypoint": "id -u > /tmp/entrypoint-user"}]`}})
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "postCreateCommand": "echo $HOME $FROM_LABEL > made.txt",
		"mounts": ["source=data,target=/data,type=volume"]}`)
	os.Chown(project, uid, gid)
	name := workspace.Name(project)
	r := runProc(t, root, "", "up", "--detach", project)
	if r.code != 0 || !strings.Contains(r.stderr, "devcontainer.metadata asks for capAdd") {
		t.Fatalf("up: %+v", r)
	}
	for file, want := range map[string]string{"label.txt": "1234\n", "made.txt": "/home/vscode 1\n"} {
		b, _ := os.ReadFile(filepath.Join(project, file))
		fi, err := os.Stat(filepath.Join(project, file))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", file, b, err, want)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s belongs to %d:%d on the host, want the project's owner %d:%d", file, st.Uid, st.Gid, uid, gid)
		}
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "id -u; echo $HOME; stat -c %u /workspace/made.txt; for p in /proc/[0-9]*; do grep -q serve $p/cmdline && grep ^Uid $p/status; done"); !strings.HasPrefix(r.stdout, "1234\n/home/vscode\n1234\nUid:\t1234") {
		t.Errorf("exec: %+v", r)
	}
	if r := runProc(t, root, "", "exec", "-u", "0", name, "id", "-u"); r.stdout != "0\n" {
		t.Errorf("exec -u 0: %+v", r)
	}
	// containerUser (unset: the image's, root) runs the entrypoint;
	// remoteUser the rest. A new volume is remoteUser's to write.
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "cat /tmp/entrypoint-user; touch /data/x && stat -c %u /data/x"); r.stdout != "0\n1234\n" {
		t.Errorf("entrypoint's user, volume: %+v", r)
	}
}

// TestDevcontainerBuild: a project whose devcontainer.json builds its
// image from a Dockerfile (it used to be refused) gets that image, with
// the build section's args and its context; a second start builds from
// the cache to the same image, and a changed context is a clear "rebuilt:
// --fresh" rather than an old layer put on a new image. The build is the
// project's: its RUN steps have the workspace's own network (the host's
// loopback services out of reach), and a Dockerfile or context that
// leads out of the project is refused without its content shown.
func TestDevcontainerBuild(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	// A service on the host's loopback, which a RUN with the host's
	// network would reach.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host-secret") }))
	project, root := devcontainerProject(t, `{"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"GREETING": "hi"}}}`)
	os.WriteFile(filepath.Join(project, ".devcontainer", "Dockerfile"), []byte("FROM "+base+"\nARG GREETING\nCOPY app.txt /app.txt\n"+
		"RUN echo \"$GREETING\" > /greeting; printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 "+strings.Replace(l.Addr().String(), ":", " ", 1)+
		" > /net; grep -q host-secret /net && echo reached > /net || echo unreachable > /net\n"), 0o644)
	os.WriteFile(filepath.Join(project, "app.txt"), []byte("v1\n"), 0o644)
	name := workspace.Name(project)
	r := runProc(t, root, "", "up", "--detach", project)
	if r.code != 0 || !strings.Contains(r.stderr, "cove: building the workspace image from "+project+"/.devcontainer/Dockerfile") {
		t.Fatalf("up: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/greeting", "/app.txt", "/net"); r.stdout != "hi\nv1\nunreachable\n" {
		t.Errorf("the built image: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	// Unchanged: every step from the cache, the same image, no complaint.
	start := time.Now()
	if r := runProc(t, root, "", "up", "--detach", project); r.code != 0 || !strings.Contains(r.stderr, "(2 of 2 layer steps cached)") {
		t.Fatalf("second up: %+v", r)
	}
	t.Logf("a warm up with a cached build: %v", time.Since(start))
	runProc(t, root, "", "stop", "--time", "2", name)
	// The context changed: the image is rebuilt, and the kept layer is
	// not put on it without a word.
	os.WriteFile(filepath.Join(project, "app.txt"), []byte("v2\n"), 0o644)
	if r := runProc(t, root, "", "up", "--detach", project); r.code == 0 || !strings.Contains(r.stderr, "made from an earlier build of its image") ||
		!strings.Contains(r.stderr, "cove up --fresh") {
		t.Fatalf("up after a change: %+v", r)
	}
	if r := runProc(t, root, "", "up", "--detach", "--fresh", project); r.code != 0 {
		t.Fatalf("up --fresh: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/app.txt"); r.stdout != "v2\n" {
		t.Errorf("after --fresh: %+v", r)
	}
	// cove rm forgets the image made for the workspace.
	if r := runProc(t, root, "", "images"); !strings.Contains(r.stdout, "cove-devcontainer/"+name+":build") {
		t.Errorf("images: %+v", r)
	}
	runProc(t, root, "", "rm", "-f", name)
	if r := runProc(t, root, "", "images"); strings.Contains(r.stdout, "cove-devcontainer/"+name) {
		t.Errorf("images after rm: %+v", r)
	}

	// Hostile: the Dockerfile a symlink to a host file, the context a
	// symlink out of the project.
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("FROM host-secret-content\n"), 0o644)
	for _, tc := range []struct{ config, link, target, want string }{
		{`{"build": {"dockerfile": "Dockerfile"}}`, "Dockerfile", secret, "the Dockerfile .devcontainer/Dockerfile"},
		{`{"build": {"dockerfile": "Dockerfile", "context": "ctx"}}`, "ctx", "/", "the context .devcontainer/ctx"},
	} {
		p, root := devcontainerProject(t, tc.config)
		os.WriteFile(filepath.Join(p, ".devcontainer", "Dockerfile"), []byte("FROM "+base+"\nCOPY . /ctx\n"), 0o644)
		os.Remove(filepath.Join(p, ".devcontainer", tc.link))
		if err := os.Symlink(tc.target, filepath.Join(p, ".devcontainer", tc.link)); err != nil {
			t.Fatal(err)
		}
		r := runProc(t, root, "", "up", "--detach", p)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "host-secret-content") {
			t.Errorf("%s -> %s: %+v", tc.link, tc.target, r)
		}
	}
}

// TestDevcontainerAttachRunning: postAttachCommand runs each time a user
// attaches, also to a workspace that runs already (a second cove up, cove
// shell); before, only the start ran it.
func TestDevcontainerAttachRunning(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "postStartCommand": "echo start >> log.txt", "postAttachCommand": "echo attach >> log.txt"}`)
	for _, args := range [][]string{{"up", "--detach", project}, {"up", "--detach", project}, {"shell", project}} {
		if r := runProc(t, root, "true\n", args...); r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(project, "log.txt")); string(b) != "start\nattach\nattach\nattach\n" {
		t.Errorf("log.txt: %q", b)
	}
}

// TestDevcontainerBuildCacheIsTheProjects: a cache mount in one project's
// devcontainer build (an untrusted Dockerfile, built confined) is that
// project's own: another project's build with the same cache id does not
// get what the first put there (a poisoned package cache), neither in its
// cache mount nor through the step cache, from a step of the same text the
// first project ran on its poisoned cache. Both are built from a context
// cove holds open, which is named alike for every project.
func TestDevcontainerBuildCacheIsTheProjects(t *testing.T) {
	t.Parallel()
	needRoot(t)
	base := busyboxRef(t)
	const (
		fill = "RUN --mount=type=cache,id=pip,target=/c echo poisoned > /c/f\n"
		use  = "RUN --mount=type=cache,id=pip,target=/c (cat /c/f 2>/dev/null || echo clean) > /saw\n"
	)
	writer, root := devcontainerProject(t, `{"build": {"dockerfile": "Dockerfile"}}`)
	// The first project fills its cache, then runs the step the second
	// project has, on it.
	for _, step := range []string{fill, use} {
		os.WriteFile(filepath.Join(writer, ".devcontainer", "Dockerfile"), []byte("FROM "+base+"\n"+step), 0o644)
		if r := runProc(t, root, "", "up", "--detach", writer); r.code != 0 {
			t.Fatalf("up the first project: %+v", r)
		}
		runProc(t, root, "", "rm", "-f", workspace.Name(writer))
	}
	reader := t.TempDir()
	os.Mkdir(filepath.Join(reader, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(reader, ".devcontainer", "devcontainer.json"), []byte(`{"build": {"dockerfile": "Dockerfile"}}`), 0o644)
	os.WriteFile(filepath.Join(reader, ".devcontainer", "Dockerfile"), []byte("FROM "+base+"\n"+use), 0o644)
	name := workspace.Name(reader)
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", name) })
	if r := runProc(t, root, "", "up", "--detach", reader); r.code != 0 {
		t.Fatalf("up the second project: %+v", r)
	}
	if r := runProc(t, root, "", "exec", name, "cat", "/saw"); r.stdout != "clean\n" {
		t.Errorf("the second project's build found in its cache mount %q, want %q (the first project's cache)", r.stdout, "clean\n")
	}
}

// TestDevcontainerTrustCoversInitializeScript: trusting a devcontainer.json
// whose initializeCommand runs a script of the project trusts that script
// as it is then: once the workspace rewrites the script, the next start
// does not run it on the host and says to trust the file again.
func TestDevcontainerTrustCoversInitializeScript(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	canaries := t.TempDir()
	trusted, planted := filepath.Join(canaries, "trusted-ran"), filepath.Join(canaries, "planted-ran")
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "initializeCommand": "sh .devcontainer/init.sh"}`)
	os.WriteFile(filepath.Join(project, ".devcontainer", "init.sh"), []byte("touch "+trusted+"\n"), 0o644)
	name := workspace.Name(project)
	env := []string{"HOME=" + t.TempDir()}
	if r := runEnv(t, root, env, "up", "--detach", "--trust", project); r.code != 0 {
		t.Fatalf("up --trust: %+v", r)
	}
	if _, err := os.Stat(trusted); err != nil {
		t.Fatal("the trusted initializeCommand did not run on the host")
	}
	// The workspace rewrites the script the host runs.
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "echo 'touch "+planted+"' > /workspace/.devcontainer/init.sh"); r.code != 0 {
		t.Fatalf("exec: %+v", r)
	}
	runProc(t, root, "", "stop", "--time", "2", name)
	r := runEnv(t, root, env, "up", "--detach", project)
	if _, err := os.Stat(planted); err == nil {
		t.Error("the script the workspace rewrote ran on the host")
	}
	if r.code != 0 || !strings.Contains(r.stderr, "initializeCommand (it runs on this host): sh .devcontainer/init.sh") || !strings.Contains(r.stderr, "cove up --trust") {
		t.Errorf("up after the script changed: %+v", r)
	}
}

// TestDevcontainerImageAccountsStayInTheImage: the project chooses the
// image, and an image's etc/passwd may be a symlink to a path that, on
// this machine, is a file of the host's: cove looks the workspace's user
// up in the image's own file (the symlink resolved inside the image, as
// in the container), never in the host's, whose fields its errors would
// show.
func TestDevcontainerImageAccountsStayInTheImage(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	host := filepath.Join(t.TempDir(), "accounts")
	os.WriteFile(host, []byte("root:x:0:0:root:/root:/bin/sh\nhostonly:x:host-secret-field:0::/home/h:/bin/sh\n"), 0o600)
	link, err := testimage.Layer(testimage.Symlink("etc/passwd", host))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), link)
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "remoteUser": "hostonly"}`)
	r := runProc(t, root, "", "up", "--detach", project)
	if strings.Contains(r.stdout+r.stderr, "host-secret-field") {
		t.Errorf("the host's file, named by the image's etc/passwd symlink, was read: %+v", r)
	}
	if r.code == 0 || !strings.Contains(r.stderr, `remoteUser/containerUser "hostonly": user "hostonly": not in the image's /etc/passwd`) {
		t.Errorf("up: %+v, want the user not found in the image", r)
	}
}
