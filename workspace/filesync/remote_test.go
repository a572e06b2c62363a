package filesync

import (
	"context"
	"net"
	"net/rpc"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
