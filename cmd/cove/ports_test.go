package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// TestBrowserPortsView is the Ports view in Chromium, as root and as
// covetest rootless (ide/web/test/ports.mjs): after cove up -p
// HOST:8001, a server in the workspace on 8001 answers on
// 127.0.0.1:HOST and the view lists it as -p (and devcontainer.json's
// forwardPorts port as forwardPorts); a server started later in
// a terminal of the page shows in the view, is forwarded with a click,
// and answers on 127.0.0.1 with its page's bytes (fetched here); Stop
// ends the forward.
func TestBrowserPortsView(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	eachNetUser(t, "cove-ports-", func(t *testing.T, u netUser, project string) {
		if r := u.cove(t, "", "pull", "-q", ref); r.code != 0 {
			t.Fatalf("pull: %+v", r)
		}
		// A port the project declares: listed too, marked as its.
		declared := freeTCPPort(t)
		dc := filepath.Join(project, ".devcontainer")
		must(t, os.Mkdir(dc, 0o755))
		must(t, os.WriteFile(filepath.Join(dc, "devcontainer.json"), []byte(fmt.Sprintf(`{"forwardPorts": [%d]}`, declared)), 0o644))
		if u.rootless {
			_, uid, gid := testUser(t)
			must(t, os.Chown(dc, uid, gid))
			must(t, os.Chown(filepath.Join(dc, "devcontainer.json"), uid, gid))
		}
		hostPort := freeTCPPort(t)
		url, upLog := upAs(t, u, "--image", ref, "-p", fmt.Sprintf("%d:8001", hostPort), project)
		name := workspace.Name(project)

		// cove up -p: a server in the workspace answers on 127.0.0.1:HOST.
		if r := u.cove(t, "", "exec", name, "sh", "-c", "mkdir -p /tmp/p && echo published-ok > /tmp/p/index.html && httpd -p 8001 -h /tmp/p"); r.code != 0 {
			t.Fatalf("start a server on 8001: %+v", r)
		}
		if got := fetchEventually(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort)); got != "published-ok\n" {
			t.Fatalf("127.0.0.1:%d (cove up -p %d:8001) answered %q", hostPort, hostPort, got)
		}

		runPortsPage(t, node, url, fmt.Sprintf("8001=%d", hostPort), fmt.Sprint(declared), upLog)
	})
}

// TestUpPublishThroughTunnel: with --net none pasta publishes nothing,
// and cove up -p HOST:CTR is forwarded by the launcher through the
// workspace's server: a server in the workspace answers on
// 127.0.0.1:HOST, and the port is gone once the launcher stops.
func TestUpPublishThroughTunnel(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	u := netUser{root: t.TempDir(), home: t.TempDir()}
	project := t.TempDir()
	hostPort := freeTCPPort(t)
	upAs(t, u, "--image", ref, "--net", "none", "-p", fmt.Sprintf("%d:8002", hostPort), project)
	if r := u.cove(t, "", "exec", workspace.Name(project), "sh", "-c", "mkdir -p /tmp/p && echo tunnelled-ok > /tmp/p/index.html && httpd -p 127.0.0.1:8002 -h /tmp/p"); r.code != 0 {
		t.Fatalf("start a server on 8002: %+v", r)
	}
	if got := fetchEventually(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort)); got != "tunnelled-ok\n" {
		t.Fatalf("127.0.0.1:%d (cove up --net none -p %d:8002) answered %q", hostPort, hostPort, got)
	}
	// The forward ends with the workspace.
	if r := u.cove(t, "", "stop", workspace.Name(project)); r.code != 0 {
		t.Fatalf("cove stop: %+v", r)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", hostPort), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1:%d still answers after the workspace stopped", hostPort)
		}
	}
}

// TestUpDetachPublish: cove up --detach -p HOST:CTR publishes the port
// (pasta, the private network) and its background server keeps it: a
// server in the workspace answers on 127.0.0.1:HOST after cove up ended.
func TestUpDetachPublish(t *testing.T) {
	t.Parallel()
	needRoot(t)
	if _, err := exec.LookPath("pasta"); err != nil {
		t.Skip("no pasta (apt-get install passt)")
	}
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	u := netUser{root: t.TempDir(), home: t.TempDir()}
	project := t.TempDir()
	name := workspace.Name(project)
	hostPort := freeTCPPort(t)
	t.Cleanup(func() { u.cove(t, "", "rm", "-f", name) })
	if r := u.cove(t, "", "up", "--detach", "--image", ref, "-p", fmt.Sprintf("%d:8003", hostPort), project); r.code != 0 {
		t.Fatalf("cove up --detach -p: %+v", r)
	}
	if r := u.cove(t, "", "exec", name, "sh", "-c", "mkdir -p /tmp/p && echo detached-ok > /tmp/p/index.html && httpd -p 8003 -h /tmp/p"); r.code != 0 {
		t.Fatalf("start a server on 8003: %+v", r)
	}
	if got := fetchEventually(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort)); got != "detached-ok\n" {
		t.Fatalf("127.0.0.1:%d (cove up -d -p %d:8003) answered %q", hostPort, hostPort, got)
	}
}

// runPortsPage runs ports.mjs on the IDE at url (published: CTR=HOST of a
// -p port; declared: a forwardPorts port or "-") and fetches the port it
// forwards, checking the bytes.
func runPortsPage(t *testing.T, node, url, published, declared string, upLog fmt.Stringer) {
	t.Helper()
	const body = "served from the workspace"
	// The server's port is one free here: its forward takes the same
	// number, and after Stop no other test's forward may take it (a
	// fixed 8000 was taken by a parallel test's, so it "answered").
	cmd := exec.Command(node, "../../ide/web/test/ports.mjs", url, fmt.Sprint(freeTCPPort(t)), body, published, declared)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	out, err := cmd.StdoutPipe()
	must(t, err)
	var errb strings.Builder
	cmd.Stderr = &errb
	must(t, cmd.Start())
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if fwd, ok := strings.CutPrefix(sc.Text(), "cove-test: fetch "); ok {
			if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/$`).MatchString(fwd) {
				t.Errorf("the forward is at %s, want 127.0.0.1", fwd)
			} else if got := fetchEventually(t, fwd); got != body+"\n" {
				t.Errorf("the forwarded port %s answered %q, want %q", fwd, got, body+"\n")
			}
			io.WriteString(stdin, "fetched\n")
		}
	}
	if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
		t.Fatalf("ports.mjs: %v\n%s\n%s\nlauncher: %s", err, strings.Join(lines, "\n"), errb.String(), upLog)
	}
}

// TestBrowserPortsKube is the Ports view on a cove up --kube workspace:
// -p is forwarded by the launcher through the Pod's IDE server (a server
// in the Pod answers on 127.0.0.1:HOST), and a server started in a
// terminal in the Pod is listed, forwarded on a click and answers here.
func TestBrowserPortsKube(t *testing.T) {
	t.Parallel()
	kc, ref, k := kubeTest(t)
	node := browserTestTools(t)
	project := t.TempDir()
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	hostPort := freeTCPPort(t)
	root := t.TempDir()
	_, url := startUp(t, root, ref, project, "--kube", "--kubeconfig", kc, "--grace", "0", "-p", fmt.Sprintf("%d:8001", hostPort))
	if r := runProc(t, root, "", "exec", "--kube", "--kubeconfig", kc, name, "sh", "-c", "mkdir -p /tmp/p && echo published-ok > /tmp/p/index.html && httpd -p 8001 -h /tmp/p"); r.code != 0 {
		t.Fatalf("start a server on 8001 in the Pod: %+v", r)
	}
	if got := fetchEventually(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort)); got != "published-ok\n" {
		t.Fatalf("127.0.0.1:%d (cove up --kube -p %d:8001) answered %q", hostPort, hostPort, got)
	}
	runPortsPage(t, node, url, fmt.Sprintf("8001=%d", hostPort), "-", stringerFunc(func() string { return upErr(t) }))
}

// stringerFunc is a fmt.Stringer made of a function.
type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

// upAs starts cove up --no-browser as u with args and returns the URL it
// printed; the launcher is stopped and the workspace removed when the
// test ends.
func upAs(t *testing.T, u netUser, args ...string) (string, *strings.Builder) {
	t.Helper()
	cmd := u.command("", append([]string{"up", "--no-browser"}, args...)...)
	errb := &strings.Builder{}
	cmd.Stderr = errb
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		if _, ok := waitExit(cmd, 30*time.Second); !ok {
			cmd.Process.Kill()
		}
		u.cove(t, "", "rm", "-f", workspace.Name(args[len(args)-1]))
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}\n$`).MatchString(line) {
		t.Fatalf("first stdout line %q (%v); stderr %s", line, err, errb)
	}
	return strings.TrimSpace(line), errb
}

// freeTCPPort is a port free on 127.0.0.1 a moment ago.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// fetchEventually GETs url until it answers 200 (a server starting), for
// up to 15 s, and returns the body.
func fetchEventually(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var last error
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			return string(b)
		}
		last = fmt.Errorf("%s: %v", resp.Status, err)
	}
	t.Fatalf("%s did not answer: %v", url, last)
	return ""
}

// TestBrowserPortsCompose: in a Compose workspace, a server of another
// service (db: busybox httpd in its own container, in the workspace's
// network) is listed in the IDE's Ports view, though no process of the
// workspace's own listens on it; Forward puts it on 127.0.0.1 here, and
// it answers with the db's page. As root and rootless.
func TestBrowserPortsCompose(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	eachNetUser(t, "cove-ports-compose-", func(t *testing.T, u netUser, project string) {
		port := freeTCPPort(t)
		writeFiles(t, project, map[string]string{
			".devcontainer/devcontainer.json": `{"dockerComposeFile": "docker-compose.yml", "service": "app", "workspaceFolder": "/workspaces/proj"}`,
			".devcontainer/docker-compose.yml": fmt.Sprintf(`
services:
  app:
    image: %s
    command: ["sleep", "1007"]
    depends_on: [db]
  db:
    image: %s
    command: ["sh", "-c", "mkdir -p /www && echo db-page > /www/index.html && exec httpd -f -p %d -h /www"]
`, ref, ref, port)})
		if u.rootless {
			_, uid, gid := testUser(t)
			chownTree(t, project, uid, gid)
		}
		url, upLog := upAs(t, u, project)
		cmd := exec.Command(node, "../../ide/web/test/composeports.mjs", url, fmt.Sprint(port))
		stdin, err := cmd.StdinPipe()
		must(t, err)
		out, err := cmd.StdoutPipe()
		must(t, err)
		var errb strings.Builder
		cmd.Stderr = &errb
		must(t, cmd.Start())
		var lines []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if fwd, ok := strings.CutPrefix(sc.Text(), "cove-test: fetch "); ok {
				if got := fetchEventually(t, fwd); got != "db-page\n" {
					t.Errorf("the forwarded db port %s answered %q", fwd, got)
				}
				io.WriteString(stdin, "fetched\n")
			}
		}
		if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
			t.Fatalf("composeports.mjs: %v: %s\n%s\nlauncher: %s", err, errb.String(), strings.Join(lines, "\n"), upLog)
		}
	})
}
