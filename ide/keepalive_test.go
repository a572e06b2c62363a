package ide

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/netcut"
	"github.com/cove-sh/cove/internal/projectfs"
)

// TestProxyClosesASilentWebSocket: behind a proxy whose connections to
// the server may go silent (a workspace reached through an API server), a
// terminal that prints nothing for longer than the proxy waits stays
// open, the server's pings keep it so, and so does a WebSocket of a
// server that does not ping (a cove before it, still in a Pod): it is not
// watched. Once the connections drop, the terminal's is closed within
// keepaliveMissed pings' time, as a broken one would be; the page reattaches to the same
// shell over a new connection, and the next request does not wait on a
// pooled connection from before the drop. The page's own line to the
// launcher keeps it counted as open meanwhile. The server pings every
// quarter second here (a Pod's server: every keepaliveEvery), announced
// as a fraction of a second, so the silence the proxy waits for is one
// second, not eight.
func TestProxyClosesASilentWebSocket(t *testing.T) {
	t.Parallel()
	const every = 250 * time.Millisecond
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("hello"), 0o644)
	dir, err := projectfs.Open(project)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	mux := http.NewServeMux()
	mux.Handle("/api/", newHandler(dir, []string{"/bin/sh"}, every))
	// A server before keepalives: a WebSocket that says nothing of them.
	mux.HandleFunc("/api/older", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		<-c.CloseRead(r.Context()).Done()
	})
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inner := &http.Server{Handler: mux}
	go inner.Serve(sl)
	defer inner.Close()
	// The network between the proxy and the server.
	d := netcut.New(t, sl.Addr().String())
	dial := func(ctx context.Context) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "tcp", d.Addr())
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := tl.Addr().(*net.TCPAddr).Port
	p := NewProxyDial(dial, port)
	outer := &http.Server{Handler: p}
	go outer.Serve(tl)
	defer outer.Close()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	page := &http.Client{}
	hdr := map[string]string{tokenHeader: p.Token}
	if code, body := get(t, page, base+"/api/file?path=a.txt", hdr); code != 200 || body != "hello" {
		t.Fatalf("a file through the proxy: %d %q", code, body)
	}

	c := termConn(t, p, base, "/api/term/new")
	defer c.CloseNow()
	f := watch(c)
	input(t, c, "echo $((6*7))\n")
	f.read(5*time.Second, func(f *frames) bool { return strings.Contains(f.out.String(), "42") })
	if f.id == "" || !strings.Contains(f.out.String(), "42") {
		t.Fatalf("the terminal: id %q output %q", f.id, f.out.String())
	}
	older := termConn(t, p, base, "/api/older")
	defer older.CloseNow()
	olderCtx := older.CloseRead(context.Background())

	// Quiet for longer than the proxy waits for a byte.
	quiet := keepaliveMissed*every + 2*every
	f.read(quiet, func(*frames) bool { return false })
	select {
	case _, ok := <-f.msgs:
		if !ok {
			t.Fatalf("a quiet terminal's WebSocket was closed within %v", quiet)
		}
	default:
	}
	if olderCtx.Err() != nil {
		t.Fatalf("an older server's WebSocket was closed within %v", quiet)
	}
	input(t, c, "echo $((6*8))\n")
	f.read(5*time.Second, func(f *frames) bool { return strings.Contains(f.out.String(), "48") })
	if !strings.Contains(f.out.String(), "48") {
		t.Fatalf("the terminal after a quiet while: %q", f.out.String())
	}

	// The page's line to the launcher itself, which a drop leaves open:
	// the page is still there, and the launcher does not take it for
	// gone (its grace period) while the page reconnects.
	life, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+lifelinePath,
		&websocket.DialOptions{HTTPHeader: http.Header{tokenHeader: {p.Token}, "Origin": {base}}})
	if err != nil {
		t.Fatal(err)
	}
	defer life.CloseNow()
	if _, _, err := life.Read(context.Background()); err != nil { // its hello
		t.Fatal(err)
	}
	life.CloseRead(context.Background())
	older.Close(websocket.StatusNormalClosure, "")

	// The drop.
	d.Drop()
	dropped := time.Now()
	f.read(keepaliveMissed*every+5*time.Second, func(*frames) bool { return false })
	took := time.Since(dropped)
	select {
	case _, ok := <-f.msgs:
		if !ok {
			break
		}
		t.Fatal("the terminal's WebSocket said something after the drop")
	default:
		t.Fatalf("the terminal's WebSocket is still open %v after the drop", took.Round(time.Second))
	}
	t.Logf("the proxy closed the terminal's WebSocket %v after the drop", took.Round(time.Millisecond))
	// Up to a second of silence counted from the last ping before the
	// drop, checked each eighth of it, and room for a loaded machine.
	if limit := keepaliveMissed*every + 3*time.Second; took > limit {
		t.Errorf("the terminal's WebSocket was closed %v after the drop, want within %v", took, limit)
	}
	time.Sleep(100 * time.Millisecond) // the lifeline's count settles
	if u := p.Unattended(); u != 0 {
		t.Errorf("with its terminal's socket closed by the drop, the page is taken for gone (%v)", u)
	}
	start := time.Now()
	if code, body := get(t, page, base+"/api/file?path=a.txt", hdr); code != 200 || body != "hello" {
		t.Errorf("a file through the proxy after the drop: %d %q", code, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a request after the drop took %v: it waited on a pooled connection from before", took)
	}
	c2 := termConn(t, p, base, "/api/term/"+f.id+"?offset=0")
	defer c2.CloseNow()
	g := watch(c2)
	g.read(5*time.Second, func(g *frames) bool { return strings.Contains(g.out.String(), "48") })
	if !strings.Contains(g.out.String(), "42") || !strings.Contains(g.out.String(), "48") {
		t.Fatalf("the terminal reattached after the drop: %q", g.out.String())
	}
}

// TestServeKeepsAliveOverTCPOnly: the server on a Unix socket (a
// workspace on this machine, whose launcher cannot lose it silently)
// neither announces nor sends pings, so an idle window wakes nothing;
// on TCP (a Pod's, reached by port-forward) it announces them every
// keepaliveEvery and sends them: bytes arrive on an idle watch.
func TestServeKeepsAliveOverTCPOnly(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			if network == "unix" {
				addr = filepath.Join(t.TempDir(), "ide.sock")
			}
			go ServeOn(ctx, network, addr, project)
			var read atomic.Int64
			client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: c, read: &read}, nil
			}}}
			var c *websocket.Conn
			var resp *http.Response
			var err error
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if c, resp, err = websocket.Dial(ctx, "ws://ide/api/watch", &websocket.DialOptions{HTTPClient: client}); err == nil {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			c.CloseRead(ctx) // answers pings
			upgraded := read.Load()
			time.Sleep(keepaliveEvery + 500*time.Millisecond)
			idle := read.Load() - upgraded
			got := resp.Header.Get(keepaliveHeader)
			switch network {
			case "unix":
				if got != "" || idle != 0 {
					t.Errorf("a Unix socket's server announces pings every %q s and sent %d bytes to an idle watch", got, idle)
				}
			case "tcp":
				if got != strconv.Itoa(int(keepaliveEvery.Seconds())) || idle == 0 {
					t.Errorf("a TCP server announces %q, want every %v, and sent %d bytes (no ping)", got, keepaliveEvery, idle)
				}
			}
		})
	}
}

// countingConn counts the bytes read from its connection.
type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
