package ide

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/cove-sh/cove/internal/execfile"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// procHex is an address as /proc/net/tcp{,6} prints it: each 32-bit word
// in this machine's byte order.
func procHex(a netip.Addr) string {
	b := a.AsSlice()
	out := make([]byte, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(out[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return strings.ToUpper(hex.EncodeToString(out))
}

// TestParseProcNetTCP reads the kernel's tables as printed: only LISTEN
// sockets (state 0A), IPv4 and IPv6 addresses, v4-mapped ones unmapped,
// their inodes; a malformed line is an error, not a guess.
func TestParseProcNetTCP(t *testing.T) {
	t.Parallel()
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	line := func(n int, addr netip.Addr, port uint16, st string, inode int) string {
		return fmt.Sprintf("%4d: %s:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
			n, procHex(addr), port, st, inode)
	}
	v4 := head + line(0, netip.MustParseAddr("127.0.0.1"), 8080, "0A", 111) +
		line(1, netip.MustParseAddr("0.0.0.0"), 22, "0A", 112) +
		line(2, netip.MustParseAddr("10.0.2.15"), 40000, "01", 113) // established: not listed
	got, err := ParseProcNetTCP(strings.NewReader(v4))
	if err != nil {
		t.Fatal(err)
	}
	want := []Listening{{Port: 8080, Addresses: []string{"127.0.0.1"}, inodes: []uint64{111}}, {Port: 22, Addresses: []string{"0.0.0.0"}, inodes: []uint64{112}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("v4: got %+v, want %+v", got, want)
	}
	v6 := head + line(0, netip.MustParseAddr("::"), 3000, "0A", 211) +
		line(1, netip.MustParseAddr("::1"), 5173, "0A", 212) +
		line(2, netip.MustParseAddr("::ffff:127.0.0.1"), 9000, "0A", 213)
	got, err = ParseProcNetTCP(strings.NewReader(v6))
	if err != nil {
		t.Fatal(err)
	}
	want = []Listening{{Port: 3000, Addresses: []string{"::"}, inodes: []uint64{211}}, {Port: 5173, Addresses: []string{"::1"}, inodes: []uint64{212}},
		{Port: 9000, Addresses: []string{"127.0.0.1"}, inodes: []uint64{213}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("v6: got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		head + "   0: 0100007F1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n", // no port
		head + "   0: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		head + "   0: 0100:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n",
		head + "   0: 0100007F:0000 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1 1\n", // port 0
		head + strings.Repeat("x", 8192) + "\n",                                                        // a line past any the kernel prints
	} {
		if ls, err := ParseProcNetTCP(strings.NewReader(bad)); err == nil {
			t.Errorf("%.60q: no error, got %+v", bad, ls)
		}
	}
}

// TestListeningPortsFindsAProcess: a real listener of another process
// (busybox httpd here) is listed from this machine's /proc with its name,
// once however many addresses it is on; the server's own sockets are not.
func TestListeningPortsFindsAProcess(t *testing.T) {
	t.Parallel()
	nc, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox missing (apt-get install busybox-static)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mine := l.Addr().(*net.TCPAddr).Port
	defer l.Close()
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	port := free.Addr().(*net.TCPAddr).Port
	free.Close()
	// A copy named as a server would be, so its name is known.
	bin := filepath.Join(t.TempDir(), "devserver")
	b, err := os.ReadFile(nc)
	if err != nil {
		t.Fatal(err)
	}
	execfile.Write(bin, b, 0o755)
	cmd := exec.Command(bin, "-f", "-p", "127.0.0.1:"+strconv.Itoa(port), "-h", t.TempDir())
	cmd.Args[0] = "httpd"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var found *Listening
	for deadline := time.Now().Add(10 * time.Second); found == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ls, err := listeningPorts("/proc", os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range ls {
			if int(x.Port) == mine {
				t.Errorf("the server's own port %d is listed: %+v", mine, x)
			}
			if int(x.Port) == port {
				found = &ls[i]
			}
		}
	}
	if found == nil {
		t.Fatalf("port %d of busybox httpd not listed", port)
	}
	if found.Process != "devserver" || found.Pid != cmd.Process.Pid {
		t.Errorf("port %d: process %q pid %d, want devserver %d", port, found.Process, found.Pid, cmd.Process.Pid)
	}
}

// tunnelServer serves the in-container API on a Unix socket and returns a
// Ports that reaches it as the launcher does.
func tunnelServer(t *testing.T, h http.Handler) *Ports {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ide.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	p := &Ports{Dial: func(ctx context.Context) (net.Conn, error) { return DialSocket(ctx, sock) }}
	t.Cleanup(p.Close)
	return p
}

func apiMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/ports/listening", servePortsListening)
	mux.HandleFunc("GET /api/ports/tunnel", serveTunnel)
	return mux
}

// TestForwardTunnel forwards a port on request: the listener is on
// 127.0.0.1 only, at the same number when it is free, and each
// connection reaches the port on the server's loopback, bytes intact
// both ways, many at once; a second forward of a taken number gets
// another port; stopping closes the listener.
func TestForwardTunnel(t *testing.T) {
	t.Parallel()
	p := tunnelServer(t, apiMux())
	// The "workspace's" server: echoes with a prefix.
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("hello:"))
				io.Copy(c, c)
			}()
		}
	}()
	port := uint16(srv.Addr().(*net.TCPAddr).Port)
	// Its number is taken here (by the server itself): another one.
	host, err := p.Forward(port, "", 0, "forwarded")
	if err != nil {
		t.Fatal(err)
	}
	if host == int(port) {
		t.Fatalf("forwarded onto the port the server holds")
	}
	p.mu.Lock()
	la := p.fwd[port].l.Addr().(*net.TCPAddr)
	p.mu.Unlock()
	if !la.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("the forward listens on %v, want 127.0.0.1 only", la)
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", host))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			go func() {
				c.Write(payload)
				c.(*net.TCPConn).CloseWrite()
			}()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			got, err := io.ReadAll(c)
			if err == nil && !bytes.Equal(got, append([]byte("hello:"), payload...)) {
				err = fmt.Errorf("got %d bytes back, want %d", len(got), len(payload)+6)
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	rows, err := p.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(rows, func(r PortEntry) bool { return r.Port == port })
	if i < 0 || rows[i].Source != "forwarded" || rows[i].URL != fmt.Sprintf("http://127.0.0.1:%d/", host) {
		t.Errorf("rows %+v", rows)
	}
	// A free number is kept.
	free, _ := net.Listen("tcp", "127.0.0.1:0")
	want := free.Addr().(*net.TCPAddr).Port
	free.Close()
	if got, err := p.Forward(uint16(want), "", 0, "forwarded"); err != nil || got != want {
		t.Errorf("forward of free port %d: got %d, %v", want, got, err)
	}
	if !p.Unforward(port, "forwarded") {
		t.Fatal("unforward: not forwarded")
	}
	// Refused, or (the number free again, and this package's tests run
	// side by side) another test's listener: not the workspace's server,
	// which would say hello (a CI run met the other).
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", host), time.Second); err == nil {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write([]byte("x"))
		c.(*net.TCPConn).CloseWrite()
		got, _ := io.ReadAll(c)
		c.Close()
		if bytes.HasPrefix(got, []byte("hello:")) {
			t.Errorf("127.0.0.1:%d still reaches the workspace after the forward stopped", host)
		}
	}
	p.Close()
	if _, err := p.Forward(port, "", 0, "forwarded"); err == nil {
		t.Error("a forward after Close")
	}
}

// TestTunnelRefusals: the server takes a port number and nothing else
// (not a name, not an address, not out of range), and answers 502 for a
// port nothing listens on; the launcher reads at most maxTunnelHead
// bytes of a hostile server's answer and at most maxListing of its list.
func TestTunnelRefusals(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "0", "65536", "99999", "-1", "+80", " 80", "0x50", "80a", "1e3", "127.0.0.1:22", "000080"} {
		if n, err := ParsePortNumber(bad); err == nil {
			t.Errorf("ParsePortNumber(%q) = %d, want an error", bad, n)
		}
	}
	if n, err := ParsePortNumber("65535"); err != nil || n != 65535 {
		t.Errorf("65535: %d %v", n, err)
	}
	srv := httptest.NewServer(apiMux())
	defer srv.Close()
	for _, q := range []string{"abc", "0", "70000", "22%20", "localhost:22", "-5"} {
		req, _ := http.NewRequest("GET", srv.URL+"/api/ports/tunnel?port="+q, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", tunnelUpgrade)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("tunnel to port %q: %d, want 400", q, resp.StatusCode)
		}
	}
	p := tunnelServer(t, apiMux())
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	nobody := uint16(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()
	if _, err := p.Tunnel(context.Background(), nobody); !errors.Is(err, errTunnel) || !strings.Contains(err.Error(), "502") {
		t.Errorf("tunnel to a closed port: %v", err)
	}

	// A hostile server: an endless header, an endless list.
	hostile := tunnelServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, brw, _ := w.(http.Hijacker).Hijack()
		defer c.Close()
		if strings.Contains(r.URL.Path, "listening") {
			brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"ports\":[")
			for range 1 << 16 {
				if _, err := brw.WriteString(`{"port":1,"process":"` + strings.Repeat("x", 64) + `"},`); err != nil {
					return
				}
			}
			brw.Flush()
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
		for range 1 << 16 {
			if _, err := brw.WriteString("X-Filler: " + strings.Repeat("y", 100) + "\r\n"); err != nil {
				return
			}
		}
		brw.Flush()
	}))
	if _, err := hostile.Tunnel(context.Background(), 80); err == nil || !strings.Contains(err.Error(), "more than 4096 bytes") {
		t.Errorf("endless header: %v", err)
	}
	if _, err := hostile.Entries(context.Background()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("endless list: %v", err)
	}
}

// TestForwardRoute is the route the page calls (behind the proxy's
// token): a port is a number in range or refused, and a hostile list's
// process names reach the page as text without control characters.
func TestForwardRoute(t *testing.T) {
	t.Parallel()
	p := tunnelServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ports":[{"port":3000,"addresses":["0.0.0.0","<b>"],"process":"\u001b[31mevil\u202e<img src=x>"},{"port":0},{"port":70000}]}`)
	}))
	h := p.ServeForward()
	for _, body := range []string{`{"port":"abc"}`, `{"port":0}`, `{"port":70000}`, `{"port":-1}`, `{"port":1.5}`, `nope`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/ports/forward", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("POST %s: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/api/ports/forward?port=x", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("DELETE port=x: %d", rec.Code)
	}
	rows, err := p.Entries(context.Background())
	if err == nil {
		// 70000 does not fit a port: the whole answer is refused.
		t.Errorf("a list with port 70000 taken: %+v", rows)
	}
	p2 := tunnelServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ports":[{"port":3000,"addresses":["0.0.0.0","<b>"],"process":"\u001b[31mevil\u202e<img src=x>"},{"port":0}]}`)
	}))
	rows, err = p2.Entries(context.Background())
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if r := rows[0]; r.Port != 3000 || r.Process != "[31mevil<img src=x>" || len(r.Addresses) != 1 {
		t.Errorf("row %+v", r)
	}
}

// BenchmarkForwardTunnel measures a forwarded port: "connect" is a new
// connection's first byte back (the launcher's listener, a dial of the
// server's socket, the tunnel's request and the dial on its loopback),
// "stream" the bytes through one connection, each against the same
// server reached directly.
func BenchmarkForwardTunnel(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "ide.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: apiMux()}
	go srv.Serve(l)
	defer srv.Close()
	p := &Ports{Dial: func(ctx context.Context) (net.Conn, error) { return DialSocket(ctx, sock) }}
	defer p.Close()
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("!"))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	port := uint16(target.Addr().(*net.TCPAddr).Port)
	host, err := p.Forward(port, "", 0, "forwarded")
	if err != nil {
		b.Fatal(err)
	}
	for _, to := range []struct{ name, addr string }{{"direct", target.Addr().String()}, {"forwarded", fmt.Sprintf("127.0.0.1:%d", host)}} {
		b.Run("connect/"+to.name, func(b *testing.B) {
			one := make([]byte, 1)
			for b.Loop() {
				c, err := net.Dial("tcp", to.addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, one); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
		b.Run("stream/"+to.name, func(b *testing.B) {
			c, err := net.Dial("tcp", to.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			io.ReadFull(c, make([]byte, 1))
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestForwardBoundsConnections: a forward relays at most maxForwardConns
// connections at once; one more is closed at once, and once one ends
// another is taken.
func TestForwardBoundsConnections(t *testing.T) {
	t.Parallel()
	p := tunnelServer(t, apiMux())
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			c, err := target.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("!"))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	host, err := p.Forward(uint16(target.Addr().(*net.TCPAddr).Port), "", 0, "forwarded")
	if err != nil {
		t.Fatal(err)
	}
	dial := func() (net.Conn, error) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", host))
		if err != nil {
			return nil, err
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		return c, err
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := range maxForwardConns {
		c, err := dial()
		if err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
		held = append(held, c)
	}
	if c, err := dial(); err == nil {
		c.Close()
		t.Fatalf("connection %d was relayed, want at most %d", maxForwardConns+1, maxForwardConns)
	}
	held[0].Close()
	held = held[1:]
	var c net.Conn
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = dial(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection taken after one ended: %v", err)
		}
	}
	c.Close()
}
