package ide

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Keepalive: a workspace reached over a network (a Pod, by port-forward
// through the API server) may go silent without a reset: a laptop on
// another Wi-Fi, a NAT entry lost, a VPN down and up. The page's
// WebSockets to the launcher are local and stay up, so the page would wait
// on a terminal that never answers again, and client-go's own heartbeat
// notices only after a minute.
//
// So the in-container server pings each of its WebSockets every
// keepaliveEvery, and says so in the upgrade's answer (keepaliveHeader,
// in seconds). The launcher's proxy then counts silence on that
// forwarded connection: no byte from the server for keepaliveMissed
// pings, and it closes the connection, as a broken one would be. The page
// connects again at once (a terminal replays what it missed), through a
// new port-forward, and the proxy drops its idle forwarded connections,
// which went silent with it, so the next request (a save) takes a new one
// too. A server before this (still running in a Pod) says nothing and is
// not watched: as before, it is noticed when the connection breaks.

// keepaliveHeader is the upgrade answer's header in which the server says
// how often, in seconds, it pings the WebSocket: a whole number from a
// server in a Pod ("2"); a fraction only from a test's server, which a
// proxy before fractions ignores (it leaves the connection unwatched).
const keepaliveHeader = "Cove-Keepalive"

// keepaliveEvery is how often the server pings each WebSocket: a few
// bytes each way, and a drop noticed within keepaliveMissed of them.
const keepaliveEvery = 2 * time.Second

// noKeepalive is the server's pinging on a Unix socket: none. Its one
// client is the launcher on the same machine, whose connection cannot go
// silent without a close; pings every 2 s on each WebSocket would only
// wake the server, the launcher and the page's network stack of an idle
// window.
const noKeepalive time.Duration = -1

// keepaliveMissed is how many pings' time the proxy waits for a byte of
// a watched connection: 8 s with the server's 2 s, so the page is back
// within about 10 s of a drop, and a ping delayed behind a burst of
// output (written in order, on a busy link) is not taken for one.
const keepaliveMissed = 4

// pongWait is how long the server waits for a ping's answer before it
// ends the WebSocket: its half of a dropped connection (a terminal's
// subscription, a watch of the whole tree) would otherwise stay until
// the API server's TCP gives up on it, many minutes later. The page
// answers pings in the browser's network stack, even in a background
// tab.
const pongWait = 30 * time.Second

// announceKeepalive says in the upgrade's answer that the server will
// ping every every: call it before websocket.Accept.
func announceKeepalive(w http.ResponseWriter, every time.Duration) {
	if every == noKeepalive {
		return
	}
	every = pingEvery(every)
	w.Header().Set(keepaliveHeader, strconv.FormatFloat(every.Seconds(), 'f', -1, 64))
}

// keepalive pings c every every (keepaliveEvery but in tests) until ctx
// ends or a ping goes unanswered for pongWait, and then closes c.
// Something must be reading c meanwhile (CloseRead, or the handler's
// reads): that is where pongs are seen.
func keepalive(ctx context.Context, c *websocket.Conn, every time.Duration) {
	if every == noKeepalive {
		return
	}
	t := time.NewTicker(pingEvery(every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, pongWait)
		err := c.Ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.CloseNow()
			}
			return
		}
	}
}

// pingEvery is every, or keepaliveEvery when unset.
func pingEvery(every time.Duration) time.Duration {
	if every <= 0 {
		return keepaliveEvery
	}
	return every
}

// liveConn is a forwarded connection that notes when its last byte
// arrived.
type liveConn struct {
	net.Conn
	last   atomic.Int64 // UnixNano of the last read that brought bytes
	closed chan struct{}
	once   sync.Once
}

func newLiveConn(c net.Conn) *liveConn {
	l := &liveConn{Conn: c, closed: make(chan struct{})}
	l.last.Store(time.Now().UnixNano())
	return l
}

func (l *liveConn) Read(b []byte) (int, error) {
	n, err := l.Conn.Read(b)
	if n > 0 {
		l.last.Store(time.Now().UnixNano())
	}
	return n, err
}

func (l *liveConn) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Conn.Close()
}

// CloseWrite passes on a half close (a port-forward stream has one).
func (l *liveConn) CloseWrite() error {
	if cw, ok := l.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// watch closes l once no byte arrived on it for silence, and then calls
// gone; it returns when l is closed.
func (l *liveConn) watch(silence time.Duration, gone func()) {
	t := time.NewTicker(silence / 8)
	defer t.Stop()
	for {
		select {
		case <-l.closed:
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, l.last.Load())) >= silence {
			l.Close()
			gone()
			return
		}
	}
}

// upstreamKey is the request context's key for the forwarded connection a
// proxied WebSocket goes over.
type upstreamKey struct{}

// upstream is where the proxy learns which connection a WebSocket's
// upgrade went over.
type upstream struct {
	mu   sync.Mutex
	conn net.Conn
}

// traceUpstream makes r's forwarded connection known to watchUpgrade.
func traceUpstream(r *http.Request) *http.Request {
	u := &upstream{}
	ctx := context.WithValue(r.Context(), upstreamKey{}, u)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		u.mu.Lock()
		u.conn = i.Conn
		u.mu.Unlock()
	}})
	return r.WithContext(ctx)
}

// watchUpgrade watches the connection of an upgrade the server answered
// with keepaliveHeader (see Keepalive). The server's word is bounded: it
// can only ask to be watched more or less closely, and only its own
// connection is closed.
func (p *Proxy) watchUpgrade(resp *http.Response) {
	every, err := strconv.ParseFloat(resp.Header.Get(keepaliveHeader), 64)
	resp.Header.Del(keepaliveHeader)
	// Bounded below so that a server cannot have its connection watched
	// (and closed) at a rate that costs the launcher; a test's 10 ms is
	// the least.
	if resp.StatusCode != http.StatusSwitchingProtocols || err != nil || !(every >= 0.01 && every <= 60) {
		return
	}
	u, _ := resp.Request.Context().Value(upstreamKey{}).(*upstream)
	if u == nil {
		return
	}
	u.mu.Lock()
	l, _ := u.conn.(*liveConn)
	u.mu.Unlock()
	if l == nil {
		return
	}
	go l.watch(keepaliveMissed*time.Duration(every*float64(time.Second)), p.transport.CloseIdleConnections)
}
