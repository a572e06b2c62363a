package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace/filesync"
)

// testCluster connects to the cluster scripts/kube/cluster.sh started
// (COVE_TEST_KUBECONFIG); in CI its absence is a failure.
func testCluster(t *testing.T) *Cluster {
	t.Helper()
	kc := os.Getenv("COVE_TEST_KUBECONFIG")
	if kc == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("COVE_TEST_KUBECONFIG is not set: scripts/test.sh starts the test cluster (scripts/kube/cluster.sh up)")
		}
		t.Skip("COVE_TEST_KUBECONFIG is not set: eval $(scripts/kube/cluster.sh up) and export COVE_TEST_KUBECONFIG=$KUBECONFIG")
	}
	k, err := Connect(Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func busybox(t *testing.T) string {
	t.Helper()
	img, err := testimage.Busybox()
	if err != nil {
		t.Skip(err)
	}
	return testregistry.Push(t, testregistry.Addr(t), img)
}

// run execs argv in p and returns its output and status.
func run(t *testing.T, p *Pod, argv ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code, err := p.Exec(ctx, argv, ExecOptions{Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatalf("exec %v: %v", argv, err)
	}
	return out.String(), errb.String(), code
}

// TestWorkspacePod runs a workspace Pod on the test cluster: it is locked
// down, its limits are the Pod's and show inside, exec carries streams,
// a terminal and exit statuses, cove brings itself in, port-forward
// reaches a server on the Pod's loopback, the volume outlives a stop, and
// rm leaves nothing of it in the cluster.
func TestWorkspacePod(t *testing.T) {
	k := testCluster(t)
	ref := busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := fmt.Sprintf("t%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	spec := Spec{Name: name, Image: ref, Env: []string{"COVE_TEST=yes"}, Limits: container.Limits{Memory: 64 << 20, CPUs: 0.5}, Volume: 1 << 20}
	start := time.Now()
	p, err := k.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Pod running in %v", time.Since(start).Round(time.Millisecond))
	if !p.Created {
		t.Error("a first Ensure says it found the Pod")
	}

	// Locked down, as the API server has it.
	got, err := k.pods().Get(ctx, p.Name)
	if err != nil {
		t.Fatal(err)
	}
	ps, c := got.Spec, got.Spec.Containers[0]
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || ps.HostNetwork || ps.HostPID || ps.HostIPC ||
		c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged ||
		c.SecurityContext.SeccompProfile == nil || c.SecurityContext.SeccompProfile.Type != "RuntimeDefault" ||
		!slices.Equal(c.SecurityContext.Capabilities.Drop, []string{"ALL"}) || slices.Contains(c.SecurityContext.Capabilities.Add, "NET_RAW") {
		t.Errorf("the Pod is not locked down: %+v / %+v", ps.SecurityContext, c.SecurityContext)
	}
	if out, _, code := run(t, p, "sh", "-c", "ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1; grep CapBnd /proc/self/status; hostname; echo $COVE_TEST"); code != 0 ||
		!strings.Contains(out, "No such file") || !strings.Contains(out, "CapBnd:\t00000000a00405fb") || !strings.Contains(out, name+"\nyes\n") {
		// a00405fb is CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID
		// SETPCAP NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP:
		// Docker's default set less MKNOD and NET_RAW.
		t.Errorf("inside the Pod: code %d, %q", code, out)
	}

	// The limits are the Pod's, and visible inside.
	out, _, _ := run(t, p, "sh", "-c", "cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null")
	if strings.TrimSpace(out) != "67108864" {
		t.Errorf("the memory limit inside is %q, want 67108864", out)
	}
	// As the API server keeps them (what cove sent, which it parsed).
	if r := c.Resources.Limits; r["memory"] != "67108864" || r["cpu"] != "500m" {
		t.Errorf("the Pod's limits: %v", r)
	}

	// A command its caller stops waiting for: the error says how far
	// the stream went.
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var out bytes.Buffer
		_, err := p.Exec(ctx, []string{"sh", "-c", "echo hi; sleep 30"}, ExecOptions{Stdout: &out})
		if err == nil || !strings.Contains(err.Error(), "context deadline exceeded (no input, 3 bytes of output received, no status)") {
			t.Errorf("an exec given up: %v (output %q)", err, out.String())
		}
	}()

	// Exec: streams apart, the exit status, stdin, a terminal with its size.
	if out, errs, code := run(t, p, "sh", "-c", "echo out; echo err >&2; exit 3"); out != "out\n" || errs != "err\n" || code != 3 {
		t.Errorf("exec: %q %q %d", out, errs, code)
	}
	var echoed bytes.Buffer
	if code, err := p.Exec(ctx, []string{"cat"}, ExecOptions{Stdin: strings.NewReader("from stdin"), Stdout: &echoed}); err != nil || code != 0 || echoed.String() != "from stdin" {
		t.Errorf("exec with stdin: %d %v %q", code, err, echoed.String())
	}
	sizes := make(chan TermSize, 1)
	sizes <- TermSize{Width: 101, Height: 37}
	var tty bytes.Buffer
	code, err := p.Exec(ctx, []string{"sh", "-c", "sleep 0.5; stty size; tty"}, ExecOptions{Stdout: &tty, TTY: true, Resize: sizes})
	if err != nil || code != 0 || !strings.Contains(tty.String(), "37 101") || !strings.Contains(tty.String(), "/dev/pts/") {
		t.Errorf("exec with a terminal: %d %v %q", code, err, tty.String())
	}
	close(sizes)
	if _, errs, code := run(t, p, "no-such-command"); code != 127 || !strings.Contains(errs, "no-such-command: executable file not found") {
		t.Errorf("a missing command exits %d: %q", code, errs)
	}
	if _, _, code := run(t, p, "/etc/passwd"); code != 126 {
		t.Errorf("a file that is not executable exits %d", code)
	}

	// cove brings itself in.
	bin := filepath.Join(t.TempDir(), "cove")
	if out, err := buildInside(bin); err != nil {
		t.Fatalf("go build cove-inside: %v\n%s", err, out)
	}
	start = time.Now()
	if err := p.Bring(ctx, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("cove brought in %v", time.Since(start).Round(time.Millisecond))
	if out, _, code := run(t, p, CovePath, "version"); code != 0 || !strings.Contains(out, "cove") {
		t.Errorf("cove version in the Pod: %d %q", code, out)
	}

	// The project's files, both ways, through cove's sync server in the Pod.
	laptop := t.TempDir()
	os.WriteFile(filepath.Join(laptop, "fix.c"), []byte("int fixed;\n"), 0o644)
	local, err := filesync.OpenDir(laptop, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	remote := p.Files(ctx)
	syncer := &filesync.Syncer{Local: local, Remote: remote}
	start = time.Now()
	if _, err := syncer.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync round %v", time.Since(start).Round(time.Millisecond))
	if out, _, _ := run(t, p, "cat", WorkspaceDir+"/fix.c"); out != "int fixed;\n" {
		t.Errorf("a local file in the Pod: %q", out)
	}
	run(t, p, "sh", "-c", "echo made in the pod > "+WorkspaceDir+"/made.txt; chmod 755 "+WorkspaceDir+"/made.txt")
	start = time.Now()
	if rep, err := syncer.Sync(ctx); err != nil || len(rep.ToLocal) != 1 {
		t.Errorf("a round after a change in the Pod: %+v %v", rep, err)
	}
	t.Logf("a round with one change %v", time.Since(start).Round(time.Millisecond))
	if b, _ := os.ReadFile(filepath.Join(laptop, "made.txt")); string(b) != "made in the pod\n" {
		t.Errorf("a file made in the Pod, here: %q", b)
	}
	if fi, err := os.Stat(filepath.Join(laptop, "made.txt")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("its mode: %v", err)
	}
	os.WriteFile(filepath.Join(laptop, "fix.c"), []byte("int mine;\n"), 0o644)
	run(t, p, "sh", "-c", "echo 'int theirs;' > "+WorkspaceDir+"/fix.c")
	rep, err := syncer.Sync(ctx)
	if err != nil || len(rep.Conflicts) != 1 {
		t.Fatalf("a conflict: %+v %v", rep, err)
	}
	if out, _, _ := run(t, p, "cat", WorkspaceDir+"/fix.c", WorkspaceDir+"/"+rep.Conflicts[0].Kept); out != "int mine;\nint theirs;\n" {
		t.Errorf("after a conflict, the Pod has %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(laptop, rep.Conflicts[0].Kept)); string(b) != "int theirs;\n" {
		t.Errorf("after a conflict, the laptop keeps %q", b)
	}
	remote.Close()

	// Port-forward to the Pod's loopback, with no port opened here.
	if _, errs, code := run(t, p, "sh", "-c", "mkdir -p /tmp/www && echo forwarded > /tmp/www/index.html && httpd -p 127.0.0.1:8080 -h /tmp/www"); code != 0 {
		t.Fatalf("httpd: %d %s", code, errs)
	}
	fw := p.Forward(8080)
	client := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return fw.Dial() }}, Timeout: 30 * time.Second}
	for i := range 3 { // one upgraded connection, a stream for each
		resp, err := client.Get("http://workspace/index.html")
		if err != nil {
			t.Fatalf("GET %d through port-forward: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "forwarded\n" {
			t.Fatalf("through port-forward: %q", body)
		}
		client.CloseIdleConnections()
	}
	closed := p.Forward(8081)
	if conn, err := closed.Dial(); err == nil {
		conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		if _, err := io.ReadAll(conn); err == nil || !strings.Contains(err.Error(), "8081") {
			t.Errorf("a port nothing listens on: %v", err)
		}
		conn.Close()
	}

	// cove's IDE server in the Pod, reached the same way.
	if _, errs, code := run(t, p, "sh", "-c", "echo hello > "+WorkspaceDir+"/main.c; "+
		"setsid "+CovePath+" ide serve --tcp 127.0.0.1:7777 --dir "+WorkspaceDir+" </dev/null >/tmp/ide.log 2>&1 &"); code != 0 {
		t.Fatalf("start the IDE server: %d %s", code, errs)
	}
	ideFw := p.Forward(7777)
	ideClient := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return ideFw.Dial() }}, Timeout: 30 * time.Second}
	var tree string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := ideClient.Get("http://workspace/api/tree")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if tree = string(b); resp.StatusCode == 200 {
			break
		}
	}
	if !strings.Contains(tree, "main.c") {
		log, _, _ := run(t, p, "cat", "/tmp/ide.log")
		t.Errorf("the IDE server in the Pod lists %q; its log: %s", tree, log)
	}

	// Stop keeps the volume; the next start finds what was left on it.
	run(t, p, "sh", "-c", "echo kept > "+WorkspaceDir+"/kept")
	if err := k.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	if ws, err := k.List(ctx); err != nil || !slices.Contains(ws, Workspace{Name: name, Phase: "stopped"}) {
		t.Errorf("after stop, List says %+v %v", ws, err)
	}
	p, err = k.Ensure(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := run(t, p, "cat", WorkspaceDir+"/kept"); out != "kept\n" || !p.Created {
		t.Errorf("after a restart: %q (created %v)", out, p.Created)
	}

	// rm leaves nothing of the workspace in the cluster.
	if err := k.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	sel := LabelWorkspace + "=" + name
	pods, err1 := k.pods().List(ctx, sel)
	pvcs, err2 := k.claims().List(ctx, sel)
	if len(pods)+len(pvcs) != 0 || err1 != nil || err2 != nil {
		t.Errorf("after rm: %d Pods, %d claims (%v, %v)", len(pods), len(pvcs), err1, err2)
	}
}

// TestEnsureRefusesAnotherPod: a Pod of the workspace's name that cove did
// not make is not taken over.
func TestEnsureRefusesAnotherPod(t *testing.T) {
	k := testCluster(t)
	ref := busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("o%d", time.Now().UnixNano()%1e9)
	other := pod(Spec{Name: name, Image: ref}, k.Namespace)
	other.Metadata.Labels = map[string]string{"app": "someone-else"}
	if _, err := k.pods().Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.pods().Delete(context.Background(), other.Metadata.Name)
		k.claims().Delete(context.Background(), other.Metadata.Name)
	})
	if _, err := k.Ensure(ctx, Spec{Name: name, Image: ref}); err == nil || !strings.Contains(err.Error(), "not this workspace's") {
		t.Fatalf("Ensure over another's Pod: %v", err)
	}
}

// TestEnsureSaysWhyAPodCannotStart: an image that cannot be pulled is an
// error naming the image, not a wait until the timeout.
func TestEnsureSaysWhyAPodCannotStart(t *testing.T) {
	k := testCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("b%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	_, err := k.Ensure(ctx, Spec{Name: name, Image: testregistry.Addr(t) + "/no/such-image:1", Volume: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "no/such-image") {
		t.Fatalf("Ensure with a missing image: %v", err)
	}
}
