package kube

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/kubeclient"
	"github.com/cove-sh/cove/internal/netcut"
	"github.com/cove-sh/cove/workspace/filesync"
)

// testNamespace is where these tests run their Pods: apart from the other
// packages' tests, which share the cluster (and run meanwhile).
const testNamespace = "cove-reconnect-test"

// reconnectCluster connects to the test cluster twice in testNamespace:
// through a netcut relay (the launcher's view) and directly (the test's own
// view, to act in the Pod while the launcher's connection is cut).
func reconnectCluster(t *testing.T) (through, direct *Cluster, cut *netcut.Relay) {
	t.Helper()
	direct = testCluster(t)
	kc := os.Getenv("COVE_TEST_KUBECONFIG")
	cut = netcut.New(t, strings.TrimPrefix(direct.Server(), "https://"))
	proxied := cut.Kubeconfig(t, kc)
	var err error
	ctx := context.Background()
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]string{"name": testNamespace}}
	if err := direct.api.Do(ctx, http.MethodPost, "/api/v1/namespaces", nil, ns, nil); err != nil && !kubeclient.IsAlreadyExists(err) {
		t.Fatalf("the test namespace: %v", err)
	}
	if direct, err = Connect(Config{Kubeconfig: kc, Namespace: testNamespace}); err != nil {
		t.Fatal(err)
	}
	if through, err = Connect(Config{Kubeconfig: proxied, Namespace: testNamespace}); err != nil {
		t.Fatal(err)
	}
	return through, direct, cut
}

// buildInside builds what cove brings into a Pod: cove-inside, static.
func buildInside(bin string) ([]byte, error) {
	build := exec.Command("go", "build", "-o", bin, "../../cmd/cove-inside")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	return build.CombinedOutput()
}

// buildCove builds what cove brings into a Pod.
func buildCove(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cove")
	if out, err := buildInside(bin); err != nil {
		t.Fatalf("go build cove-inside: %v\n%s", err, out)
	}
	return bin
}

// links records what a Session's Link hears, and when.
type links struct {
	mu     sync.Mutex
	events []string
	back   chan time.Time
}

func (l *links) link(err error, away time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.events = append(l.events, "lost")
		return
	}
	l.events = append(l.events, "back")
	select {
	case l.back <- time.Now():
	default:
	}
}

func (l *links) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

// terminal is a shell in the Pod's IDE server, through DialIDE.
type terminal struct {
	ws  *websocket.Conn
	id  string
	out bytes.Buffer
}

func ideClient(se *Session) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return se.DialIDE(ctx) }}}
}

// openTerminal starts a shell ("new") or reattaches to one from the
// start of its output.
func openTerminal(ctx context.Context, se *Session, id string) (*terminal, error) {
	u := "ws://workspace/api/term/new"
	if id != "" {
		u = "ws://workspace/api/term/" + id + "?offset=0"
	}
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: ideClient(se)})
	if err != nil {
		return nil, err
	}
	return &terminal{ws: ws, id: id}, nil
}

// until reads the terminal's output until it holds want.
func (tm *terminal) until(ctx context.Context, want string) error {
	for !strings.Contains(tm.out.String(), want) {
		_, msg, err := tm.ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("%w; the output so far: %q", err, tm.out.String())
		}
		switch msg[0] {
		case 0x12: // hello
			var h struct{ ID string }
			json.Unmarshal(msg[1:], &h)
			tm.id = h.ID
		case 0x10: // output: its offset, then bytes
			if len(msg) >= 9 && int(binary.BigEndian.Uint64(msg[1:9])) <= tm.out.Len() {
				tm.out.Write(msg[9+tm.out.Len()-int(binary.BigEndian.Uint64(msg[1:9])):])
			}
		}
	}
	return nil
}

// killSyncServer kills cove sync-serve in the Pod (by /proc: the image's
// sh has no pkill), as a crash or an OOM kill would.
func killSyncServer(t *testing.T, p *Pod) {
	t.Helper()
	// [v] keeps this script's own command line from matching.
	out, _, code := run(t, p, "sh", "-c", `n=0; for d in /proc/[0-9]*; do case "$(tr '\0' ' ' <$d/cmdline 2>/dev/null)" in *sync-ser[v]e*) kill -9 ${d#/proc/} && n=$((n+1));; esac; done; echo $n`)
	if code != 0 || strings.TrimSpace(out) == "0" {
		t.Fatalf("no sync server to kill in the Pod: %d %q", code, out)
	}
}

// eventually waits up to 15 s for cond, and says how long it took.
func eventually(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// relayedSession is a workspace Session started, for the tests of lost
// connections, through a netcut relay: the launcher's view, which the
// test cuts or drops, while pod is reached directly.
type relayedSession struct {
	se     *Session
	pod    *Pod
	cut    *netcut.Relay
	links  *links
	laptop string // the project here, with main.c in it

	mu      sync.Mutex
	reports []string // the rounds that failed or kept a conflict
}

// startRelayed starts a Session named prefix and a number on a busybox
// Pod, through a relay, and waits for its first round.
func startRelayed(ctx context.Context, t *testing.T, prefix string) *relayedSession {
	t.Helper()
	through, direct, cut := reconnectCluster(t)
	ref := busybox(t)
	bin := buildCove(t)
	name := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%1e9)
	t.Cleanup(func() { direct.Remove(context.Background(), name) })
	rs := &relayedSession{cut: cut, links: &links{back: make(chan time.Time, 1)}, laptop: t.TempDir()}
	os.WriteFile(filepath.Join(rs.laptop, "main.c"), []byte("int main;\n"), 0o644)
	se, err := through.Start(ctx, Spec{Name: name, Image: ref, Volume: 1 << 20}, SessionOptions{Dir: rs.laptop, Binary: bin,
		Link: rs.links.link,
		Report: func(r filesync.Report, err error) {
			rs.mu.Lock()
			defer rs.mu.Unlock()
			if err != nil || len(r.Conflicts) > 0 {
				rs.reports = append(rs.reports, fmt.Sprintf("%+v %v", r, err))
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { se.Close() })
	rs.se = se
	if rs.pod, err = direct.Pod(ctx, name); err != nil {
		t.Fatal(err)
	}
	return rs
}

// said is what the rounds said that they should not have.
func (rs *relayedSession) said() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.reports)
}

// TestSessionReconnects: empty directories are carried both ways, and
// the sync's stream to the Pod is opened again when
// it breaks, first by its server killed, then by the connection to the
// API server cut for a while (an API server restart, a laptop that
// slept): each time files saved on either side meanwhile and after reach
// the other within seconds, nothing is lost nor kept as a conflict, the
// break and the return are said once each, the IDE's server answers
// again through port-forward, and a terminal's output from before the
// cut is still there.
//
// With COVE_TEST_KUBE_RESTART_APISERVER=1 the second break is a real
// restart of the test cluster's kube-apiserver (not in CI: the other
// packages' tests use it meanwhile).
func TestSessionReconnects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs := startRelayed(ctx, t, "r")
	se, pod, laptop, l, cut := rs.se, rs.pod, rs.laptop, rs.links, rs.cut
	inPod := func(name string) string {
		out, _, _ := run(t, pod, "sh", "-c", "cat "+WorkspaceDir+"/"+name+" 2>/dev/null")
		return out
	}
	here := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(laptop, name))
		return string(b)
	}
	if inPod("main.c") != "int main;\n" {
		t.Fatal("the first round did not bring main.c to the Pod")
	}
	// Empty directories, both ways, with their modes, and their removal.
	isDirInPod := func(name string) string {
		out, _, _ := run(t, pod, "sh", "-c", "stat -c %F-%a "+WorkspaceDir+"/"+name+" 2>/dev/null")
		return strings.TrimSpace(out)
	}
	isDirHere := func(name string) string {
		fi, err := os.Lstat(filepath.Join(laptop, name))
		if err != nil || !fi.IsDir() {
			return ""
		}
		return fmt.Sprintf("directory-%o", fi.Mode().Perm())
	}
	os.MkdirAll(filepath.Join(laptop, "empty/nested"), 0o755)
	eventually(t, "an empty directory made here, in the Pod", func() bool { return isDirInPod("empty/nested") == "directory-755" })
	run(t, pod, "sh", "-c", "mkdir -m 750 "+WorkspaceDir+"/made-in-pod")
	eventually(t, "an empty directory made in the Pod, here", func() bool { return isDirHere("made-in-pod") == "directory-750" })
	os.Remove(filepath.Join(laptop, "empty/nested"))
	run(t, pod, "rmdir", WorkspaceDir+"/made-in-pod")
	eventually(t, "empty directories removed on either side, on the other", func() bool {
		return isDirInPod("empty/nested") == "" && isDirHere("made-in-pod") == "" && isDirInPod("empty") == "directory-755"
	})

	term, err := openTerminal(ctx, se, "")
	if err != nil {
		t.Fatal(err)
	}
	term.ws.Write(ctx, websocket.MessageBinary, append([]byte{0}, "echo before-$((6*7))\n"...))
	if err := term.until(ctx, "before-42"); err != nil {
		t.Fatal(err)
	}
	term.ws.CloseNow()

	// 1. The sync server is killed in the Pod.
	killSyncServer(t, pod)
	broke := time.Now()
	os.WriteFile(filepath.Join(laptop, "main.c"), []byte("int main(void);\n"), 0o644)
	took := eventually(t, "a local save after the sync server was killed, in the Pod", func() bool { return inPod("main.c") == "int main(void);\n" })
	t.Logf("sync server killed: a local save was in the Pod %v later", took.Round(time.Millisecond))
	run(t, pod, "sh", "-c", "echo from the pod > "+WorkspaceDir+"/pod.txt")
	eventually(t, "a file made in the Pod after the sync server was killed, here", func() bool { return here("pod.txt") == "from the pod\n" })
	select {
	case at := <-l.back:
		t.Logf("sync server killed: the sync answered again %v after the kill", at.Sub(broke).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
	}
	if e := l.take(); strings.Join(e, ",") != "lost,back" {
		t.Errorf("said %q for a killed sync server, want lost then back", e)
	}

	// 2. The connection to the API server is cut for a while (or the API
	// server restarted), with saves on both sides meanwhile.
	restart := os.Getenv("COVE_TEST_KUBE_RESTART_APISERVER") == "1"
	var back time.Time
	broke = time.Now()
	if restart {
		started := restartAPIServer(t)
		defer func() {
			t.Logf("the sync answered again %v after the new API server started", back.Sub(started).Round(time.Millisecond))
		}()
	} else {
		cut.Cut(true)
	}
	os.WriteFile(filepath.Join(laptop, "during.txt"), []byte("saved here while cut\n"), 0o644)
	if !restart {
		run(t, pod, "sh", "-c", "echo saved there while cut > "+WorkspaceDir+"/there.txt")
		// A few rounds fail meanwhile; a command the agent runs now waits
		// for the return, and finds the save there.
		go func() { time.Sleep(3 * time.Second); cut.Up() }()
		start := time.Now()
		if err := se.Flush(ctx); err != nil {
			t.Fatalf("a flush while the connection is cut: %v", err)
		}
		if inPod("during.txt") != "saved here while cut\n" {
			t.Error("a flush across the cut returned before the save was in the Pod")
		}
		t.Logf("a flush made while cut returned %v later", time.Since(start).Round(time.Millisecond))
	}
	select {
	case back = <-l.back:
	case <-time.After(90 * time.Second):
		t.Fatalf("the sync did not come back; said %q", l.take())
	}
	t.Logf("API server connection broken: the sync answered again %v after the break", back.Sub(broke).Round(time.Millisecond))
	if !restart {
		eventually(t, "a file made in the Pod while cut, here", func() bool { return here("there.txt") == "saved there while cut\n" })
	}
	eventually(t, "a local save made while cut, in the Pod", func() bool { return inPod("during.txt") == "saved here while cut\n" })
	os.WriteFile(filepath.Join(laptop, "after.txt"), []byte("after\n"), 0o644)
	saved := time.Now()
	eventually(t, "a local save after the return, in the Pod", func() bool { return inPod("after.txt") == "after\n" })
	t.Logf("after the return, a local save was in the Pod %v later", time.Since(saved).Round(time.Millisecond))
	if e := l.take(); strings.Join(e, ",") != "lost,back" {
		t.Errorf("said %q for a cut connection, want lost then back once each", e)
	}

	// The servers of the broken streams are gone from the Pod: a day of
	// breaks does not pile them up.
	servers := func() string {
		out, _, _ := run(t, pod, "sh", "-c", `n=0; for d in /proc/[0-9]*; do case "$(tr '\0' ' ' <$d/cmdline 2>/dev/null)" in *sync-ser[v]e*) n=$((n+1));; esac; done; echo $n`)
		return strings.TrimSpace(out)
	}
	eventually(t, "one sync server in the Pod", func() bool { return servers() == "1" })

	// The IDE's server answers again through port-forward, and the
	// terminal's output from before the cut is replayed.
	re, err := openTerminal(ctx, se, term.id)
	if err != nil {
		t.Fatalf("reattach the terminal after the cut: %v", err)
	}
	defer re.ws.CloseNow()
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if err := re.until(rctx, "before-42"); err != nil {
		t.Errorf("the terminal's output from before the cut: %v", err)
	}

	// Nothing lost, nothing kept as a conflict, nothing else said.
	out, _, _ := run(t, pod, "sh", "-c", "cd "+WorkspaceDir+" && ls -A")
	entries, _ := os.ReadDir(laptop)
	var local []string
	for _, e := range entries {
		local = append(local, e.Name())
	}
	if strings.Contains(out, "conflict") || strings.Contains(strings.Join(local, " "), "conflict") {
		t.Errorf("a conflict copy was made: Pod %q, here %q", out, local)
	}
	if inPod("main.c") != "int main(void);\n" || here("main.c") != "int main(void);\n" || here("pod.txt") != "from the pod\n" {
		t.Error("a change was lost")
	}
	if said := rs.said(); len(said) > 0 {
		t.Errorf("the rounds said %q", said)
	}
	if err := se.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// restartAPIServer restarts the test cluster's kube-apiserver as
// scripts/kube/cluster.sh starts it (same command line, its own session,
// its log), and returns when the new one started.
func restartAPIServer(t *testing.T) time.Time {
	t.Helper()
	state := filepath.Dir(os.Getenv("COVE_TEST_KUBECONFIG"))
	pidFile := filepath.Join(state, "pid", "kube-apiserver")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(pid, syscall.SIGTERM)
	stopping := time.Now()
	for syscall.Kill(pid, 0) == nil {
		if time.Since(stopping) > 30*time.Second {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	logf, err := os.OpenFile(filepath.Join(state, "log", "kube-apiserver.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pidFile, []byte(fmt.Sprintln(cmd.Process.Pid)), 0o644)
	t.Logf("kube-apiserver stopped in %v, started again (pid %d)", time.Since(stopping).Round(time.Millisecond), cmd.Process.Pid)
	cmd.Process.Release()
	return time.Now()
}

// TestExecGivesUpOnASilentConnection: a command's exec stream whose
// connection to the API server goes silent (every packet dropped, no
// reset: a laptop on another network) ends with an error that says so
// within half a minute, rather than holding the caller until the command
// ends or forever.
func TestExecGivesUpOnASilentConnection(t *testing.T) {
	through, direct, cut := reconnectCluster(t)
	ref := busybox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := fmt.Sprintf("s%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { direct.Remove(context.Background(), name) })
	if _, err := direct.Ensure(ctx, Spec{Name: name, Image: ref, Volume: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p, err := through.Pod(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ended := make(chan error, 1)
	go func() {
		_, err := p.Exec(ctx, []string{"sh", "-c", "echo started; sleep 150"}, ExecOptions{Stdout: &out})
		ended <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "started"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	cut.Drop()
	dropped := time.Now()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "went silent") {
			t.Errorf("the exec ended with %v, want it to say the connection went silent", err)
		}
		t.Logf("given up %v after the drop", time.Since(dropped).Round(100*time.Millisecond))
	case <-time.After(40 * time.Second):
		t.Fatal("the exec still waits 40 s after its connection went silent")
	}
}
