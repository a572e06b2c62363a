package ide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Ports is the launcher's half of the Ports view: the workspace's
// listening ports (asked of its server), the ports its backend publishes
// on this machine itself (-p, devcontainer.json's forwardPorts), and the
// ports forwarded on request, each to a listener on this machine's
// 127.0.0.1 whose every connection is tunnelled through the workspace's
// server to the same port on the workspace's own loopback (as VS Code's
// remote port forwarding does). Nothing here dials an address the
// workspace names: a connection goes to the server Dial reaches, and a
// port number is all the workspace's server is asked for. Its routes
// are served behind the proxy's token checks (Handle). The zero value
// with Dial set is ready; Close ends every forward.
type Ports struct {
	// Dial reaches the workspace's IDE server (Workspace.DialIDE).
	Dial func(context.Context) (net.Conn, error)
	// Published are the ports the workspace's backend publishes on this
	// machine; set before serving.
	Published []PublishedPort

	mu     sync.Mutex
	fwd    map[uint16]*forward // by the workspace's port
	closed bool
	client *http.Client
}

// PublishedPort is a port of the workspace reachable on this machine
// without a tunnel (pasta publishes it).
type PublishedPort struct {
	HostIP   string // the address it is bound to on this machine
	HostPort uint16
	Port     uint16 // the workspace's
	Source   string // what asked for it: "-p", "forwardPorts"
}

// forward is one port forwarded on request: a listener on 127.0.0.1.
type forward struct {
	port   uint16
	l      net.Listener
	source string

	mu      sync.Mutex
	closed  bool
	conns   map[net.Conn]bool // the connections relayed now, closed with it
	lastErr string            // why the last connection failed, for the view
}

const (
	// maxForwards bounds the ports forwarded at once, and maxForwardConns
	// the connections each relays at once: each holds two buffers of
	// relayBuffer.
	maxForwards     = 64
	maxForwardConns = 128
	// maxListing is the most read of the server's list of ports.
	maxListing = 1 << 20
	// maxListed is the most ports the view lists.
	maxListed = 1024
	// maxTunnelHead bounds the server's answer to a tunnel's request, read
	// before the connection's bytes.
	maxTunnelHead = 4096
)

// PortEntry is one row of the Ports view (GET /api/ports).
type PortEntry struct {
	Port      uint16   `json:"port"`
	Listening bool     `json:"listening"`
	Addresses []string `json:"addresses,omitempty"`
	Process   string   `json:"process,omitempty"`
	// Source says how it reaches this machine: "-p" or "forwardPorts"
	// (published from the start), "forwarded" (on request), "" (not).
	Source string `json:"source,omitempty"`
	// Host is where it is on this machine, and URL opens it.
	Host  string `json:"host,omitempty"`
	URL   string `json:"url,omitempty"`
	Error string `json:"error,omitempty"` // the last forwarded connection's failure
}

// Forward forwards the workspace's port to 127.0.0.1:hostPort on this
// machine, and returns the port it listens on. hostPort 0 takes the
// same number as port if it is free, else any; a forward that exists is
// kept. source says who asked ("forwarded", "-p"). hostIP is where it
// listens: "" is 127.0.0.1, the only one the page can ask for; another
// is the command line's (-p ADDR:HOST:CTR).
func (p *Ports) Forward(port uint16, hostIP string, hostPort int, source string) (int, error) {
	if port == 0 || hostPort < 0 || hostPort > 65535 {
		return 0, fmt.Errorf("forward port %d to %d: ports are numbers from 1 to 65535", port, hostPort)
	}
	network := "tcp4"
	if hostIP == "" {
		hostIP = "127.0.0.1"
	} else if ip, err := netip.ParseAddr(hostIP); err != nil || ip.Zone() != "" {
		return 0, fmt.Errorf("forward port %d: %q is not an IP address", port, hostIP)
	} else if ip.Is6() {
		network = "tcp6"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, errors.New("the workspace's ports are no longer forwarded: it stopped")
	}
	if f := p.fwd[port]; f != nil {
		return f.l.Addr().(*net.TCPAddr).Port, nil
	}
	if len(p.fwd) >= maxForwards {
		return 0, fmt.Errorf("forward port %d: %d ports are forwarded already; stop one first", port, maxForwards)
	}
	var l net.Listener
	var err error
	if hostPort != 0 {
		l, err = net.Listen(network, net.JoinHostPort(hostIP, strconv.Itoa(hostPort)))
	} else if l, err = net.Listen(network, net.JoinHostPort(hostIP, strconv.Itoa(int(port)))); err != nil {
		l, err = net.Listen(network, net.JoinHostPort(hostIP, "0")) // taken (or privileged): another
	}
	if err != nil {
		return 0, fmt.Errorf("forward the workspace's port %d: %w (choose another host port)", port, err)
	}
	f := &forward{port: port, l: l, source: source, conns: map[net.Conn]bool{}}
	if p.fwd == nil {
		p.fwd = map[uint16]*forward{}
	}
	p.fwd[port] = f
	go p.accept(f)
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Unforward stops forwarding port, if source ("" any) forwarded it: its
// listener closes, and the connections it relays.
func (p *Ports) Unforward(port uint16, source string) bool {
	p.mu.Lock()
	f := p.fwd[port]
	if f != nil && source != "" && f.source != source {
		f = nil
	}
	if f != nil {
		delete(p.fwd, port)
	}
	p.mu.Unlock()
	if f != nil {
		f.close()
	}
	return f != nil
}

// Close ends every forward; none is made after.
func (p *Ports) Close() {
	p.mu.Lock()
	fs := p.fwd
	p.fwd, p.closed = nil, true
	p.mu.Unlock()
	for _, f := range fs {
		f.close()
	}
}

func (f *forward) close() {
	f.l.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
}

// accept relays each connection to f's listener through a tunnel.
func (p *Ports) accept(f *forward) {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return // closed
		}
		f.mu.Lock()
		full := len(f.conns) >= 2*maxForwardConns // both ends of each are in conns
		if !full {
			f.conns[c] = true
		}
		f.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		go func() {
			defer func() {
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
				c.Close()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			up, err := p.Tunnel(ctx, f.port)
			cancel()
			f.mu.Lock()
			f.lastErr = ""
			if err != nil {
				f.lastErr = err.Error()
			}
			f.mu.Unlock()
			if err != nil {
				return
			}
			f.mu.Lock()
			closed := f.closed
			f.conns[up] = true
			f.mu.Unlock()
			if closed {
				up.Close()
				return
			}
			relay(c, up)
			f.mu.Lock()
			delete(f.conns, up)
			f.mu.Unlock()
		}()
	}
}

// Tunnel opens a connection to port on the workspace's own loopback,
// through its server: what is written to it reaches the port, and what
// the port sends can be read.
func (p *Ports) Tunnel(ctx context.Context, port uint16) (net.Conn, error) {
	if port == 0 {
		return nil, errors.New("tunnel: ports are numbers from 1 to 65535")
	}
	c, err := p.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("tunnel to the workspace's port %d: %w", port, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	req := "GET /api/ports/tunnel?port=" + strconv.Itoa(int(port)) + " HTTP/1.1\r\nHost: cove-ide\r\nConnection: Upgrade\r\nUpgrade: " + tunnelUpgrade + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("tunnel to the workspace's port %d: %w", port, err)
	}
	status, err := readTunnelHead(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("tunnel to the workspace's port %d: %w", port, err)
	}
	if status != http.StatusSwitchingProtocols {
		// The reason, from the workspace: bounded, and text.
		// (The connection stays open after it: one read, briefly.)
		b := make([]byte, 512)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(b)
		c.Close()
		return nil, fmt.Errorf("tunnel to the workspace's port %d: %w: %d %s", port, errTunnel, status, visibleText(string(b[:n]), 200))
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// readTunnelHead reads the server's answer to a tunnel's request up to
// its blank line, a byte at a time so that nothing after it is taken
// (the connection's bytes follow), at most maxTunnelHead bytes, and
// returns its status.
func readTunnelHead(c net.Conn) (int, error) {
	var head []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if len(head) >= maxTunnelHead {
			return 0, fmt.Errorf("the workspace's server answered with more than %d bytes of header", maxTunnelHead)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, fmt.Errorf("the workspace's server did not answer: %w", err)
		}
		head = append(head, b[0])
	}
	line, _, _ := bytes.Cut(head, []byte("\r\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		return 0, fmt.Errorf("the workspace's server answered %q", visibleText(string(line), 80))
	}
	code, err := strconv.Atoi(f[1])
	if err != nil || code < 100 || code > 599 {
		return 0, fmt.Errorf("the workspace's server answered %q", visibleText(string(line), 80))
	}
	return code, nil
}

// visibleText is s from the workspace made fit to show: control
// characters dropped, at most n runes.
func visibleText(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || unicode.Is(unicode.Bidi_Control, r) {
			return -1
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return strings.TrimSpace(s)
}

// listening asks the workspace's server which ports it listens on.
func (p *Ports) listening(ctx context.Context) ([]Listening, error) {
	p.mu.Lock()
	if p.client == nil {
		p.client = &http.Client{Transport: &http.Transport{
			DialContext:            func(ctx context.Context, _, _ string) (net.Conn, error) { return p.Dial(ctx) },
			ResponseHeaderTimeout:  10 * time.Second,
			IdleConnTimeout:        30 * time.Second,
			MaxResponseHeaderBytes: 16 << 10,
		}}
	}
	client := p.client
	p.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://cove-ide/api/ports/listening", nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListing+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the workspace's server: %d %s", resp.StatusCode, visibleText(string(body), 200))
	}
	if len(body) > maxListing {
		return nil, fmt.Errorf("the workspace's server sent more than %d bytes of ports", maxListing)
	}
	var got struct {
		Ports []Listening `json:"ports"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("the workspace's server's ports: %w", err)
	}
	// What the workspace says is data: ports checked, names made text,
	// addresses parsed, all of it bounded.
	var out []Listening
	for _, l := range got.Ports {
		if l.Port == 0 || len(out) >= maxListed {
			continue
		}
		var addrs []string
		for _, a := range l.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil && len(addrs) < 8 {
				addrs = append(addrs, ip.String())
			}
		}
		out = append(out, Listening{Port: l.Port, Addresses: addrs, Process: visibleText(l.Process, 64), Pid: max(l.Pid, 0)})
	}
	return out, nil
}

// Entries is the Ports view's list: every port listened on, published
// or forwarded, by port. A server that does not answer leaves the
// listening ones out, and says so in err.
func (p *Ports) Entries(ctx context.Context) ([]PortEntry, error) {
	ls, err := p.listening(ctx)
	rows := map[uint16]*PortEntry{}
	row := func(port uint16) *PortEntry {
		if rows[port] == nil {
			rows[port] = &PortEntry{Port: port}
		}
		return rows[port]
	}
	for _, l := range ls {
		r := row(l.Port)
		r.Listening, r.Addresses, r.Process = true, l.Addresses, l.Process
	}
	for _, pub := range p.Published {
		if pub.Port == 0 || pub.HostPort == 0 {
			continue
		}
		r := row(pub.Port)
		if r.Source != "" {
			continue
		}
		host := pub.HostIP
		if ip, err := netip.ParseAddr(host); err != nil || ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		r.Source = pub.Source
		r.Host = net.JoinHostPort(host, strconv.Itoa(int(pub.HostPort)))
		r.URL = "http://" + r.Host + "/"
	}
	p.mu.Lock()
	for port, f := range p.fwd {
		r := row(port)
		if r.Source != "" && r.Source != f.source {
			continue
		}
		r.Source = f.source
		r.Host = f.l.Addr().String()
		if a := f.l.Addr().(*net.TCPAddr); a.IP.IsUnspecified() {
			r.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
		}
		r.URL = "http://" + r.Host + "/"
		f.mu.Lock()
		r.Error = f.lastErr
		f.mu.Unlock()
	}
	p.mu.Unlock()
	out := make([]PortEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b PortEntry) int { return int(a.Port) - int(b.Port) })
	return out, err
}

// ServeList serves GET /api/ports: {"ports": [PortEntry…], "error": "…"}.
func (p *Ports) ServeList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		rows, err := p.Entries(ctx)
		ans := map[string]any{"ports": rows}
		if err != nil {
			ans["error"] = "the workspace's listening ports are unknown: " + err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(ans)
	})
}

// ServeForward serves POST /api/ports/forward {"port": N} (forward it,
// answering its row) and DELETE /api/ports/forward?port=N (stop).
func (p *Ports) ServeForward() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			var req struct {
				Port json.Number `json:"port"`
			}
			if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
				http.Error(w, "want {\"port\": N}", http.StatusBadRequest)
				return
			}
			port, err := ParsePortNumber(req.Port.String())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			host, err := p.Forward(port, "", 0, "forwarded")
			if err != nil {
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(host))
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(PortEntry{Port: port, Source: "forwarded", Host: addr, URL: "http://" + addr + "/"})
		case http.MethodDelete:
			port, err := ParsePortNumber(r.URL.Query().Get("port"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if !p.Unforward(port, "forwarded") {
				http.Error(w, fmt.Sprintf("port %d is not forwarded on request", port), http.StatusNotFound)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "POST or DELETE", http.StatusMethodNotAllowed)
		}
	})
}
