package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/ide"
)

// dropBound is how soon after a silent drop the files and the IDE must
// be back: 8 s of silence (filesync's StallTimeout, the IDE's four missed
// pings), a new stream, a round or a reconnect.
const dropBound = 13 * time.Second

// launcherProxy is the launcher's proxy to the Pod's IDE server, as cove
// up serves it, on a loopback port.
type launcherProxy struct {
	p    *ide.Proxy
	base string // http://127.0.0.1:PORT
}

func serveProxy(t *testing.T, se *Session) *launcherProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	p := ide.NewProxyDial(se.DialIDE, port)
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &launcherProxy{p: p, base: "http://127.0.0.1:" + strconv.Itoa(port)}
}

// header is what the page sends: its token, its origin.
func (lp *launcherProxy) header() http.Header {
	return http.Header{"X-Cove-Token": {lp.p.Token}, "Origin": {lp.base}}
}

// terminal opens a shell through the proxy ("new") or reattaches to one
// from the start of its output, as the page does.
func (lp *launcherProxy) terminal(ctx context.Context, id string) (*terminal, error) {
	u := "ws" + strings.TrimPrefix(lp.base, "http") + "/api/term/new"
	if id != "" {
		u = "ws" + strings.TrimPrefix(lp.base, "http") + "/api/term/" + id + "?offset=0"
	}
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: lp.header()})
	if err != nil {
		return nil, err
	}
	return &terminal{ws: ws, id: id}, nil
}

// file asks the Pod's IDE server for a file's content through the proxy.
func (lp *launcherProxy) file(ctx context.Context, c *http.Client, name string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lp.base+"/api/file?path="+name, nil)
	req.Header = lp.header()
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, b)
	}
	return string(b), nil
}

// TestSessionSurvivesADrop: the network between the launcher and the API
// server drops every connection open at one moment with no reset (a
// laptop on another Wi-Fi, a NAT entry lost, a VPN down and up): they go
// silent for good, while new ones work. Within about 10 s, not client-go's
// minute: a file saved here is in the Pod and one made in the Pod is
// here; the loss and the return are said once each; nothing is lost nor
// kept as a conflict; the page's terminal, through the launcher's proxy,
// is closed by the proxy and reattaches with its output from before; and
// the proxy's next request, over a new port-forward, answers.
func TestSessionSurvivesADrop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rs := startRelayed(ctx, t, "d")
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

	// The page: a terminal through the launcher's proxy, and a request
	// that leaves a forwarded connection idle in the proxy's pool.
	lp := serveProxy(t, se)
	page := &http.Client{}
	if got, err := lp.file(ctx, page, "main.c"); err != nil || got != "int main;\n" {
		t.Fatalf("main.c through the proxy: %q %v", got, err)
	}
	term, err := lp.terminal(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer term.ws.CloseNow()
	term.ws.Write(ctx, websocket.MessageBinary, append([]byte{0}, "echo before-$((6*7))\n"...))
	if err := term.until(ctx, "before-42"); err != nil {
		t.Fatal(err)
	}
	// The page reads on, as xterm does, and hears when the proxy closes
	// the terminal's socket.
	closed := make(chan time.Time, 1)
	go func() {
		for {
			if _, _, err := term.ws.Read(ctx); err != nil {
				closed <- time.Now()
				return
			}
		}
	}()

	// The drop, with saves on both sides right after it.
	cut.Drop()
	dropped := time.Now()
	os.WriteFile(filepath.Join(laptop, "main.c"), []byte("int main(void);\n"), 0o644)
	os.WriteFile(filepath.Join(laptop, "after.txt"), []byte("saved here after the drop\n"), 0o644)
	run(t, pod, "sh", "-c", "echo made there after the drop > "+WorkspaceDir+"/there.txt")
	eventually(t, "a local save after the drop, in the Pod", func() bool {
		return inPod("after.txt") == "saved here after the drop\n" && inPod("main.c") == "int main(void);\n"
	})
	toPod := time.Since(dropped)
	eventually(t, "a file made in the Pod after the drop, here", func() bool { return here("there.txt") == "made there after the drop\n" })
	fromPod := time.Since(dropped)
	t.Logf("after the drop: a local save was in the Pod %v later, a file made there here %v later", toPod.Round(time.Millisecond), fromPod.Round(time.Millisecond))
	if toPod > dropBound || fromPod > dropBound {
		t.Errorf("the files took %v and %v after the drop, want within %v", toPod, fromPod, dropBound)
	}
	select {
	case at := <-l.back:
		t.Logf("the sync answered again %v after the drop", at.Sub(dropped).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
	}
	if e := l.take(); strings.Join(e, ",") != "lost,back" {
		t.Errorf("said %q for a drop, want lost then back once each", e)
	}

	// The page's terminal: its socket closed by the proxy, as a broken
	// one would be, and the page reattaches to the same shell.
	select {
	case at := <-closed:
		t.Logf("the proxy closed the terminal's socket %v after the drop", at.Sub(dropped).Round(time.Millisecond))
		if at.Sub(dropped) > dropBound {
			t.Errorf("the terminal's socket was closed %v after the drop, want within %v", at.Sub(dropped), dropBound)
		}
	case <-time.After(dropBound + 5*time.Second - time.Since(dropped)):
		t.Fatalf("the terminal's socket through the proxy is still open %v after the drop: the page waits on a dead connection", time.Since(dropped).Round(time.Second))
	}
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	re, err := lp.terminal(rctx, term.id)
	if err != nil {
		t.Fatalf("reattach the terminal after the drop: %v", err)
	}
	defer re.ws.CloseNow()
	re.ws.Write(rctx, websocket.MessageBinary, append([]byte{0}, "echo after-$((6*8))\n"...))
	if err := re.until(rctx, "after-48"); err != nil {
		t.Errorf("the terminal after the drop: %v", err)
	}
	if !strings.Contains(re.out.String(), "before-42") {
		t.Errorf("the terminal's output from before the drop was not replayed: %q", re.out.String())
	}
	// The proxy's pool holds no connection from before the drop: the
	// editor's next request answers at once.
	start := time.Now()
	if got, err := lp.file(rctx, page, "after.txt"); err != nil || got != "saved here after the drop\n" {
		t.Errorf("after.txt through the proxy after the drop: %q %v", got, err)
	}
	t.Logf("a file through the proxy after the drop answered in %v", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a request through the proxy took %v after the drop", took)
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
	if here("main.c") != "int main(void);\n" || here("after.txt") != "saved here after the drop\n" || inPod("there.txt") != "made there after the drop\n" {
		t.Error("a change was lost")
	}
	if said := rs.said(); len(said) > 0 {
		t.Errorf("the rounds said %q", said)
	}
	if err := se.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if e := l.take(); len(e) != 0 {
		t.Errorf("said %q at the close", e)
	}
}
