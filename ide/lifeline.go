package ide

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/coder/websocket"
)

// The launcher's own line to its windows: GET /api/launcher, a WebSocket
// each page holds to the launcher itself (never forwarded to the
// workspace), behind the proxy's token, Host and Origin checks. It says
// at once
//
//	{"type":"hello","dir":DIR}
//
// (DIR: Proxy.Dir, for the page to show the command that starts the
// workspace again), and when the launcher ends on purpose, before it
// stops serving,
//
//	{"type":"stopping","reason":"…","close":bool[,"running":true]}
//
// then closes with StatusGoingAway. close asks app windows to close
// themselves (the launcher was stopped by its user); without it they show
// that the workspace stopped. A launcher that dies without a word (killed,
// crashed) closes the socket: pages tell that from a connection refused.
const lifelinePath = "/api/launcher"

// Farewell is what Stopping tells the windows.
type Farewell struct {
	// Reason says in a few words why the workspace stopped, as the page
	// shows it ("cove up was interrupted").
	Reason string `json:"reason"`
	// Close asks app windows to close themselves.
	Close bool `json:"close"`
	// Running says the workspace runs on without this launcher (one
	// started with --detach was stopped): `cove up` serves it again.
	Running bool `json:"running,omitempty"`
}

type lifeline struct {
	mu       sync.Mutex
	windows  map[*websocket.Conn]bool
	farewell *Farewell // once the launcher is on its way out
}

func (p *Proxy) serveLifeline(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context()) // the page only listens
	l := &p.life
	l.mu.Lock()
	bye := l.farewell
	if bye == nil {
		if l.windows == nil {
			l.windows = map[*websocket.Conn]bool{}
		}
		l.windows[c] = true
	}
	l.mu.Unlock()
	if bye != nil {
		sayGoodbye(ctx, c, *bye)
		return
	}
	defer func() {
		l.mu.Lock()
		delete(l.windows, c)
		l.mu.Unlock()
	}()
	// A window while its line is open, though its sockets to the
	// workspace close (a network lost for a while, reconnecting).
	defer p.socketOpen()()
	hello, _ := json.Marshal(map[string]string{"type": "hello", "dir": p.Dir})
	if c.Write(ctx, websocket.MessageText, hello) != nil {
		return
	}
	<-ctx.Done()
}

// Stopping tells every window on the launcher that it is ending on
// purpose, and why; a window that connects afterwards is told at once.
// It returns when each has been told, or when ctx ends (a window that
// does not read is not waited for). Call it before the server stops; it
// is safe to call more than once (the first farewell stands) and
// concurrently with serving.
func (p *Proxy) Stopping(ctx context.Context, bye Farewell) {
	l := &p.life
	l.mu.Lock()
	if l.farewell == nil {
		l.farewell = &bye
	}
	bye = *l.farewell
	windows := make([]*websocket.Conn, 0, len(l.windows))
	for c := range l.windows {
		windows = append(windows, c)
	}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range windows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sayGoodbye(ctx, c, bye)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func sayGoodbye(ctx context.Context, c *websocket.Conn, bye Farewell) {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Farewell
	}{"stopping", bye})
	if c.Write(ctx, websocket.MessageText, b) == nil {
		c.Close(websocket.StatusGoingAway, "the launcher is stopping")
	}
}
