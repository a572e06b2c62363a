// Package netcut is a test's network between a client and a server: a
// TCP relay on 127.0.0.1 that breaks the connections through it the ways
// real networks do, without disturbing the server other tests share.
// Cut closes them (a server restarted, a network gone, with resets); Drop
// leaves them silent for good (a laptop on another Wi-Fi, a NAT entry
// lost, a VPN down and up: packets lost, no reset).
package netcut

import (
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// Relay passes connections to its upstream address. Make one with New;
// it is closed, with every connection through it, when the test ends.
// Its methods are safe for concurrent use.
type Relay struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	conns    map[net.Conn]*atomic.Bool // each end of a connection, and whether it was dropped
	down     bool
}

// New starts a relay to upstream (host:port) on a free loopback port.
func New(tb testing.TB, upstream string) *Relay {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Relay{ln: ln, upstream: upstream, conns: map[net.Conn]*atomic.Bool{}}
	tb.Cleanup(func() { ln.Close(); r.Cut(false) })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(conn)
		}
	}()
	return r
}

// Addr is where the relay listens (127.0.0.1:PORT).
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) serve(conn net.Conn) {
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		conn.Close() // refused, as by a server not listening
		return
	}
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		r.mu.Unlock()
		conn.Close()
		return
	}
	dropped := &atomic.Bool{}
	r.conns[conn], r.conns[up] = dropped, dropped
	r.mu.Unlock()
	go func() {
		relay(up, conn, dropped)
		if !dropped.Load() {
			up.Close()
		}
	}()
	relay(conn, up, dropped)
	if !dropped.Load() {
		conn.Close()
	}
}

// relay copies from src to dst until src ends; once dropped, it reads on
// and passes nothing on: the bytes are lost, and src's end is not said to
// dst either.
func relay(dst, src net.Conn, dropped *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !dropped.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Cut closes every connection through the relay; with down, new ones
// are refused until Up.
func (r *Relay) Cut(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for conn := range r.conns {
		conn.Close()
	}
	clear(r.conns)
	r.down = down
}

// Up lets new connections through again after Cut(true).
func (r *Relay) Up() {
	r.mu.Lock()
	r.down = false
	r.mu.Unlock()
}

// Drop makes every connection open now a black hole, as a lost NAT
// entry does: whatever either end sends is lost, and neither end hears
// of it, not even when the other closes. New connections go through.
func (r *Relay) Drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.conns {
		d.Store(true)
	}
}

// Kubeconfig writes a copy of the kubeconfig at path whose clusters are
// reached through the relay (their API server must be its upstream, with
// 127.0.0.1 among its certificate's names), in a test directory, and
// returns the copy's path.
func (r *Relay) Kubeconfig(tb testing.TB, path string) string {
	tb.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + r.Addr()
	}
	out := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		tb.Fatal(err)
	}
	return out
}
