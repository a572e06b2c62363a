package ide

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is the host side of the IDE: it listens on loopback, lets in only
// requests that carry the launch's token, name the host as 127.0.0.1 or
// localhost with its port (DNS rebinding), and, for WebSockets and
// changes (POST, PUT, DELETE), come from its own origin; and forwards them to the in-container server's Unix
// socket. Its zero value is not usable: use NewProxy. A Proxy is safe for
// concurrent use.
type Proxy struct {
	// Token is the per-launch secret. It is accepted once in the URL
	// (?token=…), which sets an HttpOnly, SameSite=Strict cookie, and
	// from the cookie afterwards.
	Token string
	port  int
	rp    *httputil.ReverseProxy

	local map[string]http.Handler // paths served on this side

	mu      sync.Mutex
	sockets int       // WebSockets open through the proxy: windows on the workspace
	seen    bool      // whether one ever was
	since   time.Time // when the last one closed
}

const tokenCookie = "cove_token"

// NewProxy makes a proxy to the server listening on socket, for a listener
// on 127.0.0.1:port, with a fresh random token.
func NewProxy(socket string, port int) *Proxy {
	b := make([]byte, 24)
	rand.Read(b)
	target, _ := url.Parse("http://cove-ide")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &Proxy{Token: hex.EncodeToString(b), port: port, rp: rp}
}

// Handle serves path on the host side instead of forwarding it, behind
// the same checks (the agent panel: the model is called from the host, so
// keys never enter the container). Call it before serving.
func (p *Proxy) Handle(path string, h http.Handler) {
	if p.local == nil {
		p.local = map[string]http.Handler{}
	}
	p.local[path] = h
}

// URL is the address to open, token included.
func (p *Proxy) URL() string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port) + "/?token=" + p.Token
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.hostAllowed(r.Host) {
		http.Error(w, "cove: wrong Host header", http.StatusForbidden)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" && p.tokenOK(t) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: p.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		// Take the token out of the address bar and the history.
		q := r.URL.Query()
		q.Del("token")
		r.URL.RawQuery = q.Encode()
		http.Redirect(w, r, r.URL.RequestURI(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(tokenCookie)
	if err != nil || !p.tokenOK(c.Value) {
		http.Error(w, "cove: this workspace needs its token: open the URL cove printed", http.StatusUnauthorized)
		return
	}
	if isWebSocket(r) && !p.originAllowed(r.Header.Get("Origin")) {
		http.Error(w, "cove: cross-origin WebSocket refused", http.StatusForbidden)
		return
	}
	// A page on another port of this host is the same site, so the
	// SameSite cookie goes with its requests, and a simple POST needs no
	// CORS preflight: a change asked by another origin is refused. (A
	// browser sends Origin with every POST, PUT and DELETE; a client
	// without one, such as curl, has to hold the token anyway.)
	if unsafeMethod(r.Method) {
		if o := r.Header.Get("Origin"); o != "" && !p.originAllowed(o) {
			http.Error(w, "cove: a change from another origin refused", http.StatusForbidden)
			return
		}
	}
	r.Header.Del("Cookie") // the token stays on this side
	if h, ok := p.local[r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	if isWebSocket(r) {
		p.mu.Lock()
		p.sockets++
		p.seen = true
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			p.sockets--
			p.since = time.Now()
			p.mu.Unlock()
		}()
	}
	p.rp.ServeHTTP(w, r) // for a WebSocket, until it closes
}

// Unattended says how long no window has been connected, once one was:
// every page of the IDE holds a WebSocket while it is open. It is zero
// while one is, or before the first.
func (p *Proxy) Unattended() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen || p.sockets > 0 {
		return 0
	}
	return time.Since(p.since)
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
