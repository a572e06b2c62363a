package kube

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Forwarder opens connections to a port inside the Pod through the API
// server (port-forward), each on an upgraded connection of its own, with
// no port opened on the user's machine: another local user could connect
// to one, where the launcher's proxy checks its token and origin first. A
// lost connection (a laptop that slept, an API server restart) costs only
// the requests on it; the next Dial upgrades a new one.
type Forwarder struct {
	pod  *Pod
	port int

	next atomic.Int64
}

// Forward returns a Forwarder to port in the Pod (on its loopback).
func (p *Pod) Forward(port int) *Forwarder { return &Forwarder{pod: p, port: port} }

// dial upgrades a new connection to the API server for one forwarded
// connection. One upgraded connection per stream pair: through the API
// server's WebSocket tunnel, a second pair on a connection whose first
// pair ended waited for its reply until it timed out.
func (f *Forwarder) dial() (httpstream.Connection, error) {
	k := f.pod.cluster
	req := k.rc.Post().Resource("pods").Namespace(f.pod.Namespace).Name(f.pod.Name).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(k.rest)
	if err != nil {
		return nil, err
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", req.URL())
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), k.rest)
	if err != nil {
		return nil, err
	}
	d := portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s/%s: %w", f.pod.Namespace, f.pod.Name, err)
	}
	return conn, nil
}

// Dial opens a connection to the port.
func (f *Forwarder) Dial() (net.Conn, error) {
	conn, err := f.dial()
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(f.next.Add(1), 10)
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(f.port))
	h.Set(corev1.PortForwardRequestIDHeader, id)
	errStream, err := conn.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	errStream.Close() // nothing to say on it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	c := &streamConn{data: data, conn: conn, errStream: errStream, errDone: make(chan struct{}), closed: make(chan struct{})}
	go func() {
		// The kubelet writes here when it cannot reach the port, and
		// closes it when the request ends.
		defer close(c.errDone)
		msg, _ := io.ReadAll(io.LimitReader(errStream, 4096))
		if len(msg) > 0 {
			c.err = fmt.Errorf("port-forward to port %d: %s", f.port, msg)
			data.Reset()
		}
	}()
	return c, nil
}

// streamConn is a port-forward data stream as a net.Conn. Deadlines are
// not supported; callers close the connection instead.
type streamConn struct {
	data, errStream httpstream.Stream
	conn            httpstream.Connection
	errDone         chan struct{} // closed once err is known
	err             error
	closed          chan struct{} // closed by Close
	once            sync.Once
}

func (c *streamConn) Read(b []byte) (int, error) {
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

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

func (c *streamConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.data.Reset()
		c.conn.RemoveStreams(c.data, c.errStream)
		c.conn.Close() // the stream's own upgraded connection
	})
	return nil
}

// CloseWrite says the client sends no more (HTTP's half close).
func (c *streamConn) CloseWrite() error { return c.data.Close() }

func (c *streamConn) LocalAddr() net.Addr              { return forwardAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return forwardAddr{} }
func (c *streamConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (c *streamConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (c *streamConn) SetWriteDeadline(time.Time) error { return errNoDeadline }

var errNoDeadline = errors.New("port-forward streams have no deadlines")

type forwardAddr struct{}

func (forwardAddr) Network() string { return "port-forward" }
func (forwardAddr) String() string  { return "port-forward" }
