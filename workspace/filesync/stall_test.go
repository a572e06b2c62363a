package filesync

import (
	"context"
	"errors"
	"io"
	"net"
	"net/rpc"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// link is one stream to a side that a test can drop as a network does
// that loses packets with no reset (a laptop on another Wi-Fi, a NAT
// entry lost): from then on nothing arrives either way, and nothing
// closes it. Written bytes vanish, or with block the writes stop, as
// once the kernel's buffers are full.
type link struct {
	net.Conn
	silent chan struct{} // closed once dropped
	closed chan struct{}
	block  bool
	delay  time.Duration // before each write: a slow link
	once   sync.Once
}

func (l *link) Read(p []byte) (int, error) {
	n, err := l.Conn.Read(p)
	select {
	case <-l.silent:
		<-l.closed // what arrived is lost, and nothing more comes
		return 0, io.ErrClosedPipe
	default:
		return n, err
	}
}

func (l *link) Write(p []byte) (int, error) {
	select {
	case <-l.silent:
		if l.block {
			<-l.closed
			return 0, io.ErrClosedPipe
		}
		return len(p), nil
	default:
	}
	time.Sleep(l.delay)
	return l.Conn.Write(p)
}

func (l *link) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Conn.Close()
}

// droppingSide serves a side over links, which drop on demand.
type droppingSide struct {
	t     *testing.T
	serve func(io.ReadWriteCloser)
	block bool
	delay time.Duration
	mu    sync.Mutex
	links []*link
	ends  []net.Conn
}

func (d *droppingSide) dial(context.Context) (io.ReadWriteCloser, error) {
	a, b := net.Pipe()
	l := &link{Conn: a, silent: make(chan struct{}), closed: make(chan struct{}), block: d.block, delay: d.delay}
	d.mu.Lock()
	d.links, d.ends = append(d.links, l), append(d.ends, b)
	d.mu.Unlock()
	go d.serve(b)
	return l, nil
}

// drop makes every link open now silent, forever.
func (d *droppingSide) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.links {
		close(l.silent)
	}
	d.links = nil
}

func (d *droppingSide) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range d.ends {
		b.Close()
	}
}

// linkSaid records what Link hears.
type linkSaid struct {
	mu   sync.Mutex
	said []string
}

func (l *linkSaid) link(err error, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.said = append(l.said, "lost: "+err.Error())
	} else {
		l.said = append(l.said, "back")
	}
}

func (l *linkSaid) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.said
	l.said = nil
	return s
}

const testStall = 1200 * time.Millisecond

// TestRemoteNoticesASilentStream: a stream that goes silent with no
// reset, between rounds or in the middle of one sending a file, is
// given up within StallTimeout (not the minute client-go's heartbeat
// takes), said once, and a new one carries on: nothing lost.
func TestRemoteNoticesASilentStream(t *testing.T) {
	for _, block := range []bool{false, true} {
		name := "bytes vanish"
		if block {
			name = "writes block"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t)
			side := &droppingSide{t: t, block: block}
			tree := p.s.Remote
			side.serve = func(rw io.ReadWriteCloser) { Serve(rw, tree) }
			defer side.close()
			said := &linkSaid{}
			r := DialRemote(side.dial, RemoteOptions{StallTimeout: testStall, Link: said.link})
			defer r.Close()
			p.s.Remote = r
			p.write(p.local, "a.txt", "one")
			p.sync()

			side.drop()
			// A file large enough that its request does not fit a
			// silent stream's buffers, saved after the drop.
			big := strings.Repeat("x", 4<<20)
			p.write(p.local, "big.txt", big)
			p.write(p.rem, "there.txt", "made there")
			start := time.Now()
			_, err := p.s.Sync(context.Background())
			took := time.Since(start)
			switch {
			case err == nil:
				// The call that noticed was made once more, at once, on a
				// new stream: the round went through.
			case !errors.Is(err, ErrAway):
				t.Fatalf("the round after the drop: %v", err)
			}
			// Not before the timeout, and far from client-go's minute;
			// a loaded machine (two cores, a VM beside) took 4.2 s.
			if took < testStall || took > testStall*10 {
				t.Errorf("the silence was noticed after %v, want about %v", took, testStall)
			}
			if err != nil {
				p.sync()
			}
			if p.read(p.rem, "big.txt") != big || p.read(p.local, "there.txt") != "made there" || p.read(p.rem, "a.txt") != "one" {
				t.Fatal("not carried after the drop")
			}
			if s := said.take(); len(s) != 2 || !strings.Contains(s[0], "no answer for") || s[1] != "back" {
				t.Errorf("said %q, want lost (no answer) then back", s)
			}
		})
	}
}

// slowSide is a side whose scans after the first take a while, as a
// large tree's do; it is a cove before Ping.
type slowSide struct {
	scan  time.Duration
	calls atomic.Int32
}

func (s *slowSide) List(_ struct{}, out *Listing) error {
	if s.calls.Add(1) > 1 {
		time.Sleep(s.scan)
	}
	*out = Listing{Entries: map[string]Entry{"a.txt": {Mode: 0o644, Size: 1, Sum: Sum([]byte("a"))}}}
	return nil
}

type slowSideWithPing struct{ *slowSide }

func (slowSideWithPing) Ping(_ struct{}, _ *struct{}) error { return nil }

// TestRemoteWaitsForSlowWork: a server at work longer than StallTimeout
// (a scan of a large tree), this cove's or one before Ping, and a file
// sent over a slow link for longer than it, are not taken for a silent
// stream.
func TestRemoteWaitsForSlowWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		rcvr any
	}{
		{"a server with Ping", slowSideWithPing{&slowSide{scan: 3 * testStall}}},
		{"a server before Ping", &slowSide{scan: 3 * testStall}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			side := &droppingSide{t: t, serve: func(rw io.ReadWriteCloser) {
				srv := rpc.NewServer()
				srv.RegisterName("Tree", tc.rcvr)
				srv.ServeConn(rw)
			}}
			defer side.close()
			said := &linkSaid{}
			r := DialRemote(side.dial, RemoteOptions{StallTimeout: testStall, Link: said.link})
			defer r.Close()
			for i := range 2 { // the first on a new stream, the second on one that answered
				if l, err := r.Scan(context.Background()); err != nil || len(l.Entries) != 1 {
					t.Fatalf("scan %d: %+v %v", i, l, err)
				}
			}
			if s := said.take(); len(s) != 0 {
				t.Errorf("said %q of a slow server", s)
			}
			if len(side.ends) != 1 {
				t.Errorf("%d streams opened, want 1", len(side.ends))
			}
		})
	}
	t.Run("a slow link", func(t *testing.T) {
		p := newPair(t)
		tree := p.s.Remote
		// 32 KiB each 100 ms: 320 KiB/s, a 1 MiB file in over 3 s.
		side := &droppingSide{t: t, delay: 100 * time.Millisecond, serve: func(rw io.ReadWriteCloser) { Serve(rw, tree) }}
		defer side.close()
		said := &linkSaid{}
		r := DialRemote(side.dial, RemoteOptions{StallTimeout: testStall, Link: said.link})
		defer r.Close()
		p.s.Remote = r
		p.sync()
		big := strings.Repeat("y", 1<<20)
		p.write(p.local, "big.txt", big)
		start := time.Now()
		p.sync()
		if took := time.Since(start); took < 2*testStall {
			t.Fatalf("the link was not slow: %v", took)
		}
		if p.read(p.rem, "big.txt") != big {
			t.Fatal("not carried")
		}
		if s := said.take(); len(s) != 0 {
			t.Errorf("said %q of a slow link", s)
		}
	})
}
