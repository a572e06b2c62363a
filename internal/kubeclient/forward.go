package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/moby/spdystream"
)

// Port-forward speaks SPDY streams, tunnelled in a WebSocket's binary
// messages (Kubernetes 1.30; on by default from 1.31) so that proxies
// that know WebSocket but not SPDY pass it.
const forwardProtocol = "SPDY/3.1+portforward.k8s.io"

// streamTimeout bounds the wait for the server to take a new stream.
const streamTimeout = 30 * time.Second

// Forward opens one connection to port on the loopback of the Pod at
// podPath, on an upgraded connection of its own (one per stream pair:
// through the API server's tunnel, a second pair on a connection whose
// first pair ended waited for its reply until it timed out). Deadlines
// are not supported; callers close the connection instead.
func (c *Client) Forward(ctx context.Context, podPath string, port int) (net.Conn, error) {
	ws, err := c.dialWebSocket(ctx, podPath+"/portforward", nil, forwardProtocol)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
	sc, err := spdystream.NewConnection(nc, false)
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	go sc.Serve(spdystream.NoOpStreamHandler)
	stream := func(kind string) (*spdystream.Stream, error) {
		h := http.Header{}
		h.Set("streamType", kind)
		h.Set("port", strconv.Itoa(port))
		h.Set("requestID", "0")
		s, err := sc.CreateStream(h, nil, false)
		if err == nil {
			err = s.WaitTimeout(streamTimeout)
		}
		return s, err
	}
	errStream, err := stream("error")
	if err != nil {
		ws.CloseNow()
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	errStream.Close() // nothing to say on it
	data, err := stream("data")
	if err != nil {
		errStream.Reset()
		ws.CloseNow()
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	fc := &forwardConn{data: data, errStream: errStream, spdy: sc, ws: ws, errDone: make(chan struct{}), closed: make(chan struct{})}
	go func() {
		// The kubelet writes here when it cannot reach the port, and
		// closes it when the request ends.
		defer close(fc.errDone)
		msg, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		if len(msg) > 0 {
			fc.err = fmt.Errorf("port-forward to port %d: %s", port, msg)
			data.Reset()
		}
	}()
	return fc, nil
}

// forwardConn is a port-forward data stream as a net.Conn.
type forwardConn struct {
	data, errStream *spdystream.Stream
	spdy            *spdystream.Connection
	ws              *websocket.Conn
	errDone         chan struct{} // closed once err is known
	err             error
	closed          chan struct{} // closed by Close
	once            sync.Once
}

func (c *forwardConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err != nil {
		// The data stream's end may come before the error stream says
		// why: wait a little for it, so a refused port is an error and
		// not an empty answer. Not when closed here: the reader is
		// done with it (a silent connection given up on, whose error
		// stream will say nothing).
		select {
		case <-c.errDone:
			if c.err != nil {
				return n, c.err
			}
		case <-c.closed:
		case <-time.After(5 * time.Second):
		}
	}
	return n, err
}

func (c *forwardConn) Write(b []byte) (int, error) { return c.data.Write(b) }

func (c *forwardConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.data.Reset()
		c.errStream.Reset()
		c.spdy.Close()
		// The stream's own upgraded connection, at once: a close
		// handshake would wait for an answer a dropped network never
		// brings.
		c.ws.CloseNow()
	})
	return nil
}

// CloseWrite says the client sends no more (HTTP's half close).
func (c *forwardConn) CloseWrite() error { return c.data.Close() }

func (c *forwardConn) LocalAddr() net.Addr              { return forwardAddr{} }
func (c *forwardConn) RemoteAddr() net.Addr             { return forwardAddr{} }
func (c *forwardConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (c *forwardConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (c *forwardConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

var errNoDeadline = errors.New("port-forward streams have no deadlines")

type forwardAddr struct{}

func (forwardAddr) Network() string { return "port-forward" }
func (forwardAddr) String() string  { return "port-forward" }
