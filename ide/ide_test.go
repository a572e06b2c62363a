package ide

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/projectfs"
)

// stack starts the in-container handler on a Unix socket and the proxy on
// a loopback port, as a workspace does, and returns the proxy.
func stack(t testing.TB, project string) (*Proxy, string) {
	t.Helper()
	dir, err := projectfs.Open(project)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	mux := http.NewServeMux()
	mux.Handle("/api/", NewHandler(dir, []string{"/bin/sh"}))
	mux.HandleFunc("/api/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // the proxy checked the origin
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, b, err := c.Read(r.Context())
		if err == nil {
			c.Write(r.Context(), typ, append([]byte("echo: "), b...))
		}
	})
	return behindProxy(t, mux)
}

// behindProxy serves h on a Unix socket, as cove ide serve does in a
// workspace, and the real Proxy on a loopback port in front of it.
func behindProxy(tb testing.TB, h http.Handler) (*Proxy, string) {
	tb.Helper()
	return behindProxyWrapped(tb, h, nil)
}

// behindProxyWrapped is behindProxy with the Proxy's port serving
// wrap(Proxy), for a test that watches what reaches the proxy itself.
func behindProxyWrapped(tb testing.TB, h http.Handler, wrap func(http.Handler) http.Handler) (*Proxy, string) {
	tb.Helper()
	sock := filepath.Join(tb.TempDir(), "ide.sock")
	ul, err := net.Listen("unix", sock)
	if err != nil {
		tb.Fatal(err)
	}
	inner := &http.Server{Handler: h}
	go inner.Serve(ul)
	tb.Cleanup(func() { inner.Close() })
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := tl.Addr().(*net.TCPAddr).Port
	p := NewProxy(sock, port)
	var front http.Handler = p
	if wrap != nil {
		front = wrap(p)
	}
	outer := &http.Server{Handler: front}
	go outer.Serve(tl)
	tb.Cleanup(func() { outer.Close() })
	return p, "http://127.0.0.1:" + strconv.Itoa(port)
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyRefusesWithoutTokenOrWithAWrongHost(t *testing.T) {
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("hello"), 0o644)
	p, base := stack(t, project)

	if code, _ := get(t, http.DefaultClient, base+"/api/file?path=a.txt", nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get(t, http.DefaultClient, base+"/api/file?path=a.txt&token=wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	// The token is taken only from its header, never from a cookie: a
	// browser sends cookies to every port of this host, and an old
	// profile may hold one from when the token was a cookie.
	stale := map[string]string{"Cookie": "cove_token=" + p.Token}
	if code, _ := get(t, http.DefaultClient, base+"/api/file?path=a.txt", stale); code != http.StatusUnauthorized {
		t.Errorf("the token as a cookie: %d, want 401", code)
	}
	// The token in the URL is the page's to read: the answer is the
	// page, and sets no cookie.
	resp, err := http.Get(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "<title>Cove</title>") || len(resp.Cookies()) > 0 || strings.Contains(string(body), p.Token) {
		t.Errorf("the URL with the token: %d, cookies %v, %.80q", resp.StatusCode, resp.Cookies(), body)
	}
	// The page loads without the token, to say what to do; a wrong token
	// sent with it is refused, so a page knows its launcher is gone.
	if code, _ := get(t, http.DefaultClient, base+"/favicon.svg", nil); code != 200 {
		t.Errorf("the UI without a token: %d, want 200", code)
	}
	if code, _ := get(t, http.DefaultClient, base+"/favicon.svg", map[string]string{tokenHeader: "wrong"}); code != http.StatusUnauthorized {
		t.Errorf("the UI with a wrong token: %d, want 401", code)
	}
	c := authed(t, p)
	if code, body := get(t, c, base+"/api/file?path=a.txt", nil); code != 200 || body != "hello" {
		t.Errorf("with the token: %d %q", code, body)
	}
	// DNS rebinding: a page on evil.example resolving to 127.0.0.1.
	for _, host := range []string{"evil.example:" + strings.Split(base, ":")[2], "127.0.0.1:1", "localhost"} {
		if code, _ := get(t, c, base+"/api/file?path=a.txt", map[string]string{"Host": host}); code != http.StatusForbidden {
			t.Errorf("Host %s: %d, want 403", host, code)
		}
	}
	if code, _ := get(t, c, strings.Replace(base, "127.0.0.1", "localhost", 1)+"/api/tree", nil); code != http.StatusUnauthorized && code != 200 {
		t.Errorf("localhost:PORT should be an allowed host: %d", code)
	}
}

func TestProxyWebSocketsOnlyFromItsOrigin(t *testing.T) {
	p, base := stack(t, t.TempDir())
	ctx := context.Background()
	hdr := http.Header{tokenHeader: {p.Token}}
	for origin, ok := range map[string]bool{
		base:                               true,
		"http://evil.example":              false,
		"http://127.0.0.1:1":               false,
		"null":                             false,
		"https://" + base[len("http://"):]: false,
	} {
		h := hdr.Clone()
		h.Set("Origin", origin)
		c, resp, err := websocket.Dial(ctx, strings.Replace(base, "http", "ws", 1)+"/api/ws", &websocket.DialOptions{HTTPHeader: h})
		if ok {
			if err != nil {
				t.Errorf("origin %s refused: %v", origin, err)
				continue
			}
			c.Write(ctx, websocket.MessageText, []byte("hi"))
			_, b, err := c.Read(ctx)
			if err != nil || string(b) != "echo: hi" {
				t.Errorf("through the proxy: %q %v", b, err)
			}
			c.CloseNow()
			continue
		}
		if err == nil {
			c.CloseNow()
			t.Errorf("origin %s was let in", origin)
		} else if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %s: %v, want 403", origin, err)
		}
	}
}

func TestFileAPIStaysInTheProject(t *testing.T) {
	project := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("secret"), 0o600)
	os.Symlink(outside, filepath.Join(project, "link"))
	os.Symlink("..", filepath.Join(project, "up"))
	os.WriteFile(filepath.Join(project, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Mkdir(filepath.Join(project, ".git"), 0o755)
	os.Mkdir(filepath.Join(project, "src"), 0o755)
	p, base := stack(t, project)
	c := &http.Client{}
	auth := map[string]string{tokenHeader: p.Token}
	for _, bad := range []string{"../secret", outside, "link", "up/secret", "/etc/passwd"} {
		if code, body := get(t, c, base+"/api/file?path="+bad, auth); code == 200 || strings.Contains(body, "secret\n") || body == "secret" {
			t.Errorf("read %s: %d %q", bad, code, body)
		}
	}
	put := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPut, base+"/api/file?path="+path, strings.NewReader(body))
		req.Header.Set(tokenHeader, p.Token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, bad := range []string{"../x", "up/x", outside} {
		if code := put(bad, "pwned"); code < 400 {
			t.Errorf("write %s: %d", bad, code)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "secret" {
		t.Fatal("a file outside the project changed")
	}
	// A save keeps the file's mode.
	if code := put("run.sh", "#!/bin/sh\necho saved\n"); code != http.StatusNoContent {
		t.Fatalf("save: %d", code)
	}
	if fi, _ := os.Stat(filepath.Join(project, "run.sh")); fi.Mode().Perm() != 0o755 {
		t.Errorf("mode after save %v", fi.Mode().Perm())
	}
	_, tree := get(t, c, base+"/api/tree", auth)
	if strings.Contains(tree, `".git"`) || !strings.HasPrefix(tree, `[{"name":"src","dir":true`) {
		t.Errorf("tree %s", tree)
	}
}

// termConn dials a terminal through the proxy.
func termConn(t *testing.T, p *Proxy, base, path string) *websocket.Conn {
	t.Helper()
	h := http.Header{tokenHeader: {p.Token}, "Origin": {base}}
	c, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+path, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	return c
}

// frames collects a terminal connection's frames, read by a goroutine
// (a read with a deadline would close the WebSocket).
type frames struct {
	msgs chan []byte
	out  strings.Builder
	end  uint64
	id   string
	exit *int
}

func watch(c *websocket.Conn) *frames {
	f := &frames{msgs: make(chan []byte, 1024)}
	go func() {
		defer close(f.msgs)
		for {
			_, msg, err := c.Read(context.Background())
			if err != nil {
				return
			}
			f.msgs <- msg
		}
	}()
	return f
}

// read takes frames until stop says so or timeout passes.
func (f *frames) read(timeout time.Duration, stop func(*frames) bool) {
	deadline := time.After(timeout)
	for !stop(f) {
		var msg []byte
		var ok bool
		select {
		case msg, ok = <-f.msgs:
			if !ok {
				return
			}
		case <-deadline:
			return
		}
		switch msg[0] {
		case opHello:
			var h struct{ ID string }
			json.Unmarshal(msg[1:], &h)
			f.id = h.ID
		case opOutput:
			off := binary.BigEndian.Uint64(msg[1:9])
			f.out.Write(msg[9:])
			f.end = off + uint64(len(msg)-9)
		case opExit:
			var e struct{ Code int }
			json.Unmarshal(msg[1:], &e)
			f.exit = &e.Code
		}
	}
}

func input(t *testing.T, c *websocket.Conn, s string) {
	if err := c.Write(context.Background(), websocket.MessageBinary, append([]byte{opInput}, s...)); err != nil {
		t.Fatal(err)
	}
}

func TestTerminalRoundTripAndReplay(t *testing.T) {
	p, base := stack(t, t.TempDir())
	c := termConn(t, p, base, "/api/term/new")
	f := watch(c)
	input(t, c, "echo $((6*7))\n")
	f.read(5*time.Second, func(f *frames) bool { return strings.Contains(f.out.String(), "42") })
	if f.id == "" || !strings.Contains(f.out.String(), "42") {
		t.Fatalf("first connection: id %q output %q", f.id, f.out.String())
	}
	c.Close(websocket.StatusNormalClosure, "reload")

	// The shell lived on: a new connection replays from offset 0.
	c2 := termConn(t, p, base, "/api/term/"+f.id+"?offset=0")
	g := watch(c2)
	g.read(5*time.Second, func(g *frames) bool { return strings.Contains(g.out.String(), "42") })
	if !strings.Contains(g.out.String(), "42") {
		t.Fatalf("replay after reconnect: %q", g.out.String())
	}
	input(t, c2, "exit 3\n")
	g.read(5*time.Second, func(g *frames) bool { return g.exit != nil })
	if g.exit == nil || *g.exit != 3 {
		t.Fatalf("exit: %v", g.exit)
	}
}

// TestTerminalFlowControl: with no acks, the server sends at most a window
// of `yes`, and Ctrl-C still stops it at once.
func TestTerminalFlowControl(t *testing.T) {
	p, base := stack(t, t.TempDir())
	c := termConn(t, p, base, "/api/term/new")
	f := watch(c)
	input(t, c, "yes\n")
	f.read(1500*time.Millisecond, func(*frames) bool { return false })
	if n := f.out.Len(); n < 1000 || n > flowWindow+(64<<10) {
		t.Fatalf("received %d bytes without acking; want some, but at most about the %d-byte window", n, flowWindow)
	}
	input(t, c, "\x03")
	ackAll := func() {
		b := make([]byte, 9)
		b[0] = opAck
		binary.BigEndian.PutUint64(b[1:], f.end)
		c.Write(context.Background(), websocket.MessageBinary, b)
	}
	start := time.Now()
	input(t, c, "echo stopped-$((1+1))\n")
	for !strings.Contains(f.out.String(), "stopped-2") && time.Since(start) < 5*time.Second {
		ackAll()
		f.read(200*time.Millisecond, func(f *frames) bool { return strings.Contains(f.out.String(), "stopped-2") })
	}
	if !strings.Contains(f.out.String(), "stopped-2") {
		t.Fatalf("after Ctrl-C the shell did not answer (%d bytes read)", f.out.Len())
	}
}

// TestProtocolMatchesTheWebUI: the opcodes are defined once in Go and
// once in the UI's JavaScript; they must agree.
func TestProtocolMatchesTheWebUI(t *testing.T) {
	b, err := os.ReadFile("web/src/protocol.js")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]byte{"input": opInput, "resize": opResize, "ack": opAck, "output": opOutput, "exit": opExit, "hello": opHello}
	got := map[string]byte{}
	for _, m := range regexp.MustCompile(`(\w+): 0x([0-9a-fA-F]+)`).FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseUint(m[2], 16, 8)
		got[m[1]] = byte(v)
	}
	if len(got) != len(want) {
		t.Fatalf("protocol.js has %v, Go has %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: JavaScript 0x%02x, Go 0x%02x", k, got[k], v)
		}
	}
}

// authed is a client that sends the proxy's token, as a window does.
func authed(t *testing.T, p *Proxy) *http.Client {
	t.Helper()
	return &http.Client{Transport: tokenSender{p.Token}}
}

// tokenSender adds the token's header to each request.
type tokenSender struct{ token string }

func (s tokenSender) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(tokenHeader, s.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeServesOnlyTheAPI runs Serve as the workspace does: over its
// socket it answers the API, and no page: the UI is the launcher's.
func TestServeServesOnlyTheAPI(t *testing.T) {
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a"), 0o644)
	sock := filepath.Join(t.TempDir(), "ide.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, sock, project) }()
	defer func() { cancel(); <-done }()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", sock)
	}}}
	var err error
	for i := 0; i < 100; i++ {
		var resp *http.Response
		if resp, err = c.Get("http://ide/api/file?path=a.txt"); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, c, "http://ide/api/file?path=a.txt", nil); code != 200 || body != "a" {
		t.Errorf("/api/file: %d, %.80q", code, body)
	}
	for _, path := range []string{"/", "/app.js", "/index.html"} {
		if code, _ := get(t, c, "http://ide"+path, nil); code != 404 {
			t.Errorf("the workspace's server answers %s: %d, want 404", path, code)
		}
	}
}

// TestProxyServesTheUIItself: the page, the bundle and its chunks come
// from the launcher's binary, with a strict policy, whatever the server
// in the workspace would answer; what the workspace answers for the API
// is data (never a page, a script or a cookie).
func TestProxyServesTheUIItself(t *testing.T) {
	hostile := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Set-Cookie", "cove_token=forged; Path=/")
		w.Header().Set("Access-Control-Allow-Origin", "*")
		// Headers that act on the launcher's origin: its cookies and the
		// page's storage (the token) cleared, a change sent on elsewhere.
		w.Header().Set("Clear-Site-Data", `"cookies", "storage"`)
		w.Header().Set("Location", "/api/replace")
		w.Header().Set("Refresh", "0; url=/api/replace")
		w.Header().Set("Link", "</api/replace>; rel=preload")
		w.Header().Set("ETag", `"e1"`)
		w.Write([]byte("<title>Cove</title><script>steal()</script>"))
	})
	p, base := behindProxy(t, hostile)
	c := authed(t, p)
	for path, want := range map[string]string{"/": "<title>Cove</title>", "/app.js": "xterm", "/app.css": ".xterm"} {
		code, body := get(t, c, base+path, nil)
		if code != 200 || !strings.Contains(body, want) || strings.Contains(body, "steal()") {
			t.Errorf("%s: %d, %.80q", path, code, body)
		}
	}
	resp, err := c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-eval") ||
		!strings.Contains(csp, "frame-ancestors 'none'") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the page's policy: %q, nosniff %q", csp, resp.Header.Get("X-Content-Type-Options"))
	}
	resp, err = c.Get(base + "/api/anything")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := resp.Header
	if h.Get("Content-Type") != "application/octet-stream" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Set-Cookie") != "" || h.Get("Access-Control-Allow-Origin") != "" ||
		h.Get("Clear-Site-Data") != "" || h.Get("Location") != "" || h.Get("Refresh") != "" || h.Get("Link") != "" {
		t.Errorf("the workspace's HTML answer reached the browser as: %v", h)
	}
	if h.Get("ETag") != `"e1"` {
		t.Errorf("the workspace's ETag did not reach the browser: %v", h)
	}
	// Browsers get the bundle gzipped (Go's client asks for and undoes it).
	req, _ := http.NewRequest("GET", base+"/app.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	zipped, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || len(zipped) > 600<<10 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js: %s, %d bytes, %s", resp.Header.Get("Content-Encoding"), len(zipped), resp.Header.Get("Content-Type"))
	}
	// What it unzips to is the bundle itself, and every chunk it imports is
	// served too (a chunk missing from the embed would break the page).
	zr, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if want, _ := os.ReadFile("web/dist/app.js"); len(want) == 0 || !bytes.Equal(unzipped, want) {
		t.Fatal("the gzipped app.js is not app.js")
	}
	// A client that does not take gzip gets the same bytes, unzipped.
	req, _ = http.NewRequest("GET", base+"/app.js", nil)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "" || !bytes.Equal(plain, unzipped) || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("app.js without gzip: %q, %d bytes (want %d), %s", resp.Header.Get("Content-Encoding"), len(plain), len(unzipped), resp.Header.Get("Content-Type"))
	}
	chunks := regexp.MustCompile(`"\./chunks/([^"]+\.js)"`).FindAllStringSubmatch(string(unzipped), -1)
	if len(chunks) < 5 {
		t.Fatalf("app.js imports %d chunks; languages, the merge view and markdown should load on demand", len(chunks))
	}
	for _, m := range chunks {
		if code, body := get(t, c, base+"/chunks/"+m[1], nil); code != 200 || len(body) == 0 || strings.Contains(body, "steal()") {
			t.Errorf("chunk %s: %d", m[1], code)
		}
	}
	if code, _ := get(t, c, base+"/app.js.gz", nil); code != 404 {
		t.Errorf("app.js.gz itself: %d, want 404", code)
	}
}

// TestProxyNeverDialsASwappedSocket: the workspace can write the socket's
// directory; a symlink it puts in the socket's place (to a host daemon's
// socket) is never dialled, and the server started again is.
func TestProxyNeverDialsASwappedSocket(t *testing.T) {
	hostSock := filepath.Join(t.TempDir(), "daemon.sock")
	hl, err := net.Listen("unix", hostSock)
	if err != nil {
		t.Fatal(err)
	}
	dialled := make(chan bool, 10)
	go func() {
		for {
			c, err := hl.Accept()
			if err != nil {
				return
			}
			dialled <- true
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 17\r\n\r\nhost daemon speaks"))
			c.Close()
		}
	}()
	defer hl.Close()
	p, base := behindProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("workspace")) }))
	c := authed(t, p)
	sock := p.socket
	if code, body := get(t, c, base+"/api/x", nil); code != 200 || body != "workspace" {
		t.Fatalf("before: %d %q", code, body)
	}
	os.Remove(sock)
	if err := os.Symlink(hostSock, sock); err != nil {
		t.Fatal(err)
	}
	// As if the server in the workspace had gone: new connections.
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	if code, body := get(t, c, base+"/api/x", nil); code == 200 || strings.Contains(body, "host daemon") {
		t.Errorf("through the swapped socket: %d %q", code, body)
	}
	select {
	case <-dialled:
		t.Error("the host daemon's socket was dialled")
	default:
	}
	// A server started again on the path is found.
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("again")) })}
	go srv.Serve(l)
	defer srv.Close()
	p.rp.Transport.(*http.Transport).CloseIdleConnections()
	if code, body := get(t, c, base+"/api/x", nil); code != 200 || body != "again" {
		t.Errorf("after a restart: %d %q", code, body)
	}
}

// TestWatchReportsChangesOnDisk: writes, new files and removals in the
// project (also in a directory made after the watch began) reach the
// client; cove's own state does not.
func TestWatchReportsChangesOnDisk(t *testing.T) {
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a"), 0o644)
	p, base := stack(t, project)
	c := termConn(t, p, base, "/api/watch")
	msgs := messages(c)
	expect := func(want string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-msgs:
				if m == want {
					return
				}
			case <-deadline:
				t.Fatalf("no %s", want)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("b"), 0o644)
	expect(`{"path":"a.txt","op":"write"}`)
	os.Mkdir(filepath.Join(project, "sub"), 0o755)
	expect(`{"path":"sub","op":"create"}`)
	time.Sleep(100 * time.Millisecond)
	os.WriteFile(filepath.Join(project, "sub", "new.go"), []byte("package x"), 0o644)
	expect(`{"path":"sub/new.go","op":"create"}`)
	os.MkdirAll(filepath.Join(project, ".cove", "sessions"), 0o755)
	os.WriteFile(filepath.Join(project, ".cove", "x"), nil, 0o644)
	os.Remove(filepath.Join(project, "a.txt"))
	expect(`{"path":"a.txt","op":"remove"}`)
	select {
	case m := <-msgs:
		if strings.Contains(m, ".cove") {
			t.Errorf("cove's own state was reported: %s", m)
		}
	case <-time.After(300 * time.Millisecond):
	}
}

// TestFileAPIChangesAndConflicts: a save over a file that changed on disk
// since it was read is refused (412) unless forced; new files, folders,
// renames and deletes stay inside the project and never replace a file.
func TestFileAPIChangesAndConflicts(t *testing.T) {
	project := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644)
	os.Symlink(outside, filepath.Join(project, "out"))
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("one\n"), 0o644)
	p, base := stack(t, project)
	do := func(method, path string, body string, hdr ...string) (int, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set(tokenHeader, p.Token)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(project, name))
		return string(b)
	}
	code, h := do("GET", "/api/file?path=a.txt", "")
	tag := h.Get("ETag")
	if code != 200 || tag == "" {
		t.Fatalf("GET: %d, ETag %q", code, tag)
	}
	// Unchanged on disk: the save goes through, with the new tag.
	code, h = do("PUT", "/api/file?path=a.txt", "two\n", "If-Match", tag)
	if code != http.StatusNoContent || read("a.txt") != "two\n" || h.Get("ETag") == tag {
		t.Fatalf("save: %d %q, ETag %q", code, read("a.txt"), h.Get("ETag"))
	}
	// Changed on disk (by a terminal, the agent): refused, nothing lost.
	tag = h.Get("ETag")
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("from the terminal\n"), 0o644)
	if code, _ := do("PUT", "/api/file?path=a.txt", "three\n", "If-Match", tag); code != http.StatusPreconditionFailed || read("a.txt") != "from the terminal\n" {
		t.Fatalf("save over a change: %d, file %q", code, read("a.txt"))
	}
	if code, _ := do("PUT", "/api/file?path=a.txt", "three\n"); code != http.StatusNoContent || read("a.txt") != "three\n" {
		t.Fatalf("forced save: %d %q", code, read("a.txt"))
	}
	// A new file: not over an existing one.
	if code, _ := do("PUT", "/api/file?path=src/new.go", "", "If-None-Match", "*"); code != http.StatusNoContent {
		t.Fatalf("new file: %d", code)
	}
	if code, _ := do("PUT", "/api/file?path=a.txt", "", "If-None-Match", "*"); code != http.StatusPreconditionFailed || read("a.txt") != "three\n" {
		t.Fatalf("new file over a.txt: %d %q", code, read("a.txt"))
	}
	if code, _ := do("POST", "/api/dir?path=docs/img", ""); code != http.StatusNoContent {
		t.Fatalf("mkdir: %d", code)
	}
	if fi, err := os.Stat(filepath.Join(project, "docs/img")); err != nil || !fi.IsDir() {
		t.Fatalf("docs/img: %v", err)
	}
	// Rename: never over another file, never out of the project.
	if code, _ := do("POST", "/api/rename?from=src/new.go&to=a.txt", ""); code != http.StatusConflict || read("a.txt") != "three\n" {
		t.Fatalf("rename over a file: %d", code)
	}
	if code, _ := do("POST", "/api/rename?from=src&to=lib/src", ""); code != http.StatusNoContent {
		t.Fatalf("rename: %d", code)
	}
	if _, err := os.Stat(filepath.Join(project, "lib/src/new.go")); err != nil {
		t.Fatalf("after the rename: %v", err)
	}
	for _, bad := range []string{"/api/rename?from=a.txt&to=../a.txt", "/api/rename?from=a.txt&to=out/a.txt", "/api/rename?from=a.txt&to=" + outside + "/a.txt"} {
		if code, _ := do("POST", bad, ""); code < 400 {
			t.Errorf("%s: %d", bad, code)
		}
	}
	// Delete: a directory and all in it; a symlink itself, never its
	// target; never the project or outside it.
	for _, bad := range []string{".", "..", "out/keep", outside + "/keep", ""} {
		if code, _ := do("DELETE", "/api/file?path="+bad, ""); code < 400 {
			t.Errorf("delete %q: %d", bad, code)
		}
	}
	if code, _ := do("DELETE", "/api/file?path=out", ""); code != http.StatusNoContent {
		t.Fatalf("delete the symlink: %d", code)
	}
	if code, _ := do("DELETE", "/api/file?path=lib", ""); code != http.StatusNoContent {
		t.Fatalf("delete lib: %d", code)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep" {
		t.Fatalf("outside the project: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(project, "lib")); err == nil {
		t.Error("lib is still there")
	}
	if read("a.txt") != "three\n" {
		t.Error("a.txt changed")
	}
}

// TestTerminalForgottenAfterExit: an exited shell stays a while for a
// page that comes back (its output and status), then is dropped; an id
// the server does not know closes with 4404, for the page to start anew.
func TestTerminalForgottenAfterExit(t *testing.T) {
	s := &terminals{dir: t.TempDir(), shell: []string{"/bin/sh"}, keepExited: 300 * time.Millisecond, terms: map[string]*Terminal{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/term/{id}", s.serve)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dial := func(path string) *websocket.Conn {
		c, _, err := websocket.Dial(context.Background(), strings.Replace(srv.URL, "http", "ws", 1)+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	closedWith := func(c *websocket.Conn) websocket.StatusCode {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return websocket.CloseStatus(err)
			}
		}
	}
	if code := closedWith(dial("/api/term/0123456789ab")); code != closeNoTerminal {
		t.Fatalf("an unknown id closed with %d, want %d", code, closeNoTerminal)
	}
	c := dial("/api/term/new")
	f := watch(c)
	input(t, c, "echo bye; exit 5\n")
	f.read(5*time.Second, func(f *frames) bool { return f.exit != nil })
	if f.exit == nil || *f.exit != 5 {
		t.Fatalf("exit: %v", f.exit)
	}
	// Soon after: the page gets the end of it again.
	g := watch(dial("/api/term/" + f.id + "?offset=0"))
	g.read(5*time.Second, func(g *frames) bool { return g.exit != nil })
	if g.exit == nil || !strings.Contains(g.out.String(), "bye") {
		t.Fatalf("back after the exit: %q, exit %v", g.out.String(), g.exit)
	}
	time.Sleep(600 * time.Millisecond)
	s.mu.Lock()
	n := len(s.terms)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d terminals kept after the exit and the grace", n)
	}
	if code := closedWith(dial("/api/term/" + f.id + "?offset=0")); code != closeNoTerminal {
		t.Fatalf("a forgotten shell closed with %d", code)
	}
}

// TestProxyChangesOnlyFromItsOrigin: a page on another port of this host
// is the same site, and a simple POST from it needs no preflight: even
// with the token (which it should never hold) it must not change anything.
func TestProxyChangesOnlyFromItsOrigin(t *testing.T) {
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("keep\n"), 0o644)
	p, base := stack(t, project)
	post := func(origin string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/rename?from=a.txt&to=b.txt", nil)
		req.Header.Set(tokenHeader, p.Token)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, evil := range []string{"http://127.0.0.1:1", "http://localhost:3000", "null", "http://evil.example"} {
		if code := post(evil); code != http.StatusForbidden {
			t.Errorf("a POST from %s: %d, want 403", evil, code)
		}
	}
	if _, err := os.Stat(filepath.Join(project, "a.txt")); err != nil {
		t.Fatalf("a.txt was moved by another origin: %v", err)
	}
	if code := post(base); code != http.StatusNoContent {
		t.Fatalf("a POST from the IDE's own origin: %d", code)
	}
	if _, err := os.Stat(filepath.Join(project, "b.txt")); err != nil {
		t.Fatalf("the IDE's own rename did not happen: %v", err)
	}
}

// TestTerminalCloseEndsTheShell: a tab closed ends its shell and what it
// started, and the id is forgotten.
func TestTerminalCloseEndsTheShell(t *testing.T) {
	p, base := stack(t, t.TempDir())
	c := termConn(t, p, base, "/api/term/new")
	f := watch(c)
	nap := strconv.Itoa(int(300000 + time.Now().UnixNano()%100000)) // ours alone
	input(t, c, "sleep "+nap+" & echo started\n")
	f.read(5*time.Second, func(f *frames) bool { return strings.Contains(f.out.String(), "started") })
	if f.id == "" {
		t.Fatal("no terminal id")
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/term/"+f.id, nil)
	req.Header.Set(tokenHeader, p.Token)
	req.Header.Set("Origin", base)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	f.read(5*time.Second, func(f *frames) bool { return f.exit != nil })
	if f.exit == nil {
		t.Error("the shell did not exit")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", "^sleep "+nap+"$").Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shell's background sleep survived the close: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again := termConn(t, p, base, "/api/term/"+f.id+"?offset=0")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if _, _, err := again.Read(ctx); err != nil {
			if websocket.CloseStatus(err) != closeNoTerminal {
				t.Errorf("the closed terminal's id: %v, want close code %d", err, closeNoTerminal)
			}
			break
		}
	}
}

// TestTerminalExitsWithAJobLeft: a shell that exits leaving a job in the
// background (which holds the PTY open) is reported as exited all the same.
func TestTerminalExitsWithAJobLeft(t *testing.T) {
	p, base := stack(t, t.TempDir())
	c := termConn(t, p, base, "/api/term/new")
	f := watch(c)
	nap := strconv.Itoa(int(400000 + time.Now().UnixNano()%100000))
	t.Cleanup(func() { exec.Command("pkill", "-f", "^sleep "+nap+"$").Run() })
	input(t, c, "sleep "+nap+" & exit 7\n")
	f.read(5*time.Second, func(f *frames) bool { return f.exit != nil })
	if f.exit == nil || *f.exit != 7 {
		t.Fatalf("exit: %v (output %q)", f.exit, f.out.String())
	}
}

// TestProxySaysTheWorkspaceStopped: with the workspace's server gone, the
// window gets a 502 that says so, and no Go log line reaches the
// launcher's terminal.
func TestProxySaysTheWorkspaceStopped(t *testing.T) {
	p, base := behindProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	c := authed(t, p)
	os.Remove(p.socket)
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	code, body := get(t, c, base+"/api/tree", nil)
	if code != http.StatusBadGateway || !strings.Contains(body, "does not answer") || !strings.Contains(body, "dial") {
		t.Errorf("%d %q, want a 502 that says the dial failed", code, body)
	}
	// A file where the socket was: the dial's own reason, not a broken answer.
	os.WriteFile(p.socket, nil, 0o600)
	if code, body := get(t, c, base+"/api/tree", nil); code != http.StatusBadGateway || !strings.Contains(body, "the workspace replaced it") {
		t.Errorf("%d %q, want a 502 that says the socket was replaced", code, body)
	}
	if logged.Len() > 0 {
		t.Errorf("logged: %s", logged.String())
	}
}

// TestProxyDoesNotQuoteABrokenAnswer: a workspace's server that answers
// with bytes that are not HTTP gets a 502 in the proxy's words: Go's
// transport quotes the bytes in its error, and the page would show them
// as cove's.
func TestProxyDoesNotQuoteABrokenAnswer(t *testing.T) {
	p, base := behindProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		// One word: Go's error quotes a status line without spaces whole.
		conn.Write([]byte("cove:your-token-expired,log-in-again-at-https://evil.example\r\n\r\n"))
		conn.Close()
	}))
	code, body := get(t, authed(t, p), base+"/api/tree", nil)
	if code != http.StatusBadGateway || strings.Contains(body, "evil") || !strings.Contains(body, "its answer could not be passed on") {
		t.Errorf("%d %q, want a 502 in the proxy's words", code, body)
	}
}

// TestProxyKeepsTheTokenFromTheWorkspace: the server in the workspace,
// which is hostile, never sees the token, whichever way the page sent it
// (its header, a WebSocket's subprotocol, an old cookie); a WebSocket
// without its token is refused, and one with it speaks cove.
func TestProxyKeepsTheTokenFromTheWorkspace(t *testing.T) {
	seen := make(chan http.Header, 10)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		if !isWebSocket(r) {
			w.Write([]byte("ok"))
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // names no subprotocol
		if err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	})
	p, base := behindProxy(t, inner)
	leaked := func(what string, h http.Header) {
		t.Helper()
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, p.Token) {
					t.Errorf("%s: the workspace's server got the token in %s: %q", what, k, v)
				}
			}
		}
	}
	code, _ := get(t, http.DefaultClient, base+"/api/x", map[string]string{tokenHeader: p.Token, "Cookie": "cove_token=" + p.Token + "; other=1"})
	if code != 200 {
		t.Fatalf("with the token's header: %d", code)
	}
	leaked("a request", <-seen)

	ws := strings.Replace(base, "http", "ws", 1) + "/api/ws"
	ctx := context.Background()
	// As a browser sends it: the token offered as a subprotocol.
	c, resp, err := websocket.Dial(ctx, ws, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Origin": {base}, "Cookie": {"cove_token=" + p.Token}},
		Subprotocols: []string{wsProtocol, tokenProtocol + p.Token},
	})
	if err != nil {
		t.Fatalf("a WebSocket with its token: %v", err)
	}
	c.CloseNow()
	h := <-seen
	leaked("a WebSocket", h)
	if got := h.Get("Sec-Websocket-Protocol"); got != wsProtocol {
		t.Errorf("the workspace's server was offered %q, want %q", got, wsProtocol)
	}
	// The browser needs the answer to name a protocol it offered.
	if got := resp.Header.Get("Sec-Websocket-Protocol"); got != wsProtocol {
		t.Errorf("the answer names %q, want %q", got, wsProtocol)
	}
	// Without the token, or with only a stale cookie, or a wrong one: 401,
	// and the workspace hears nothing.
	for name, opts := range map[string]*websocket.DialOptions{
		"none":   {HTTPHeader: http.Header{"Origin": {base}}, Subprotocols: []string{wsProtocol}},
		"cookie": {HTTPHeader: http.Header{"Origin": {base}, "Cookie": {"cove_token=" + p.Token}}, Subprotocols: []string{wsProtocol}},
		"wrong":  {HTTPHeader: http.Header{"Origin": {base}}, Subprotocols: []string{wsProtocol, tokenProtocol + "wrong"}},
	} {
		c, resp, err := websocket.Dial(ctx, ws, opts)
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: a WebSocket was let in", name)
		} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %v, want 401", name, err)
		}
	}
	select {
	case h := <-seen:
		t.Errorf("the workspace's server heard a refused request: %v", h)
	default:
	}
}

// messages are c's text messages as they come, closed when c ends.
func messages(c *websocket.Conn) <-chan string {
	msgs := make(chan string, 100)
	go func() {
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(b)
		}
	}()
	return msgs
}

// TestWatchReportsRepositoryChanges: git run beside the page (a
// terminal's) staging, committing and switching branches reaches the
// client as a "repo" change of .git, which the Source Control view and
// the branch wait for instead of asking every few seconds; the objects
// it writes are not reported as the project's files.
func TestWatchReportsRepositoryChanges(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this machine")
	}
	project := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", project, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a"), 0o644)
	p, base := stack(t, project)
	c := termConn(t, p, base, "/api/watch")
	msgs := messages(c)
	// until collects what comes until want, failing after 5 s.
	until := func(want string) []string {
		t.Helper()
		var got []string
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-msgs:
				got = append(got, m)
				if m == want {
					return got
				}
			case <-deadline:
				t.Fatalf("no %s in %q", want, got)
			}
		}
	}
	const repo = `{"path":".git","op":"repo"}`
	time.Sleep(100 * time.Millisecond)
	git("add", "a.txt")
	until(repo)
	git("commit", "-q", "-m", "one")
	until(repo)
	git("checkout", "-q", "-b", "other")
	for _, m := range until(repo) {
		if strings.Contains(m, ".git/") {
			t.Errorf("git's own files were reported as the project's: %s", m)
		}
	}
	// Nothing changed: nothing comes.
	select {
	case m := <-msgs:
		if m == repo {
			// the tail of the checkout's burst
			select {
			case m := <-msgs:
				t.Errorf("an idle repository reported %s", m)
			case <-time.After(500 * time.Millisecond):
			}
		} else {
			t.Errorf("an idle repository reported %s", m)
		}
	case <-time.After(500 * time.Millisecond):
	}
}
