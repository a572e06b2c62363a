package ide

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// Proxy is the host side of the IDE: it listens on loopback, lets in only
// requests that carry the launch's token, name the host as 127.0.0.1 or
// localhost with its port (DNS rebinding), and, for WebSockets and
// changes (POST, PUT, DELETE), come from its own origin. The UI's static
// files, which hold no secret, are the only answers given without the
// token: the page has to load to read the token from its address. It
// serves the UI itself, from this binary, and forwards only the API
// (/api/…) to the in-container server's Unix socket, whose answers are
// data: the workspace can never put a page or a script on the trusted
// origin, nor learn the token, which is taken off each request. Its
// zero value is not usable: use NewProxy. A Proxy is safe for concurrent
// use.
type Proxy struct {
	// Token is the per-launch secret. The page reads it from its URL
	// (?token=…) and sends it with each request: in the X-Cove-Token
	// header, or for a WebSocket as the subprotocol cove-token.TOKEN.
	// It is never a cookie: cookies are not kept apart by port (RFC 6265
	// §8.5), so a page the workspace serves on another port of this host
	// would be sent it.
	Token string
	// Dir is the project's directory on the host, which the page shows in
	// the command that starts the workspace again once it stopped; set it
	// before serving.
	Dir  string
	port int
	rp   *httputil.ReverseProxy
	// transport is rp's: its idle connections are dropped once one
	// went silent.
	transport *http.Transport

	ui   http.Handler
	life lifeline // the windows' line to the launcher (lifeline.go)

	socket string // the server's socket ("": reached by a dial function)

	mu      sync.Mutex
	local   map[string]http.Handler // paths served on this side
	sockets int                     // WebSockets open through the proxy and lifelines: windows on the workspace
	seen    bool                    // whether one ever was
	since   time.Time               // when the last one closed
}

const (
	// tokenHeader carries the token on the page's requests; a header
	// the page adds also makes a browser ask first (a CORS preflight,
	// which this proxy never allows) before another origin sends it.
	tokenHeader = "X-Cove-Token"
	// wsProtocol is the subprotocol the page's WebSockets speak, the one
	// the answer names; a browser cannot add a header to a WebSocket, so
	// the token goes with it as a second, offered one: tokenProtocol
	// followed by the token.
	wsProtocol    = "cove"
	tokenProtocol = "cove-token."
)

// NewProxy makes a proxy to the server listening on socket, for a listener
// on 127.0.0.1:port, with a fresh random token.
func NewProxy(socket string, port int) *Proxy {
	p := NewProxyDial(func(ctx context.Context) (net.Conn, error) { return DialSocket(ctx, socket) }, port)
	p.socket = socket
	return p
}

// NewProxyDial makes a proxy to the server dial reaches (a workspace
// elsewhere: a port-forward stream to a Pod), for a listener on
// 127.0.0.1:port, with a fresh random token.
func NewProxyDial(dial func(context.Context) (net.Conn, error), port int) *Proxy {
	b := make([]byte, 24)
	rand.Read(b)
	target, _ := url.Parse("http://cove-ide")
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &Proxy{Token: hex.EncodeToString(b), port: port, rp: rp, ui: newStatic()}
	p.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := dial(ctx)
			if err != nil {
				return nil, &dialError{err}
			}
			return newLiveConn(c), nil
		},
		// The server's answers begin at once; one that does not went
		// over a connection that went silent (see keepalive.go), and the
		// idle ones with it are dropped.
		ResponseHeaderTimeout: answerWait,
	}
	rp.Transport = p.transport
	rp.ModifyResponse = func(resp *http.Response) error {
		p.watchUpgrade(resp)
		return dataOnly(resp)
	}
	// The window hears it; Go's log line would land on the user's
	// terminal, where cove up runs.
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			p.transport.CloseIdleConnections()
		}
		http.Error(w, noAnswer(err), http.StatusBadGateway)
	}
	return p
}

// noAnswer is the 502's text: what went wrong, in the proxy's words
// only. A transport error may quote what the workspace's server sent (a
// malformed answer's first bytes), which the user's page is not to show
// as cove's; the dial's own errors (DialSocket's, a port-forward's) are
// cove's and say what the user can do.
func noAnswer(err error) string {
	why := "its answer could not be passed on (not HTTP, or not what was asked)"
	var de *dialError
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		why = "the request was given up (its client closed the connection)"
	case errors.As(err, &de):
		why = de.Error()
	case errors.As(err, &ne) && ne.Timeout():
		why = fmt.Sprintf("no answer within %s", answerWait)
	}
	return "cove: the workspace's server does not answer (has the workspace stopped?): " + why
}

// dialError marks an error of the proxy's dial, not of the answer.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// answerWait bounds how long the proxy waits for the beginning of the
// server's answer once a request is sent: the server's answers (a file,
// a directory's entries, an upgrade) begin within milliseconds.
const answerWait = keepaliveMissed*keepaliveEvery + 2*time.Second

// DialSocket connects to the Unix socket at path, which lies in a
// directory the workspace can write: the socket itself is opened first,
// without following a symlink, checked to be a socket, and dialled by
// that handle, so a path swapped inside the container (a symlink to a
// host daemon's socket) is never dialled. Each call opens it anew: a
// server that was started again is found, a stale one is not kept.
func DialSocket(ctx context.Context, path string) (net.Conn, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: &os.PathError{Op: "open", Path: path, Err: err}}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("dial %s: not a socket: the workspace replaced it", path)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
}

// uiPolicy is the UI's Content-Security-Policy: its own scripts only,
// nothing inline, no frames, no plugins, connections to itself.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " +
	"font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; manifest-src 'self'; base-uri 'none'; " +
	"form-action 'none'; frame-ancestors 'none'; object-src 'none'"

// dataPolicy is every forwarded answer's: opened as a page, it runs
// nothing and can reach nothing.
const dataPolicy = "default-src 'none'; sandbox; frame-ancestors 'none'"

// dataTypes are the content types the in-container API answers with;
// any other (text/html, an SVG, none) is sent as opaque bytes.
var dataTypes = []string{"application/json", "text/plain", "application/octet-stream", "text/event-stream"}

// dataHeaders are the headers of the workspace's answers that reach the
// browser: what the API says with them. Any other acts on the launcher's
// origin: Set-Cookie, Clear-Site-Data (the page's storage, the token in
// it, gone), Location (a change the page sent, sent again elsewhere),
// Refresh, Link, the CORS headers.
var dataHeaders = []string{"Content-Type", "Content-Length", "Etag", "Last-Modified", "Cache-Control", "Date"}

// upgradeHeaders are a WebSocket handshake's, kept on a 101 answer.
var upgradeHeaders = []string{"Connection", "Upgrade", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions"}

// dataOnly makes an answer from the workspace data: whatever the server
// in the container says, the browser neither renders it as a page nor
// runs it as a script, and it sets nothing on the launcher's origin.
func dataOnly(resp *http.Response) error {
	kept := http.Header{}
	for k, v := range resp.Header {
		if slices.Contains(dataHeaders, k) || resp.StatusCode == http.StatusSwitchingProtocols && slices.Contains(upgradeHeaders, k) {
			kept[k] = v
		}
	}
	resp.Header = kept
	h := resp.Header
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", dataPolicy)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		// The browser offered cove and the token's protocol; the
		// server saw only cove (see stripToken), and whatever it
		// names, the answer names what the page speaks, or none.
		h.Del("Sec-Websocket-Protocol")
		if resp.Request != nil && slices.Contains(offeredProtocols(resp.Request.Header), wsProtocol) {
			h.Set("Sec-Websocket-Protocol", wsProtocol)
		}
		return nil
	}
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if !slices.Contains(dataTypes, mt) {
		h.Set("Content-Type", "application/octet-stream")
	}
	return nil
}

// Handle serves path on the host side instead of forwarding it, behind
// the same checks (the agent panel: the model is called from the host, so
// keys never enter the container). It is safe to call while serving (a
// route the launcher has only later), but a route is best added before
// the URL is shown.
func (p *Proxy) Handle(path string, h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local == nil {
		p.local = map[string]http.Handler{}
	}
	p.local[path] = h
}

// URL is the address to open, token included: the page keeps the token
// in its session's storage and takes it out of the address.
func (p *Proxy) URL() string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port) + "/?token=" + p.Token
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.hostAllowed(r.Host) {
		http.Error(w, "cove: wrong Host header", http.StatusForbidden)
		return
	}
	p.mu.Lock()
	h, local := p.local[r.URL.Path]
	p.mu.Unlock()
	// The UI's files hold no secret and are served to anyone who names
	// this host, so that a page opened without its token loads and says
	// what to do; everything else needs the token. A token that is sent
	// must be right, whatever is asked: a page knows by its favicon
	// whether this launcher is still the one that gave it its token.
	static := !local && r.URL.Path != lifelinePath && !strings.HasPrefix(r.URL.Path, "/api/") && !isWebSocket(r) && !unsafeMethod(r.Method)
	t, sent := requestToken(r)
	if sent && !p.tokenOK(t) || !sent && !static {
		http.Error(w, "cove: this workspace needs its token: open the URL cove printed", http.StatusUnauthorized)
		return
	}
	if isWebSocket(r) && !p.originAllowed(r.Header.Get("Origin")) {
		http.Error(w, "cove: cross-origin WebSocket refused", http.StatusForbidden)
		return
	}
	// A change asked by another origin is refused even with the token
	// (which such a page should never hold: a page on another port of
	// this host is the same site, and a simple POST needs no CORS
	// preflight). (A
	// browser sends Origin with every POST, PUT and DELETE; a client
	// without one, such as curl, has to hold the token anyway.)
	if unsafeMethod(r.Method) {
		if o := r.Header.Get("Origin"); o != "" && !p.originAllowed(o) {
			http.Error(w, "cove: a change from another origin refused", http.StatusForbidden)
			return
		}
	}
	stripToken(r) // the token stays on this side
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.URL.Path == lifelinePath {
		w.Header().Set("Content-Security-Policy", dataPolicy)
		p.serveLifeline(w, r)
		return
	}
	if local {
		w.Header().Set("Content-Security-Policy", dataPolicy)
		h.ServeHTTP(w, r)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Security-Policy", uiPolicy)
		p.ui.ServeHTTP(w, r)
		return
	}
	if isWebSocket(r) && strings.HasPrefix(r.URL.Path, lspPrefix) {
		p.relayLSP(w, r) // message by message, each bounded
		return
	}
	if isWebSocket(r) {
		defer p.socketOpen()()
		r = traceUpstream(r) // watched for silence (keepalive.go)
	}
	p.rp.ServeHTTP(w, r) // for a WebSocket, until it closes
}

// socketOpen counts a WebSocket of a window as open, until the function
// it returns is called.
func (p *Proxy) socketOpen() (closed func()) {
	p.mu.Lock()
	p.sockets++
	p.seen = true
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.sockets--
		p.since = time.Now()
		p.mu.Unlock()
	}
}

// Unattended says how long no window has been connected, once one was:
// every page of the IDE holds a WebSocket while it is open, to the
// launcher itself (its lifeline, which the workspace's connection going
// away does not close) and to the workspace. It is zero while one is,
// or before the first.
func (p *Proxy) Unattended() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen || p.sockets > 0 {
		return 0
	}
	return time.Since(p.since)
}

// requestToken is the token a request carries, in its header or, for a
// WebSocket, as an offered subprotocol; sent says whether it carries one.
// A cookie is never read: an old one in a browser's profile is ignored.
func requestToken(r *http.Request) (t string, sent bool) {
	if v := r.Header.Values(tokenHeader); len(v) > 0 {
		return v[0], true
	}
	for _, p := range offeredProtocols(r.Header) {
		if t, ok := strings.CutPrefix(p, tokenProtocol); ok {
			return t, true
		}
	}
	return "", false
}

// offeredProtocols are the WebSocket subprotocols a request offers.
func offeredProtocols(h http.Header) []string {
	var ps []string
	for _, v := range h.Values("Sec-Websocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// stripToken takes the token out of a request before it is served or
// forwarded: the server in the workspace must never learn it. The
// cookies go too: they are the browser's for any port of this host.
func stripToken(r *http.Request) {
	r.Header.Del(tokenHeader)
	r.Header.Del("Cookie")
	ps := offeredProtocols(r.Header)
	r.Header.Del("Sec-Websocket-Protocol")
	kept := slices.DeleteFunc(ps, func(p string) bool { return strings.HasPrefix(p, tokenProtocol) })
	if len(kept) > 0 {
		r.Header.Set("Sec-Websocket-Protocol", strings.Join(kept, ", "))
	}
}

// acceptOptions are the WebSocket servers' (in the workspace and on
// this side): they name the subprotocol the page offers, as a browser
// requires of an answer to a request that offered some.
func acceptOptions() *websocket.AcceptOptions {
	return &websocket.AcceptOptions{Subprotocols: []string{wsProtocol}}
}

func (p *Proxy) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(p.Token)) == 1
}

func (p *Proxy) hostAllowed(host string) bool {
	port := strconv.Itoa(p.port)
	return host == "127.0.0.1:"+port || host == "localhost:"+port
}

func (p *Proxy) originAllowed(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Scheme == "http" && p.hostAllowed(u.Host)
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
