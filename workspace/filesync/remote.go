package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/rpc"
	"sync/atomic"
)

// The other side runs where the workspace is (`cove sync-serve DIR` in a
// Pod) and answers over one stream (an exec's stdin and stdout) with
// net/rpc: gob-encoded calls, one at a time.

// maxEntries bounds a scan's answer: a side that claims more is refused.
const maxEntries = 1 << 20

// Serve answers the calls of a Remote on rw for the tree t, until rw
// ends.
func Serve(rw io.ReadWriteCloser, t Tree) error {
	srv := rpc.NewServer()
	if err := srv.RegisterName("Tree", &service{t: t}); err != nil {
		return err
	}
	srv.ServeConn(rw)
	return nil
}

// service is Tree as net/rpc methods.
type service struct{ t Tree }

// WriteArgs are a Write's arguments.
type WriteArgs struct {
	Path  string
	Entry Entry
	Data  []byte
}

// Scan is Tree.Scan.
func (s *service) Scan(_ struct{}, out *map[string]Entry) (err error) {
	*out, err = s.t.Scan(context.Background())
	return err
}

// Read is Tree.Read.
func (s *service) Read(p string, out *[]byte) (err error) {
	if err := checkPath(p); err != nil {
		return err
	}
	*out, err = s.t.Read(context.Background(), p)
	return err
}

// Write is Tree.Write.
func (s *service) Write(a WriteArgs, _ *struct{}) error {
	return s.t.Write(context.Background(), a.Path, a.Entry, a.Data)
}

// Remove is Tree.Remove.
func (s *service) Remove(p string, _ *struct{}) error {
	return s.t.Remove(context.Background(), p)
}

// maxAnswer bounds what one answer may take on the stream: a file at
// MaxFileSize, or a scan at maxEntries, and room for gob's framing.
const maxAnswer = 256 << 20

// Remote is a side reached over a stream, whose answers are not trusted:
// the paths it names are checked, its sizes bounded, and no answer may
// take more than maxAnswer bytes of the stream (gob alone would take up to
// a gigabyte for one message).
type Remote struct {
	c      *rpc.Client
	budget *budgetReader
	max    int64 // maxAnswer; smaller in tests
}

// NewRemote talks to a Serve on rw.
func NewRemote(rw io.ReadWriteCloser) *Remote {
	b := &budgetReader{r: rw}
	b.left.Store(maxAnswer)
	return &Remote{c: rpc.NewClient(struct {
		io.Reader
		io.WriteCloser
	}{b, rw}), budget: b, max: maxAnswer}
}

// budgetReader fails once more than its budget is read; each call sets it
// anew (calls are one at a time).
type budgetReader struct {
	r    io.Reader
	left atomic.Int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	left := b.left.Load()
	if left <= 0 {
		return 0, errors.New("the workspace's answer is larger than cove reads")
	}
	n, err := b.r.Read(p[:min(int64(len(p)), left)])
	b.left.Add(-int64(n))
	return n, err
}

// Close ends the stream.
func (r *Remote) Close() error { return r.c.Close() }

func (r *Remote) call(ctx context.Context, method string, args, reply any) error {
	r.budget.left.Store(r.max)
	call := r.c.Go("Tree."+method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
		if errors.Is(call.Error, rpc.ErrShutdown) || errors.Is(call.Error, io.ErrUnexpectedEOF) {
			return fmt.Errorf("the workspace's side of the sync went away: %w", call.Error)
		}
		return call.Error
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Scan is Tree.Scan.
func (r *Remote) Scan(ctx context.Context) (map[string]Entry, error) {
	var out map[string]Entry
	if err := r.call(ctx, "Scan", struct{}{}, &out); err != nil {
		return nil, err
	}
	if len(out) > maxEntries {
		return nil, fmt.Errorf("the workspace lists %d files, more than cove syncs (%d)", len(out), maxEntries)
	}
	for p, e := range out {
		if err := checkPath(p); err != nil {
			return nil, err
		}
		if e.Size < 0 || e.Mode&^(0o777|modeSymlink) != 0 {
			return nil, fmt.Errorf("sync: the workspace says %q is %v, %d bytes", p, e.Mode, e.Size)
		}
	}
	return out, nil
}

// Read is Tree.Read.
func (r *Remote) Read(ctx context.Context, p string) ([]byte, error) {
	var out []byte
	if err := r.call(ctx, "Read", p, &out); err != nil {
		return nil, err
	}
	if len(out) > MaxFileSize {
		return nil, fmt.Errorf("sync: the workspace sent %d bytes for %s", len(out), p)
	}
	return out, nil
}

// Write is Tree.Write.
func (r *Remote) Write(ctx context.Context, p string, e Entry, data []byte) error {
	return r.call(ctx, "Write", WriteArgs{Path: p, Entry: e, Data: data}, &struct{}{})
}

// Remove is Tree.Remove.
func (r *Remote) Remove(ctx context.Context, p string) error {
	return r.call(ctx, "Remove", p, &struct{}{})
}
