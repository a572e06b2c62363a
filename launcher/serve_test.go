package launcher

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/ide"
)

// proxyWithWindow serves a launcher's proxy (no workspace behind it) and
// opens a window's line to it, which close closes.
func proxyWithWindow(t *testing.T) (p *ide.Proxy, close func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	p = ide.NewProxyDial(func(context.Context) (net.Conn, error) { return nil, net.ErrClosed }, port)
	srv := &http.Server{Handler: p}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	c, _, err := websocket.Dial(context.Background(), "ws://127.0.0.1:"+strconv.Itoa(port)+"/api/launcher",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Cove-Token": {p.Token}, "Origin": {base}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(context.Background()); err != nil { // its hello
		t.Fatal(err)
	}
	c.CloseRead(context.Background())
	return p, func() { c.Close(websocket.StatusNormalClosure, "") }
}

// TestWaitEndsOnceTheLastWindowIsGone: a launcher serves while a window
// is open, however long; once the last one closes it ends after the
// grace period, saying so; detached, it serves on.
func TestWaitEndsOnceTheLastWindowIsGone(t *testing.T) {
	t.Parallel()
	p, closeWindow := proxyWithWindow(t)
	running := make(chan struct{}) // never stops
	var said bytes.Buffer
	o := WaitOptions{Grace: 100 * time.Millisecond, Every: 10 * time.Millisecond, Stderr: &said}
	// Open for three grace periods: it serves on.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if Wait(ctx, p, running, o) || ctx.Err() == nil || said.Len() > 0 {
		t.Fatalf("with a window open it ended before it was interrupted (%v), saying %q", ctx.Err(), said.String())
	}
	closeWindow()
	// Detached, the last window closing does not end it.
	dctx, dcancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer dcancel()
	detached := o
	detached.Detached = true
	if Wait(dctx, p, running, detached) || dctx.Err() == nil {
		t.Fatal("a detached launcher ended when its last window closed")
	}
	start := time.Now()
	if Wait(context.Background(), p, running, o) {
		t.Fatal("it says the workspace stopped")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("it ended %v after the window closed (grace %v)", took, o.Grace)
	}
	if !strings.Contains(said.String(), "the last window closed") {
		t.Errorf("it said %q", said.String())
	}
}

// TestWaitSaysTheWorkspaceStopped: a workspace stopped under its
// launcher (cove stop) ends the wait, which says so; Ctrl-C ends it
// saying not.
func TestWaitSaysTheWorkspaceStopped(t *testing.T) {
	t.Parallel()
	p, _ := proxyWithWindow(t)
	stopped := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(stopped) })
	start := time.Now()
	if !Wait(context.Background(), p, stopped, WaitOptions{Detached: true}) {
		t.Error("a stopped workspace is not reported")
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("it ended after %v, before the workspace stopped", took)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Wait(ctx, p, make(chan struct{}), WaitOptions{Every: time.Hour}) {
		t.Error("an interrupted launcher reports its workspace stopped")
	}
}

// TestPublishRemovesOnlyItsOwnRecord: a launcher's record goes when it
// ends, but not a newer launcher's that took the workspace over.
func TestPublishRemovesOnlyItsOwnRecord(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "launcher.json")
	unpublish, err := Record{URL: "http://127.0.0.1:1/?token=ours"}.Publish(path, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok := Read(path); !ok || rec.Launcher.Pid != os.Getpid() || rec.Launcher.Created.IsZero() {
		t.Fatalf("the record read back: %+v, %v", rec, ok)
	}
	// A newer launcher (another live process) took over.
	newer := exec.Command("sleep", "30")
	if err := newer.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { newer.Process.Kill(); newer.Wait() }()
	if _, err := (Record{URL: "http://127.0.0.1:2/?token=newer"}).Publish(path, newer.Process.Pid); err != nil {
		t.Fatal(err)
	}
	unpublish()
	if rec, ok := Read(path); !ok || rec.URL != "http://127.0.0.1:2/?token=newer" {
		t.Fatalf("the newer launcher's record after the older ended: %+v, %v", rec, ok)
	}
	// Ours again: it goes.
	unpublish, err = Record{URL: "http://127.0.0.1:1/?token=ours"}.Publish(path, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	unpublish()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("our record is still there after we ended: %v", err)
	}
}
