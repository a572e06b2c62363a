package mcpclient

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"sync"
	"time"

	"github.com/cove-sh/cove/internal/tailbuf"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// A Transport reaches one server: the SDK's transport, and a way to ask
// what the server said on its standard error when it went wrong.
type Transport struct {
	sdk.Transport
	// Stderr, if set, returns the end of what the server wrote on its
	// standard error (for an error message when it dies).
	Stderr func() string
}

// HostTransport reaches c from this machine, as the user configured it:
// a stdio server runs here with the environment plus c.Env; an HTTP
// server is dialled from here, its Headers sent with each request. For
// the user's own configs only (never a project's).
func HostTransport(c ServerConfig) Transport {
	switch c.Kind() {
	case "http", "sse":
		return httpTransport(c, &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext})
	}
	cmd := exec.Command(c.Command, c.Args...)
	cmd.Env = os.Environ()
	for _, k := range sortedKeys(c.Env) {
		cmd.Env = append(cmd.Env, k+"="+c.Env[k])
	}
	return commandTransport(cmd)
}

// Runner makes a command that runs argv inside the workspace, with env
// (K=V) added and its standard input and output piped to the caller: cove
// exec -i. It is how a project's servers run where the project's code
// does, and never on the host.
type Runner func(env []string, argv ...string) *exec.Cmd

// RelayArgs is the command, run in the workspace, that connects its
// standard input and output to a TCP address (cove's hidden mcp-relay, from
// the read-only /.cove/cove): what WorkspaceTransport dials through.
func RelayArgs(addr string) []string { return []string{"/.cove/cove", "mcp-relay", addr} }

// WorkspaceTransport reaches c from inside the workspace, through run: a
// stdio server is run there (with c.Env in its environment); an HTTP
// server is dialled from the workspace's network, each connection a
// relay run there, so that "http://localhost:3000" is the workspace's own
// port and a project's config can never reach the host's network.
func WorkspaceTransport(c ServerConfig, run Runner) Transport {
	switch c.Kind() {
	case "http", "sse":
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			cmd := run(nil, RelayArgs(addr)...)
			return commandConn(ctx, cmd, addr)
		}
		// No proxy: the host's proxy settings must not route a project's
		// requests, which go out from the workspace's side only.
		return httpTransport(c, &http.Transport{Proxy: nil, DialContext: dial, MaxIdleConnsPerHost: 4})
	}
	var env []string
	for _, k := range sortedKeys(c.Env) {
		env = append(env, k+"="+c.Env[k])
	}
	return commandTransport(run(env, append([]string{c.Command}, c.Args...)...))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func commandTransport(cmd *exec.Cmd) Transport {
	tail := tailbuf.New(4 << 10)
	cmd.Stderr = tail
	return Transport{Transport: &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, Stderr: tail.String}
}

func httpTransport(c ServerConfig, rt *http.Transport) Transport {
	client := &http.Client{Transport: headerTransport{rt, c.Headers}}
	if c.Kind() == "sse" {
		return Transport{Transport: &sdk.SSEClientTransport{Endpoint: c.URL, HTTPClient: client}}
	}
	return Transport{Transport: &sdk.StreamableClientTransport{Endpoint: c.URL, HTTPClient: client, MaxRetries: 2}}
}

// headerTransport adds the configured headers to each request, and
// bounds each message of the answer (see boundedBody).
type headerTransport struct {
	rt      http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := h.rt.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = &boundedBody{rc: resp.Body, max: MaxMessage}
	}
	return resp, err
}

// MaxMessage is the most one message from an HTTP server may hold: a JSON
// answer, or one event of a stream. The SDK reads a JSON answer whole and
// an event until its end, and a project's server (it runs in the
// workspace) could send one without end into the launcher's memory; a
// stdio server's messages have the SDK's own cap, of this size.
const MaxMessage = sdk.DefaultMaxLineLength

// boundedBody fails a read once a message passes max bytes: an event of
// a stream ends at a blank line, and the count starts again there.
type boundedBody struct {
	rc   io.ReadCloser
	max  int
	n    int  // bytes since the last blank line
	nl   bool // the last byte (a \r aside) was a newline
	fail bool
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.fail {
		return 0, errMessageTooLarge
	}
	n, err := b.rc.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '\n' && b.nl:
			b.n = 0
		case c == '\n':
			b.nl = true
		case c != '\r':
			b.nl = false
		}
		if b.n++; b.n > b.max {
			b.fail = true
			return 0, errMessageTooLarge
		}
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

var errMessageTooLarge = fmt.Errorf("the server sent a message over %d bytes", MaxMessage)

// commandConn is a net.Conn over a command's standard input and output:
// a TCP connection made by a relay in the workspace.
func commandConn(ctx context.Context, cmd *exec.Cmd, addr string) (net.Conn, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	tail := tailbuf.New(1 << 10)
	cmd.Stderr = tail
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dial %s from the workspace: %w", addr, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	c := &cmdConn{in: in, out: out, cmd: cmd, done: done, addr: addr}
	// The relay says nothing until it is connected: its first byte is
	// "+" once the workspace's side has the connection, else its error.
	first := make([]byte, 1)
	read := make(chan error, 1)
	go func() { _, err := io.ReadFull(out, first); read <- err }()
	select {
	case err := <-read:
		if err != nil || first[0] != '+' {
			c.Close()
			<-done
			return nil, fmt.Errorf("dial %s from the workspace: %s", addr, firstLine(tail.String(), "the relay ended"))
		}
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	}
	return c, nil
}

func firstLine(s, orElse string) string {
	for i, r := range s {
		if r == '\n' {
			s = s[:i]
			break
		}
	}
	if s == "" {
		return orElse
	}
	return s
}

type cmdConn struct {
	in   io.WriteCloser
	out  io.ReadCloser
	cmd  *exec.Cmd
	done chan struct{}
	addr string
	once sync.Once
}

func (c *cmdConn) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *cmdConn) Write(p []byte) (int, error) { return c.in.Write(p) }

// Close ends the relay: its input closes, and it is killed if it has not
// gone within a second.
func (c *cmdConn) Close() error {
	c.once.Do(func() {
		c.in.Close()
		go func() {
			select {
			case <-c.done:
			case <-time.After(time.Second):
				c.cmd.Process.Kill()
			}
		}()
	})
	return nil
}

func (c *cmdConn) LocalAddr() net.Addr                { return relayAddr("workspace") }
func (c *cmdConn) RemoteAddr() net.Addr               { return relayAddr(c.addr) }
func (c *cmdConn) SetDeadline(t time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(t time.Time) error { return nil }

type relayAddr string

func (a relayAddr) Network() string { return "workspace" }
func (a relayAddr) String() string  { return string(a) }
