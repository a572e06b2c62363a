package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/procstat"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/launcher"
	"github.com/cove-sh/cove/workspace"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// who runs cove in a test: root, or covetest (rootless, with its
// subordinate ranges), each with a COVE_ROOT and a project of its own.
type who struct {
	t             *testing.T
	root, project string
	env           []string // added to the environment (XDG_CONFIG_HOME…)
	u             *user.User
	uid, gid      int
}

// asEach runs f as root and, rootless, as covetest.
func asEach(t *testing.T, f func(t *testing.T, w *who)) {
	needRoot(t)
	t.Run("root", func(t *testing.T) {
		f(t, &who{t: t, root: t.TempDir(), project: t.TempDir()})
	})
	t.Run("rootless", func(t *testing.T) {
		u, uid, gid := testUser(t)
		base := rootlessBase(t, "cove-ux-")
		w := &who{t: t, root: filepath.Join(base, "root"), project: filepath.Join(base, "project"), u: u, uid: uid, gid: gid}
		for _, d := range []string{w.root, w.project} {
			os.Mkdir(d, 0o755)
			os.Chown(d, uid, gid)
		}
		f(t, w)
	})
}

// cmd is cove with args, as w.
func (w *who) cmd(args ...string) (*exec.Cmd, *strings.Builder, *strings.Builder) {
	cmd := exec.Command(coveBin, args...)
	cmd.Env = append(append(os.Environ(), "COVE_ROOT="+w.root), w.env...)
	if w.u != nil {
		asTestUser(cmd, w.u, w.uid, w.gid)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	return cmd, &out, &errb
}

// run runs cove with args as w, failing the test on a hang.
func (w *who) run(args ...string) result {
	w.t.Helper()
	cmd, out, errb := w.cmd(args...)
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		w.t.Fatalf("cove %v hung for 2 minutes; stderr: %s", args, errb)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs cove with args as w and fails the test unless it succeeds.
func (w *who) must(args ...string) result {
	w.t.Helper()
	r := w.run(args...)
	if r.code != 0 {
		w.t.Fatalf("cove %s: %+v", strings.Join(args, " "), r)
	}
	return r
}

// TestUpRemembersHowItWasMade: a workspace made with --image (and a
// limit) starts again with a plain cove up in its directory, on the same
// layer (the file written in it is there); --image with another image is
// refused naming --fresh, and that failed cove up leaves cove ps --all
// --json exactly as it was, the workspace still removable by name. Before,
// the plain cove up failed (image mismatch), and the failed one dropped
// the stopped workspace from ps --all (cove rm: no container).
func TestUpRemembersHowItWasMade(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	other, err := mutate.Config(layered(t), v1.Config{Env: []string{"OTHER=1"}, Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	ref2 := testregistry.Push(t, addr, other)
	asEach(t, func(t *testing.T, w *who) {
		name := workspace.Name(w.project)
		t.Cleanup(func() { w.run("rm", "-f", name) })
		w.must("up", "--detach", "--net", "none", "--image", ref, w.project)
		w.must("exec", name, "sh", "-c", "echo installed > /etc/tool")
		w.must("stop", "--time", "2", name)
		// No flags, from the project's directory.
		cmd, _, errb := w.cmd("up", "--detach")
		cmd.Dir = w.project
		if err := cmd.Run(); err != nil {
			t.Fatalf("a plain cove up of a workspace made with --image: %v\n%s", err, errb)
		}
		if r := w.run("exec", name, "cat", "/etc/tool"); r.stdout != "installed\n" {
			t.Fatalf("the plain cove up did not start the same workspace: %+v", r)
		}
		if r := w.run("exec", name, "sh", "-c", "echo $OTHER; ls /sys/class/net"); strings.Contains(r.stdout, "eth") || strings.HasPrefix(r.stdout, "1") {
			t.Errorf("the plain cove up did not keep --net none or the image: %+v", r)
		}
		w.must("stop", "--time", "2", name)
		before := w.must("ps", "--all", "--json").stdout
		r := w.run("up", "--detach", "--image", ref2, w.project)
		if r.code == 0 || !strings.Contains(r.stderr, "made from "+ref) || !strings.Contains(r.stderr, "cove up --fresh --image "+ref2) {
			t.Errorf("--image with another image: %+v", r)
		}
		if after := w.must("ps", "--all", "--json").stdout; after != before {
			t.Errorf("a failed cove up changed cove ps --all --json:\nbefore %s\nafter  %s", before, after)
		}
		var list []psJSON
		json.Unmarshal([]byte(before), &list)
		if len(list) != 1 || list[0].Name != name {
			t.Fatalf("ps --all --json: %s", before)
		}
		// A failure later on, once the record was dropped for the start:
		// an image that is nowhere.
		w.run("up", "--detach", "--fresh", "--image", addr+"/test/no-such-image:1", w.project)
		after := w.must("ps", "--all", "--json").stdout
		if json.Unmarshal([]byte(after), &list); len(list) != 1 || list[0].Name != name {
			t.Errorf("a failed cove up --fresh lost the workspace from cove ps --all: %s", after)
		}
		if r := w.run("rm", name); r.code != 0 {
			t.Errorf("cove rm after the failed ups: %+v", r)
		}
		if _, err := os.Stat(filepath.Join(w.root, "data", "workspaces", name)); !os.IsNotExist(err) {
			t.Errorf("the layer is left after cove rm: %v", err)
		}
	})
}

// TestDetachSaysTheNameAndDirsNameWorkspaces: cove up --detach names the
// workspace on stderr (stdout is the URL alone), and cove exec, stop and
// rm take its directory (./DIR, ., an absolute path) as well as its name.
// Before, the name was not said and a directory was "no container".
func TestDetachSaysTheNameAndDirsNameWorkspaces(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	w := &who{t: t, root: t.TempDir()}
	parent := t.TempDir()
	w.project = filepath.Join(parent, "My Project")
	os.Mkdir(w.project, 0o755)
	name := workspace.Name(w.project)
	t.Cleanup(func() { w.run("rm", "-f", name) })
	r := w.must("up", "--detach", "--net", "none", "--image", ref, w.project)
	if !strings.Contains(r.stderr, "the workspace "+name+" runs in the background") {
		t.Errorf("cove up --detach does not name the workspace on stderr: %+v", r)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "http://127.0.0.1:") {
		t.Errorf("stdout is not the URL alone: %q", r.stdout)
	}
	in := func(dir string, args ...string) result {
		t.Helper()
		cmd, out, errb := w.cmd(args...)
		cmd.Dir = dir
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{out.String(), errb.String(), code}
	}
	if r := in(w.project, "exec", ".", "sh", "-c", "echo hi > /etc/x; cat /etc/x"); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("cove exec . in the project: %+v", r)
	}
	if r := in(parent, "exec", "./My Project", "cat", "/etc/x"); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("cove exec ./DIR: %+v", r)
	}
	if r := in(parent, "exec", "./nowhere", "true"); r.code == 0 || !strings.Contains(r.stderr, "nowhere: no such directory") {
		t.Errorf("cove exec of a directory that is not there: %+v", r)
	}
	if r := in("/", "stop", "--time", "2", w.project); r.code != 0 || strings.TrimSpace(r.stdout) != name {
		t.Errorf("cove stop DIR: %+v", r)
	}
	if r := in(parent, "rm", "./My Project"); r.code != 0 || strings.TrimSpace(r.stdout) != name {
		t.Errorf("cove rm ./DIR: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(w.root, "data", "workspaces", name)); !os.IsNotExist(err) {
		t.Errorf("cove rm DIR left the layer: %v", err)
	}
}

// TestDetachKeepsNoDescriptorOfTheCaller: cove up --detach … | cat ends.
// Its stdout and its descriptors 3 to 5 (a pipe at fd 5, as a shell's
// 5>&1 or a process substitution leaves) are one pipe; once cove up has
// exited, the reader sees EOF within seconds while the workspace (its
// background server, pasta and the network helper: --net private) keeps
// running. Before, they kept the pipe open and the reader waited forever.
func TestDetachKeepsNoDescriptorOfTheCaller(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	asEach(t, func(t *testing.T, w *who) {
		name := workspace.Name(w.project)
		t.Cleanup(func() { w.run("rm", "-f", name) })
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pr.Close()
		cmd, _, errb := w.cmd("up", "--detach", "--image", ref, w.project)
		cmd.Stdout = pw
		cmd.ExtraFiles = []*os.File{pw, pw, pw}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("cove up --detach: %v\n%s", err, errb)
		}
		read := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(pr)
			read <- string(b)
		}()
		select {
		case out := <-read:
			if !strings.HasPrefix(out, "http://127.0.0.1:") {
				t.Errorf("stdout: %q", out)
			}
		case <-time.After(10 * time.Second):
			holders, _ := exec.Command("sh", "-c", "ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c pipe").Output()
			t.Fatalf("the pipe is still open 10 s after cove up --detach exited: something it started keeps the caller's descriptors (%s pipes open here)", strings.TrimSpace(string(holders)))
		}
		var list []psJSON
		r := w.must("ps", "--json")
		if json.Unmarshal([]byte(r.stdout), &list); len(list) != 1 || list[0].Name != name || list[0].Status != "running" {
			t.Errorf("the workspace does not run on: %s", r.stdout)
		}
	})
}

// TestDetachedLauncherSleeps: a workspace's launcher in the background,
// idle, does not wake (it asked every second whether its workspace still
// ran: ~5 wakes a second and some 40 system calls, for every workspace
// a user or their agents keep running), and still ends within seconds of
// a cove stop from elsewhere, its record gone.
func TestDetachedLauncherSleeps(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	asEach(t, func(t *testing.T, w *who) {
		name := workspace.Name(w.project)
		t.Cleanup(func() { w.run("rm", "-f", name) })
		w.must("up", "--detach", "--net", "none", "--image", ref, w.project)
		recPath := filepath.Join(w.root, "run", "workspaces", name, "launcher.json")
		rec, ok := launcher.Read(recPath)
		if !ok || rec.Launcher.Pid <= 0 {
			t.Fatalf("no launcher record at %s", recPath)
		}
		pid := rec.Launcher.Pid
		time.Sleep(time.Second) // its start's work done
		before, err := procstat.Wakes(pid)
		if err != nil {
			t.Fatal(err)
		}
		const idle = 4 * time.Second
		time.Sleep(idle)
		after, err := procstat.Wakes(pid)
		if err != nil {
			t.Fatalf("the launcher is gone while idle: %v", err)
		}
		if woke := after - before; woke > 4 {
			t.Errorf("an idle detached launcher woke %d times in %s, want none or a stray one", woke, idle)
		} else {
			t.Logf("an idle detached launcher woke %d times in %s", woke, idle)
		}
		stopped := time.Now()
		w.must("stop", "--time", "2", name)
		for syscall.Kill(pid, 0) == nil {
			if time.Since(stopped) > 15*time.Second {
				t.Fatalf("the launcher (pid %d) still runs 15 s after cove stop", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Logf("the launcher ended %v after cove stop began", time.Since(stopped).Round(time.Millisecond))
		if _, err := os.Stat(recPath); !os.IsNotExist(err) {
			t.Errorf("the launcher's record is left: %v", err)
		}
	})
}

// TestTrustWhileRunning: cove up --trust on a workspace that runs (its
// launcher serving it) records the trust, shows the host path as it will
// be bound (HOME/shared, not /shared) and says it takes effect at the
// next start; after a stop, the plain cove up binds it. Before, it
// printed the URL and recorded nothing.
func TestTrustWhileRunning(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	home, cfg := t.TempDir(), t.TempDir()
	w := &who{t: t, root: t.TempDir(), project: t.TempDir(), env: []string{"HOME=" + home, "XDG_CONFIG_HOME=" + cfg}}
	os.MkdirAll(filepath.Join(home, "shared"), 0o755)
	os.WriteFile(filepath.Join(home, "shared", "f"), []byte("from the host\n"), 0o644)
	os.Mkdir(filepath.Join(w.project, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(w.project, ".devcontainer", "devcontainer.json"), []byte(`{"image": "`+ref+`",
		"mounts": ["source=${localEnv:HOME}/shared,target=/mnt/shared,type=bind"]}`), 0o644)
	name := workspace.Name(w.project)
	t.Cleanup(func() { w.run("rm", "-f", name) })
	r := w.must("up", "--detach", "--net", "none", w.project)
	if !strings.Contains(r.stderr, "cove up --trust") {
		t.Errorf("the untrusted mount is not said: %+v", r)
	}
	r = w.must("up", "--detach", "--trust", w.project)
	if !strings.Contains(r.stderr, "the host path "+home+"/shared") || strings.Contains(r.stderr, "path /shared") {
		t.Errorf("--trust does not show the host path as it is bound: %s", r.stderr)
	}
	if !strings.Contains(r.stderr, "takes effect at its next start") || !strings.HasPrefix(r.stdout, "http://127.0.0.1:") {
		t.Errorf("--trust on the running workspace: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(cfg, "cove", "trusted-devcontainer.json")); err != nil || !strings.Contains(string(b), w.project) {
		t.Fatalf("--trust on the running workspace recorded nothing in XDG_CONFIG_HOME/cove: %v %s", err, b)
	}
	w.must("stop", "--time", "2", name)
	w.must("up", "--detach", w.project)
	if r := w.run("exec", name, "cat", "/mnt/shared/f"); r.stdout != "from the host\n" {
		t.Errorf("the trusted mount is not there after the next start: %+v", r)
	}
}

// settingsFile writes the user's settings.json for w in a config
// directory of its own (XDG_CONFIG_HOME), readable by w.
func (w *who) settingsFile(body string) string {
	cfg := w.root + "-cfg"
	os.MkdirAll(filepath.Join(cfg, "cove"), 0o755)
	path := filepath.Join(cfg, "cove", "settings.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if w.u != nil {
		os.Chown(cfg, w.uid, w.gid)
		os.Chown(filepath.Join(cfg, "cove"), w.uid, w.gid)
		os.Chown(path, w.uid, w.gid)
	}
	w.env = append(w.env, "XDG_CONFIG_HOME="+cfg)
	return path
}

// TestSettingsImageAndMirrors: the user's settings.json (under
// XDG_CONFIG_HOME/cove) names the default workspace image, on a registry
// that does not exist (registry.invalid), and a mirror of that registry on
// 127.0.0.1 (a real registry) that serves it: a plain cove up starts the
// workspace from that image through the mirror, cove doctor shows both,
// and without the mirror the error names the image, --image and the
// settings file. Before, there were no settings: cove up used Debian.
func TestSettingsImageAndMirrors(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	mirrored := testregistry.Push(t, addr, layered(t))
	ref := "registry.invalid/" + strings.TrimPrefix(mirrored, addr+"/")
	asEach(t, func(t *testing.T, w *who) {
		name := workspace.Name(w.project)
		t.Cleanup(func() { w.run("rm", "-f", name) })
		path := w.settingsFile(`{"image": "` + ref + `", "registryMirrors": {"registry.invalid": ["` + addr + `"]}}`)
		doc := w.run("doctor").stdout
		if !strings.Contains(doc, "settings") || !strings.Contains(doc, path+": workspace image "+ref+", registry mirrors registry.invalid → "+addr) {
			t.Errorf("cove doctor does not show the settings:\n%s", doc)
		}
		w.must("up", "--detach", "--net", "none", w.project)
		var list []psJSON
		r := w.must("ps", "--json")
		if json.Unmarshal([]byte(r.stdout), &list); len(list) != 1 || list[0].Image != ref {
			t.Errorf("cove up did not start the settings' image: %s", r.stdout)
		}
		if r := w.run("exec", name, "sh", "-c", "test -x /bin/busybox && echo ok"); r.stdout != "ok\n" {
			t.Errorf("the workspace is not the mirrored image's: %+v", r)
		}
		// cove pull asks the mirror too, by the registry's name.
		if r := w.must("pull", "--pull", "always", ref); !strings.HasPrefix(r.stdout, "sha256:") {
			t.Errorf("cove pull through the mirror: %+v", r)
		}
		// The settings change: the workspace made on the old default
		// starts on it still (as it was made), and says so.
		w.must("stop", "--time", "2", name)
		w.settingsFile(`{"image": "registry.invalid/none/nothing:1"}`)
		r = w.must("up", "--detach", "--net", "none", w.project)
		if !strings.Contains(r.stderr, "was made from "+ref+" and starts on it") {
			t.Errorf("a changed default image: %+v", r)
		}
		if r := w.run("exec", name, "sh", "-c", "test -x /bin/busybox && echo ok"); r.stdout != "ok\n" {
			t.Errorf("the workspace did not start on the image it was made from: %+v", r)
		}
		w.must("rm", "-f", name)
		// A new workspace on an unreachable default: the error says what to do.
		r = w.run("up", "--detach", "--net", "none", w.project)
		if r.code == 0 || !strings.Contains(r.stderr, "registry.invalid/none/nothing:1") || !strings.Contains(r.stderr, "--image REF") || !strings.Contains(r.stderr, path) {
			t.Errorf("an unreachable default image: %+v", r)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("the error is not one line: %q", r.stderr)
		}
	})
}

// TestRootOwnedProjectRemoteUser: cove as root on a project root owns (a
// CI box, a sudo git clone) whose devcontainer.json's user is not root:
// the user writes /workspace (its postCreateCommand's file is made), sees
// the project as its own, and what it makes is root's on the host, as the
// rest of the project is. Before, /workspace was root's inside too, the
// user could write nothing, and the postCreateCommand failed.
func TestRootOwnedProjectRemoteUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	home := testimage.Dir("home/dev", 0o755)
	home.UID, home.GID = 1234, 1234
	accounts, err := testimage.Layer(testimage.Dir("home", 0o755), home,
		testimage.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\ndev:x:1234:1234::/home/dev:/bin/sh\n", 0o644),
		testimage.File("etc/group", "root:x:0:\ndev:x:1234:\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), accounts)
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, addr, img)
	project, root := devcontainerProject(t, `{"image": "`+ref+`", "remoteUser": "dev", "postCreateCommand": "id -u > made.txt"}`)
	if fi, _ := os.Stat(project); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatal("the project is not root's")
	}
	name := workspace.Name(project)
	if r := runProc(t, root, "", "up", "--detach", "--net", "none", project); r.code != 0 {
		t.Fatalf("cove up of a root-owned project with remoteUser dev: %+v", r)
	}
	fi, err := os.Stat(filepath.Join(project, "made.txt"))
	if b, _ := os.ReadFile(filepath.Join(project, "made.txt")); err != nil || string(b) != "1234\n" {
		t.Fatalf("the postCreateCommand as dev did not write the project: %v %q", err, b)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
		t.Errorf("made.txt is %d:%d on the host, want root's as the project is", st.Uid, st.Gid)
	}
	if r := runProc(t, root, "", "exec", name, "sh", "-c", "id -u; stat -c %u /workspace; touch /workspace/x && stat -c %u /workspace/x"); r.stdout != "1234\n1234\n1234\n" {
		t.Errorf("inside, the project is not the user's: %+v", r)
	}
	// updateRemoteUserUID false: no map, and cove up says what that means.
	project2, root2 := devcontainerProject(t, `{"image": "`+ref+`", "remoteUser": "dev", "updateRemoteUserUID": false}`)
	if r := runProc(t, root2, "", "up", "--detach", "--net", "none", project2); r.code != 0 || !strings.Contains(r.stderr, "dev (uid 1234) cannot write /workspace; chown -R 1234 "+project2) {
		t.Errorf("updateRemoteUserUID false on a root-owned project: %+v", r)
	}
}
