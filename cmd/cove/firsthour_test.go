package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// TestNewcomerErrors: a mistyped command, a path that does not exist, a
// file given as a project and a mistyped flag each get one line that says
// what is wrong, last, without a screenful of help above it.
func TestNewcomerErrors(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"upp"}, "cove: unknown command upp (did you mean up?)\n"},
		{[]string{"shel"}, "cove: unknown command shel (did you mean shell?)\n"},
		{[]string{"up", "nowhere"}, "cove: nowhere: no such directory\n"},
		{[]string{"no/such/dir"}, "cove: no/such/dir: no such directory\n"},
		{[]string{"file"}, "cove: file: not a directory (cove works on a project directory)\n"},
		{[]string{"up", "--no-browsr"}, "cove: flag provided but not defined: -no-browsr (cove up --help lists them)\n"},
		{[]string{"--bogus"}, "cove: flag provided but not defined: -bogus (cove --help lists them)\n"},
	} {
		r := cove(t, t.TempDir(), tc.args...)
		if r.code != 1 || r.stderr != tc.want || r.stdout != "" {
			t.Errorf("cove %s: status %d, stdout %q, stderr %q; want %q", strings.Join(tc.args, " "), r.code, r.stdout, r.stderr, tc.want)
		}
	}
}

// TestShellReadsCommandsFromStdin: `echo cmd | cove shell DIR` runs the
// commands as sh -s does (no terminal, no escape codes, the end of input
// ends it, its status is the shell's), and a shell that started the
// workspace says it keeps running.
func TestShellReadsCommandsFromStdin(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root, project := t.TempDir(), t.TempDir()
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	r := runProc(t, root, "echo piped-$((6*7)) in $PWD\n[ -t 0 ] && echo has-a-terminal\nexit 3\n", "shell", "--image", ref, project)
	if r.code != 3 || r.stdout != "piped-42 in /workspace\n" {
		t.Errorf("echo … | cove shell: status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "keeps running (cove stop "+workspace.Name(project)) {
		t.Errorf("the shell that started the workspace did not say it keeps running: %q", r.stderr)
	}
	if r := runProc(t, root, "true\n", "shell", project); r.code != 0 || strings.Contains(r.stderr, "keeps running") {
		t.Errorf("a shell in a running workspace: %+v", r)
	}
}

// TestTwoUpsAtOnce: two cove up at once in one directory give one
// workspace and one launcher; the second waits for the first and prints
// its URL.
func TestTwoUpsAtOnce(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root, project := t.TempDir(), t.TempDir()
	type up struct {
		cmd *exec.Cmd
		url chan string
		err *bytes.Buffer
	}
	start := func() up {
		cmd, _, errb := coveProc(root, "up", "--no-browser", "--image", ref, project)
		cmd.Stdout = nil
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		url := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(stdout).ReadString('\n')
			url <- strings.TrimSpace(line)
		}()
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
		return up{cmd, url, errb}
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	a, b := start(), start()
	var urls []string
	for _, u := range []up{a, b} {
		select {
		case url := <-u.url:
			urls = append(urls, url)
		case <-time.After(60 * time.Second):
			t.Fatalf("no URL; stderr %s", u.err)
		}
	}
	if urls[0] == "" || urls[0] != urls[1] {
		t.Errorf("two cove up gave %q and %q; stderr %s / %s", urls[0], urls[1], a.err, b.err)
	}
	for _, u := range []up{a, b} {
		if strings.Contains(u.err.String(), "in use") {
			t.Errorf("stderr: %s", u.err)
		}
	}
}

// TestRootlessCgroupWarningIsOneSentence: on a host whose cgroups a user
// cannot use, every start says the same thing, what it means and where to
// read more (it named a different controller each time).
func TestRootlessCgroupWarningIsOneSentence(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if cgroup2Delegated() {
		t.Skip("this host gives users cgroups")
	}
	addr := testregistry.Addr(t)
	u, uid, gid := testUser(t)
	ref := testregistry.Push(t, addr, layered(t))
	base := rootlessBase(t, "cove-cgroup-warning-")
	os.Chown(base, uid, gid)
	var seen []string
	for range 4 {
		cmd, _, errb := coveProc(base, "run", "--rm", ref, "true")
		asTestUser(cmd, u, uid, gid)
		if err := cmd.Run(); err != nil {
			t.Fatalf("rootless run: %v %s", err, errb)
		}
		var warning string
		for _, line := range strings.Split(errb.String(), "\n") {
			if strings.Contains(line, "cgroup") {
				warning = line
			}
		}
		seen = append(seen, warning)
	}
	if !strings.Contains(seen[0], "cove doctor") || !strings.Contains(seen[0], "without limits") {
		t.Errorf("the warning: %q", seen[0])
	}
	for _, w := range seen[1:] {
		if w != seen[0] {
			t.Errorf("the warning changed between starts: %q, then %q", seen[0], w)
		}
	}
}

// TestAgentWithNoOneToApprove: cove agent -p without a terminal and
// without --yes cannot have its actions approved: it says so and exits
// non-zero, instead of 0 with nothing done.
func TestAgentWithNoOneToApprove(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	srv := llmtest.New(t)
	args, _ := json.Marshal(map[string]any{"command": "touch /workspace/made"})
	srv.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "I could not."})},
	)
	root := t.TempDir()
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", workspace.Name(project)) })
	cmd, _, errb := coveProc(root, "agent", "--image", ref, "-p", "make a file", project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test-key")
	cmd.Stdin = strings.NewReader("")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "no terminal to approve them") {
		t.Errorf("exit %v; stderr %s", err, errb)
	}
	if _, err := os.Stat(filepath.Join(project, "made")); err == nil {
		t.Error("the unapproved command ran")
	}
}

// TestHelpReadsWell: every command's help shows a default only where it
// says something, once, and keeps descriptions in a readable column.
func TestHelpReadsWell(t *testing.T) {
	t.Parallel()
	app := newApp(nil, nil)
	for _, c := range append(app.Commands, &cli.Command{Name: ""}) {
		args := []string{"--help"}
		if c.Name != "" {
			args = []string{c.Name, "--help"}
		}
		r := cove(t, t.TempDir(), args...)
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Contains(line, "(default: false)") || strings.Contains(line, "(default: 0)") || strings.Count(line, "(default:") > 1 {
				t.Errorf("cove %s: %q", strings.Join(args, " "), line)
			}
			if f, _, ok := strings.Cut(strings.TrimSpace(line), "  "); ok && strings.HasPrefix(f, "-") {
				if col := strings.Index(line, strings.TrimSpace(line[len(f)+3:])); col > 45 {
					t.Errorf("cove %s: the description starts at column %d: %q", strings.Join(args, " "), col, line)
				}
			}
		}
	}
}

// TestPullNamesTheImage: a pull says what it pulls, once, above its
// layers; an image already stored pulls silently.
func TestPullNamesTheImage(t *testing.T) {
	t.Parallel()
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	r := cove(t, root, "pull", ref)
	if r.code != 0 || !strings.HasPrefix(r.stderr, "pulling "+ref+" (3 layers)\n") || strings.Count(r.stderr, "pulling") != 1 {
		t.Errorf("pull: %+v", r)
	}
	if r := cove(t, root, "pull", ref); r.code != 0 || strings.Contains(r.stderr, "pulling") {
		t.Errorf("pull again: %+v", r)
	}
}

// TestRunAsThePeersSetUp: as podman and Docker give it, a container has
// /etc/hostname with its name, POSIX message queues at /dev/mqueue and
// open files up to the hard limit; as root and as a user.
func TestRunAsThePeersSetUp(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	script := "cat /etc/hostname; ulimit -n; grep -c ' /dev/mqueue mqueue ' /proc/mounts"
	want := fmt.Sprintf("box7\n%d\n1\n", lim.Max)
	if r := runProc(t, t.TempDir(), "", "run", "--rm", "--name", "box7", ref, "sh", "-c", script); r.code != 0 || r.stdout != want {
		t.Errorf("as root: %+v, want %q", r, want)
	}
	u, uid, gid := testUser(t)
	base := rootlessBase(t, "cove-peers-")
	os.Chown(base, uid, gid)
	cmd, out, errb := coveProc(base, "run", "--rm", "--name", "box7", ref, "sh", "-c", script)
	asTestUser(cmd, u, uid, gid)
	if err := cmd.Run(); err != nil || out.String() != want {
		t.Errorf("rootless: %v %q, want %q; stderr %s", err, out, want, errb)
	}
}

// TestRunSeesItsOwnCgroup: the memory limit is visible inside, read-only,
// at the path the host's cgroup version puts it (the JVM, Node and
// GOMEMLIMIT tools size themselves from it), and /proc/self/cgroup names
// the container's cgroup as its root, not the host's path to it.
func TestRunSeesItsOwnCgroup(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	limit := "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		limit = "/sys/fs/cgroup/memory.max"
	}
	script := "cat " + limit + "; cat /proc/self/cgroup; echo 1 > " + limit + " && echo WROTE"
	r := runProc(t, t.TempDir(), "", "run", "--rm", "--memory", "32m", ref, "sh", "-c", script)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code == 0 || len(lines) < 2 || lines[0] != "33554432" || strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("the limit inside: %+v", r)
	}
	for _, l := range lines[1:] {
		if _, p, _ := strings.Cut(l[strings.Index(l, ":")+1:], ":"); p != "/" {
			t.Errorf("/proc/self/cgroup shows a path outside the container's cgroup: %q", l)
		}
	}
}

// TestRootGetsItsGroupsFromTheImage: root (the default user, or -u root)
// gets the supplementary groups the image's /etc/group lists it in, as
// podman and Docker give them (runc reads the same file). podman 4.3.1
// cannot be run beside it here: runc fails to set its default rlimits
// without CAP_SYS_RESOURCE.
func TestRootGetsItsGroupsFromTheImage(t *testing.T) {
	t.Parallel()
	needRoot(t)
	accounts, err := testimage.Layer(
		testimage.File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n", 0o644),
		testimage.File("etc/group", "root:x:0:\nadm:x:4:root,daemon\nwheel:x:10:root\nusers:x:100:alice\nalice:x:1000:\n", 0o644))
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(layered(t), accounts)
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, testregistry.Addr(t), img)
	root := t.TempDir()
	const want = "0 4 10\n"
	for _, user := range [][]string{nil, {"-u", "root"}, {"-u", "0"}} {
		args := append(append([]string{"run", "--rm", "--net", "none"}, user...), ref, "id", "-G")
		if r := runProc(t, root, "", args...); r.code != 0 || r.stdout != want {
			t.Errorf("cove %v: %+v, want %q", user, r, want)
		}
	}
	if r := runProc(t, root, "", "run", "--rm", "--net", "none", "-u", "alice", ref, "id", "-G"); r.code != 0 || r.stdout != "1000 100\n" {
		t.Errorf("cove -u alice: %+v", r)
	}
}
