package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/rpc"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSyncOverAStream: the remote side answers over one stream, as a
// Pod's `cove sync-serve` does over exec.
func TestSyncOverAStream(t *testing.T) {
	p := newPair(t)
	a, b := net.Pipe()
	go Serve(b, p.s.Remote)
	r := NewRemote(a)
	defer r.Close()
	p.s.Remote = r
	p.write(p.local, "a/b.txt", "over the stream")
	p.write(p.rem, "made-there", "back")
	p.sync()
	if p.read(p.rem, "a/b.txt") != "over the stream" || p.read(p.local, "made-there") != "back" {
		t.Fatal("not carried over the stream")
	}
	os.Remove(filepath.Join(p.local, "a/b.txt"))
	if rep := p.sync(); len(rep.Removed) != 1 || p.read(p.rem, "a/b.txt") == "over the stream" {
		t.Fatalf("a deletion over the stream: %+v", rep)
	}
}

// lying is a hostile workspace's side: its scan names paths outside.
type lying struct{}

func (lying) Scan(_ struct{}, out *map[string]Entry) error {
	*out = map[string]Entry{"../../etc/cron.d/x": {Mode: 0o644, Size: 1, Sum: Sum([]byte("x"))}}
	return nil
}

func TestRemoteRefusesALyingSide(t *testing.T) {
	a, b := net.Pipe()
	srv := rpc.NewServer()
	srv.RegisterName("Tree", lying{})
	go srv.ServeConn(b)
	r := NewRemote(a)
	defer r.Close()
	if _, err := r.Scan(context.Background()); err == nil || !strings.Contains(err.Error(), "refused path") {
		t.Fatalf("a scan naming ../../etc: %v", err)
	}
}

// flooding answers a scan with more than cove reads for one answer.
type flooding struct{}

func (flooding) Read(p string, out *[]byte) error {
	*out = make([]byte, 2<<20)
	return nil
}

func TestRemoteBoundsAnAnswer(t *testing.T) {
	a, b := net.Pipe()
	srv := rpc.NewServer()
	srv.RegisterName("Tree", flooding{})
	go srv.ServeConn(b)
	r := NewRemote(a)
	r.max = 1 << 20
	defer r.Close()
	if _, err := r.Read(context.Background(), "big"); err == nil || !strings.Contains(err.Error(), "larger than cove reads") {
		t.Fatalf("an answer over the budget: %v", err)
	}
}

// server is a side served over streams a DialRemote opens, which a test
// can break: the streams cut (a server killed), new ones refused (an API
// server down).
type server struct {
	t       *testing.T
	tree    Tree
	mu      sync.Mutex
	conns   []net.Conn
	refused bool
	dials   int
}

func (s *server) dial(context.Context) (io.ReadWriteCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dials++
	if s.refused {
		return nil, errors.New("connection refused")
	}
	a, b := net.Pipe()
	s.conns = append(s.conns, b)
	go Serve(b, s.tree)
	return a, nil
}

// cut ends the open streams; with refuse, new ones fail until allowed.
func (s *server) cut(refuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
	s.conns = nil
	s.refused = refuse
}

func (s *server) dialed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

// cutAfter is the workspace's side, which breaks the stream after its nth
// write, done (its answer lost) and the workspace then unreachable.
type cutAfter struct {
	Tree
	n   atomic.Int32
	cut func()
}

func (c *cutAfter) Write(ctx context.Context, p string, e Entry, data []byte) error {
	err := c.Tree.Write(ctx, p, e, data)
	if c.n.Add(-1) == 0 {
		c.cut()
	}
	return err
}

// TestRemoteReopens: a broken stream is opened again, at once when the
// other side is reachable, and backing off while it is not; it is said
// once when it breaks and once when it is back; a round cut half way
// loses nothing and makes no conflict: the next one finishes it.
func TestRemoteReopens(t *testing.T) {
	p := newPair(t)
	srv := &server{t: t}
	cut := &cutAfter{Tree: p.s.Remote}
	srv.tree = cut
	var mu sync.Mutex
	var links []string
	r := DialRemote(srv.dial, RemoteOptions{Link: func(err error, away time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			links = append(links, "lost: "+err.Error())
		} else {
			links = append(links, "back")
		}
	}})
	defer r.Close()
	p.s.Remote = r
	said := func() []string {
		mu.Lock()
		defer mu.Unlock()
		l := links
		links = nil
		return l
	}

	// A side never reached is not a lost one: the first round fails,
	// and Link hears nothing, nor when it is reached.
	srv.cut(true)
	if _, err := p.s.Sync(context.Background()); !errors.Is(err, ErrAway) {
		t.Fatalf("a first round with the side unreachable: %v", err)
	}
	srv.mu.Lock()
	srv.refused, srv.dials = false, 0
	srv.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // the backoff

	p.write(p.local, "a.txt", "one")
	p.write(p.rem, "b.txt", "two")
	p.sync()
	if p.read(p.rem, "a.txt") != "one" || p.read(p.local, "b.txt") != "two" || srv.dialed() != 1 {
		t.Fatalf("the first round: %d dials", srv.dialed())
	}
	if l := said(); len(l) != 0 {
		t.Errorf("said %q before the side was ever reached", l)
	}

	// The server goes (killed in the Pod) between rounds: the next round
	// opens a new stream and goes through.
	srv.cut(false)
	p.write(p.local, "a.txt", "one, after the cut")
	p.write(p.rem, "c.txt", "three")
	if rep, err := p.s.Sync(context.Background()); err != nil || len(rep.ToRemote) != 1 || len(rep.ToLocal) != 1 {
		t.Fatalf("the round after the server went: %+v %v", rep, err)
	}
	if p.read(p.rem, "a.txt") != "one, after the cut" || p.read(p.local, "c.txt") != "three" {
		t.Fatal("not carried after the server went")
	}
	if l := said(); len(l) != 2 || !strings.HasPrefix(l[0], "lost: ") || l[1] != "back" {
		t.Errorf("said %q, want lost then back", l)
	}

	// Cut half way through a round, and unreachable for a while: the
	// round fails, with ErrAway; so do the next ones, fast, and the
	// attempts back off.
	for i := range 6 {
		p.write(p.local, fmt.Sprintf("new/%d.txt", i), fmt.Sprintf("local %d", i))
	}
	os.Remove(filepath.Join(p.local, "b.txt"))
	p.write(p.rem, "from-there.txt", "made there")
	cut.n.Store(3)
	cut.cut = func() { srv.cut(true) }
	if _, err := p.s.Sync(context.Background()); !errors.Is(err, ErrAway) {
		t.Fatalf("a round cut half way: %v", err)
	}
	dials := srv.dialed()
	start := time.Now()
	for time.Since(start) < time.Second {
		if _, err := p.s.Sync(context.Background()); !errors.Is(err, ErrAway) {
			t.Fatalf("a round while the side is unreachable: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := srv.dialed() - dials; n < 2 || n > 5 {
		t.Errorf("%d attempts in a second while unreachable: want a few (250 ms, doubling)", n)
	}
	if l := said(); len(l) != 1 || !strings.HasPrefix(l[0], "lost: ") {
		t.Errorf("said %q while unreachable, want lost once", l)
	}

	// Back: the next round finishes what the cut one began, nothing lost,
	// nothing deleted, no conflict.
	srv.mu.Lock()
	srv.refused = false
	srv.mu.Unlock()
	var rep Report
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if rep, err = p.s.Sync(context.Background()); !errors.Is(err, ErrAway) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(rep.Conflicts) != 0 {
		t.Fatalf("the round after the return: %+v %v", rep, err)
	}
	for i := range 6 {
		name := fmt.Sprintf("new/%d.txt", i)
		if l, r := p.read(p.local, name), p.read(p.rem, name); l != fmt.Sprintf("local %d", i) || r != l {
			t.Errorf("%s: here %q, there %q", name, l, r)
		}
	}
	if p.read(p.local, "from-there.txt") != "made there" || p.read(p.local, "a.txt") != "one, after the cut" {
		t.Error("a file was lost")
	}
	if _, err := os.Stat(filepath.Join(p.rem, "b.txt")); !os.IsNotExist(err) {
		t.Error("the deletion made before the cut was not carried")
	}
	if !p.sync().Empty() {
		t.Error("the round after did something")
	}
	if l := said(); len(l) != 1 || l[0] != "back" {
		t.Errorf("said %q on the return, want back once", l)
	}
}

// olderSide is a cove before List, still serving in a Pod: Scan alone.
type olderSide struct{}

func (olderSide) Scan(_ struct{}, out *map[string]Entry) error {
	*out = map[string]Entry{"a.txt": {Mode: 0o644, Size: 1, Sum: Sum([]byte("a"))}}
	return nil
}

// TestRemoteAsksAnOlderSideToScan: a side that does not know List is
// asked for its entries as before, not failed.
func TestRemoteAsksAnOlderSideToScan(t *testing.T) {
	a, b := net.Pipe()
	srv := rpc.NewServer()
	srv.RegisterName("Tree", olderSide{})
	go srv.ServeConn(b)
	r := NewRemote(a)
	defer r.Close()
	l, err := r.Scan(context.Background())
	if err != nil || len(l.Entries) != 1 || l.Entries["a.txt"].Sum != Sum([]byte("a")) || l.Unreadable != nil {
		t.Fatalf("an older side's scan: %+v %v", l, err)
	}
}

// lyingUnreadable is a hostile workspace's side that says it cannot read
// a path outside the project.
type lyingUnreadable struct{}

func (lyingUnreadable) List(_ struct{}, out *Listing) error {
	*out = Listing{Unreadable: []Unreadable{{Path: "../../home", Dir: true, Why: "permission denied"}}}
	return nil
}

func TestRemoteRefusesALyingUnreadable(t *testing.T) {
	a, b := net.Pipe()
	srv := rpc.NewServer()
	srv.RegisterName("Tree", lyingUnreadable{})
	go srv.ServeConn(b)
	r := NewRemote(a)
	defer r.Close()
	if _, err := r.Scan(context.Background()); err == nil || !strings.Contains(err.Error(), "refused path") {
		t.Fatalf("a scan naming ../../home unreadable: %v", err)
	}
}

// listing answers a scan with the entries it holds.
type listing map[string]Entry

func (l listing) List(_ struct{}, out *Listing) error {
	*out = Listing{Entries: l}
	return nil
}

func scanOf(t *testing.T, l listing) error {
	t.Helper()
	a, b := net.Pipe()
	srv := rpc.NewServer()
	srv.RegisterName("Tree", l)
	go srv.ServeConn(b)
	r := NewRemote(a)
	defer r.Close()
	_, err := r.Scan(context.Background())
	return err
}

// TestRemoteRefusesAFlood: a scan listing more than cove syncs is refused
// whole, by count.
func TestRemoteRefusesAFlood(t *testing.T) {
	l := listing{}
	for i := 0; i <= maxEntries; i++ {
		l[fmt.Sprint(i)] = Entry{}
	}
	if err := scanOf(t, l); err == nil || !strings.Contains(err.Error(), "more than cove syncs") {
		t.Fatalf("a scan of %d entries: %v", len(l), err)
	}
}

// TestRemoteRefusesPathsUnderALink: a walk never lists a path under a
// symlink or a file, so a listing that does is a lie, refused whole.
func TestRemoteRefusesPathsUnderALink(t *testing.T) {
	link := Entry{Mode: fs.ModeSymlink | 0o777, Size: 4, Sum: ".git"}
	for _, l := range []listing{
		{"g": link, "g/hooks/pre-commit": {Mode: 0o755}},
		{"a": {Mode: fs.ModeDir | 0o755}, "a/f": {Mode: 0o644}, "a/f/x": {Mode: 0o644}},
	} {
		if err := scanOf(t, l); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("%v: %v", l, err)
		}
	}
	if err := scanOf(t, listing{"a": {Mode: fs.ModeDir | 0o755}, "a/f": {Mode: 0o644}, "l": link}); err != nil {
		t.Errorf("an honest listing: %v", err)
	}
}
