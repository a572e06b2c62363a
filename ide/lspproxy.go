package ide

import (
	"context"
	"errors"
	"net/http"

	"github.com/coder/websocket"
)

// lspPrefix is the path of the language servers' WebSockets.
const lspPrefix = "/api/lsp/"

// relayLSP is the host's half of a language server's WebSocket: unlike
// the other forwarded ones, whose bytes pass through as they are, its
// messages are taken apart at WebSocket framing (and no further: what
// they say is never read here) so that each is bounded, both ways, by
// maxLSPMessage. A language server, or the workspace's server in front of
// it, that sends a bigger one has the connection closed: neither the
// launcher nor the page holds it.
func (p *Proxy) relayLSP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	up, _, err := websocket.Dial(ctx, "ws://cove-ide"+r.URL.RequestURI(), &websocket.DialOptions{
		HTTPClient:   &http.Client{Transport: p.transport},
		Subprotocols: []string{wsProtocol},
	})
	if err != nil {
		http.Error(w, noAnswer(err), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	page, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer page.CloseNow()
	defer p.socketOpen()()
	up.SetReadLimit(maxLSPMessage)
	page.SetReadLimit(maxLSPMessage)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Each direction until it ends; the first end closes the other side
	// with the same code and reason, or says the message was too big.
	ends := make(chan lspEnd, 2)
	pass := func(from, to *websocket.Conn, limitCode websocket.StatusCode) {
		for {
			typ, msg, err := from.Read(ctx)
			if err != nil {
				ends <- endOf(err, limitCode)
				return
			}
			if err := to.Write(ctx, typ, msg); err != nil {
				ends <- lspEnd{websocket.StatusGoingAway, "closed"}
				return
			}
		}
	}
	go pass(up, page, closeTooLarge)
	go pass(page, up, websocket.StatusMessageTooBig)
	e := <-ends
	// Closed before the context ends: a Read whose context is cancelled
	// (the other direction's) drops its connection at once, and the
	// close frame with the code would not reach the page.
	page.Close(e.code, closeReason(e.why))
	up.Close(e.code, closeReason(e.why))
}

// endOf is how a read's failure is passed on: a close frame's code and
// reason as they were; a message over the limit as limitCode.
func endOf(err error, limitCode websocket.StatusCode) lspEnd {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Code == websocket.StatusNoStatusRcvd || ce.Code == websocket.StatusAbnormalClosure || ce.Code == websocket.StatusTLSHandshake {
			ce.Code = websocket.StatusGoingAway // not to be sent in a close frame
		}
		return lspEnd{ce.Code, ce.Reason}
	}
	if errors.Is(err, websocket.ErrMessageTooBig) {
		return lspEnd{limitCode, "a language server message over the 8 MiB limit: the connection was closed"}
	}
	return lspEnd{websocket.StatusGoingAway, "the connection broke"}
}
