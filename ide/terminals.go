package ide

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// terminals serves GET /api/term/{id} as a WebSocket: "new" starts a
// shell, an existing id (with ?offset=N) reattaches to one; an id it does
// not know (a shell long exited, or from before the workspace restarted)
// is closed with code closeNoTerminal, so that the page starts a new one.
// DELETE /api/term/{id} ends a shell and all it runs (a tab closed).
type terminals struct {
	dir   string
	shell []string
	// keepExited is how long an exited shell (its last output and exit
	// status) stays for a page that comes back; default keepExited.
	keepExited time.Duration
	// keepalive is how often a terminal's WebSocket is pinged (keepalive.go).
	keepalive time.Duration
	mu        sync.Mutex
	terms     map[string]*Terminal
}

const (
	keepExited      = time.Minute
	closeNoTerminal = 4404 // a WebSocket close code of the application's range
)

func (s *terminals) serve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var t *Terminal
	s.mu.Lock()
	if id != "new" {
		t = s.terms[id]
	}
	s.mu.Unlock()
	// The origin was checked by the host proxy; checking again here costs
	// nothing (the proxy keeps the Host header, so it matches).
	announceKeepalive(w, s.keepalive)
	c, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer c.CloseNow()
	if id != "new" && t == nil {
		c.Close(closeNoTerminal, "no such terminal")
		return
	}
	ctx := r.Context()
	send := func(op byte, p []byte) error {
		return c.Write(ctx, websocket.MessageBinary, append([]byte{op}, p...))
	}
	if t == nil {
		b := make([]byte, 6)
		rand.Read(b)
		cmd := exec.Command(s.shell[0], s.shell[1:]...)
		cmd.Dir = s.dir
		cmd.Env = append(os.Environ(), "TERM=xterm-256color", "COLORTERM=truecolor")
		if t, err = StartTerminal(hex.EncodeToString(b), cmd, 80, 24); err != nil {
			c.Close(websocket.StatusInternalError, "start the shell: "+err.Error())
			return
		}
		s.mu.Lock()
		s.terms[t.ID] = t
		s.mu.Unlock()
		go s.forget(t)
		hello, _ := json.Marshal(map[string]string{"id": t.ID})
		if send(opHello, hello) != nil {
			return
		}
	}
	from, _ := strconv.ParseUint(r.URL.Query().Get("offset"), 10, 64)
	cl, from := t.subscribe(from)
	defer t.unsubscribe(cl)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer cancel()
		for {
			_, msg, err := c.Read(ctx)
			if err != nil || len(msg) == 0 {
				return
			}
			switch msg[0] {
			case opInput:
				t.Input(msg[1:])
			case opResize:
				var sz struct{ Cols, Rows uint16 }
				if json.Unmarshal(msg[1:], &sz) == nil && sz.Cols > 0 && sz.Rows > 0 {
					t.Resize(sz.Cols, sz.Rows)
				}
			case opAck:
				if len(msg) == 9 {
					t.ack(cl, binary.BigEndian.Uint64(msg[1:]))
				}
			}
		}
	}()
	go keepalive(ctx, c, s.keepalive) // the reads above see its pongs
	if err := t.stream(ctx, cl, from, send); err == nil {
		c.Close(websocket.StatusNormalClosure, "the shell exited")
	}
}

// forget drops t a while after its shell exited: each holds a ring of
// output, and a page may open many over a day.
func (s *terminals) forget(t *Terminal) {
	<-t.Exited()
	keep := s.keepExited
	if keep == 0 {
		keep = keepExited
	}
	time.Sleep(keep)
	s.mu.Lock()
	delete(s.terms, t.ID)
	s.mu.Unlock()
}

// close ends terminal id's shell and forgets it.
func (s *terminals) close(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	t := s.terms[r.PathValue("id")]
	delete(s.terms, r.PathValue("id"))
	s.mu.Unlock()
	if t == nil {
		http.Error(w, "no such terminal", http.StatusNotFound)
		return
	}
	t.Close()
	w.WriteHeader(http.StatusNoContent)
}
