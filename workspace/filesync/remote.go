package filesync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/rpc"
	"path"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
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

// List is Tree.Scan.
func (s *service) List(_ struct{}, out *Listing) (err error) {
	*out, err = s.t.Scan(context.Background())
	return err
}

// Scan is Tree.Scan as a cove before List asks for it: the entries
// alone.
func (s *service) Scan(_ struct{}, out *map[string]Entry) error {
	l, err := s.t.Scan(context.Background())
	*out = l.Entries
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

// Ping answers at once: a Remote asks it, beside a call of its own that
// is slow to answer, to tell a server at work (a scan of a large tree)
// from a stream gone silent. net/rpc answers each call as soon as it is
// done, so this answer does not wait for the other call's. A cove before
// Ping answers it with an error (no such method), as fast and as good a
// sign that the stream is alive.
func (s *service) Ping(_ struct{}, _ *struct{}) error { return nil }

// maxAnswer bounds what one answer may take on the stream: a file at
// MaxFileSize, or a scan at maxEntries, and room for gob's framing.
const maxAnswer = 256 << 20

// answerBudget is what one call's answer may take: a scan's up to
// maxAnswer, a read's a file at MaxFileSize, any other's a short error.
// A workspace that answers more is cut off where that ends, so what it
// can make the host hold is what the call needs, not maxAnswer.
func answerBudget(method string) int64 {
	const framing = 64 << 10 // gob's type descriptions, a header, an error's text
	switch method {
	case "Read":
		return MaxFileSize + framing
	case "List", "Scan":
		return maxAnswer
	}
	return framing
}

// ErrAway is in the errors of calls made while the stream to the other
// side is broken: the Remote opens a new one (see DialRemote), and the
// Syncer's next round goes on from where the base says.
var ErrAway = errors.New("the workspace's side of the sync is away")

// Dialer opens a new stream to the other side's Serve. The stream must
// outlive ctx, which bounds only the opening; the Remote closes it.
type Dialer func(ctx context.Context) (io.ReadWriteCloser, error)

// RemoteOptions are a re-opening Remote's. The zero value works.
type RemoteOptions struct {
	// Link hears the stream's state: once with why when it breaks, once
	// with nil when a new one answers, with how long it was away. It is
	// called with the Remote's call in progress: it must not call the
	// Remote. The default is to say nothing.
	Link func(err error, away time.Duration)
	// MaxBackoff is the longest wait between two attempts to re-open.
	// The default is 1 second: an attempt is one exec, cheap to make and
	// to refuse, and the user waits for it.
	MaxBackoff time.Duration
	// OpenTimeout is how long a new stream may take to answer its first
	// call before it counts as failed (a network that drops packets
	// rather than refusing). The default is 30 seconds.
	OpenTimeout time.Duration
	// StallTimeout is how long a stream that has answered before may go
	// without a byte in either direction, while a call waits on it,
	// before it counts as gone (a laptop on another Wi-Fi, a NAT entry
	// lost, a VPN down and up: the old connection goes silent, with no
	// reset, and the transport's own pings notice only after most of a minute).
	// Slow work is not silence: an answer still arriving counts, a
	// request still being sent counts, and after a quarter of it without
	// a byte the Remote asks the server a Ping beside the slow call,
	// which a server at work answers at once. The default is 8 seconds:
	// with the new stream's exec (under a second) the files go again
	// within about 10 s of the drop, while a working link, even a slow
	// one, answers a Ping well within it; a link that fails to for 8 s
	// costs one new stream and a pair of messages, not a file.
	StallTimeout time.Duration
}

// Remote is a side reached over a stream, whose answers are not trusted:
// the paths it names are checked, its sizes bounded, and no answer may
// take more than maxAnswer bytes of the stream (gob alone would take up to
// a gigabyte for one message).
//
// A Remote from DialRemote opens a new stream when one breaks (a server
// killed, an API server restarted, a laptop that slept): the call that
// found it broken fails, and the next ones try a new stream, at once and
// then backing off up to MaxBackoff, failing with ErrAway meanwhile. A
// call that was cut may have been done by the other side or not; the
// Syncer's next round compares both sides again, so neither is lost.
//
// Calls are one at a time (a Syncer makes them so); a Remote is safe for
// concurrent use, calls waiting their turn.
type Remote struct {
	dial Dialer // nil: the one stream NewRemote was given
	o    RemoteOptions
	max  int64 // maxAnswer; smaller in tests

	mu       sync.Mutex // one call at a time; guards what follows
	c        *rpc.Client
	budget   *budgetReader
	progress *progress // when c's stream last moved a byte
	fresh    bool      // c has not answered yet
	lost     error     // why the stream went; nil while it answers
	lostAt   time.Time // when
	fails    int       // streams opened since that failed before answering
	retryAt  time.Time // no new stream before then
	up       bool      // a stream has answered once
	said     bool      // Link heard of the break
	isClosed bool
}

// NewRemote talks to a Serve on rw, the one stream: once it breaks,
// every call fails.
func NewRemote(rw io.ReadWriteCloser) *Remote {
	r := &Remote{max: maxAnswer}
	r.open(rw)
	r.fresh = false
	return r
}

// DialRemote talks to a Serve over streams dial opens: the first at the
// first call, a new one each time one breaks.
func DialRemote(dial Dialer, o RemoteOptions) *Remote {
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Second
	}
	if o.OpenTimeout <= 0 {
		o.OpenTimeout = 30 * time.Second
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 8 * time.Second
	}
	return &Remote{dial: dial, o: o, max: maxAnswer}
}

func (r *Remote) open(rw io.ReadWriteCloser) {
	pr := &progress{}
	b := &budgetReader{r: rw, progress: pr}
	b.left.Store(r.max)
	r.budget, r.progress = b, pr
	r.c = rpc.NewClient(struct {
		io.Reader
		io.WriteCloser
	}{b, &progressWriter{w: rw, progress: pr}})
	r.fresh = true
}

// progress is when a stream last moved a byte, each way.
type progress struct{ read, wrote atomic.Int64 } // UnixNano

func moved(at *atomic.Int64)          { at.Store(time.Now().UnixNano()) }
func when(at *atomic.Int64) time.Time { return time.Unix(0, at.Load()) }

// progressWriter writes to w in chunks, noting each one's progress: gob
// writes a message in one Write, and a large file's takes a while on a
// slow link, all of it progress.
type progressWriter struct {
	w        io.WriteCloser
	progress *progress
}

// writeChunk is how much progressWriter writes at a time: a few
// hundredths of a second on a slow link (1 MB/s).
const writeChunk = 32 << 10

func (pw *progressWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := pw.w.Write(p[n:min(len(p), n+writeChunk)])
		n += k
		if k > 0 {
			moved(&pw.progress.wrote)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (pw *progressWriter) Close() error { return pw.w.Close() }

// budgetReader fails once more than its budget is read; each call sets it
// anew (calls are one at a time).
type budgetReader struct {
	r        io.Reader
	left     atomic.Int64
	progress *progress
}

func (b *budgetReader) Read(p []byte) (int, error) {
	left := b.left.Load()
	if left <= 0 {
		return 0, errors.New("the workspace's answer is larger than cove reads")
	}
	n, err := b.r.Read(p[:min(int64(len(p)), left)])
	b.left.Add(-int64(n))
	if n > 0 {
		moved(&b.progress.read)
	}
	return n, err
}

// Close ends the stream; later calls fail.
func (r *Remote) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.isClosed = true
	if r.c == nil {
		return nil
	}
	return r.c.Close()
}

// connect makes sure there is a stream to call on.
func (r *Remote) connect(ctx context.Context) error {
	switch {
	case r.c != nil:
		return nil
	case r.isClosed:
		return rpc.ErrShutdown
	case r.dial == nil:
		return fmt.Errorf("%w: %v", ErrAway, r.lost)
	case time.Now().Before(r.retryAt):
		return fmt.Errorf("%w (opening it again): %v", ErrAway, r.lost)
	}
	rw, err := r.dial(ctx)
	if err != nil {
		r.broke(err)
		return fmt.Errorf("%w (opening it again): %v", ErrAway, err)
	}
	r.open(rw)
	return nil
}

// broke drops the stream, says so if it answered before, and sets when
// the next may be opened.
func (r *Remote) broke(err error) {
	if r.c != nil {
		r.c.Close()
		r.c = nil
	}
	if r.lost == nil {
		r.lost, r.lostAt, r.fails = err, time.Now(), 0
		// A stream that never answered was not lost: the caller hears
		// its error (a first round that cannot start).
		r.said = r.up
		if r.said && r.o.Link != nil {
			r.o.Link(err, 0)
		}
		return // the first new stream is tried at once
	}
	r.lost = err
	r.fails++
	r.retryAt = time.Now().Add(backoff(r.fails, r.o.MaxBackoff))
}

// backoff is the wait before the next stream after fails failed ones:
// 250 ms, doubling, at most max.
func backoff(fails int, max time.Duration) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < fails && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// answered notes that the stream answers, and says so if it is a new one
// after a break.
func (r *Remote) answered() {
	r.fresh, r.up = false, true
	if r.lost == nil {
		return
	}
	away := time.Since(r.lostAt)
	r.lost, r.fails, r.retryAt = nil, 0, time.Time{}
	if r.said && r.o.Link != nil {
		r.o.Link(nil, away)
	}
}

// call makes one call. Every call is idempotent (a scan, a read, a write
// of given bytes, a removal), so one cut by a broken stream is made once
// more at once on a new one: a server killed or a connection reset costs
// no round.
func (r *Remote) call(ctx context.Context, method string, args, reply any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.callOnce(ctx, method, args, reply)
	if errors.Is(err, ErrAway) && r.dial != nil && !r.isClosed && ctx.Err() == nil {
		err = r.callOnce(ctx, method, args, reply)
	}
	return err
}

func (r *Remote) callOnce(ctx context.Context, method string, args, reply any) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	r.budget.left.Store(min(r.max, answerBudget(method)))
	// Go returns once the request is written, which a stream gone
	// silent may never let happen (its buffers full): it sends in the
	// background, and a stream dropped as stalled ends that send.
	done, sent := make(chan *rpc.Call, 1), make(chan struct{})
	c, pr := r.c, r.progress
	// The answer is decoded into a value of this call's own, copied to
	// reply once it is complete: a stream given up on may still be
	// decoding its late answer while the call is made again on a new one.
	answer := reflect.New(reflect.TypeOf(reply).Elem())
	go func() {
		c.Go("Tree."+method, args, answer.Interface(), done)
		close(sent)
	}()
	var opening, checking <-chan time.Time
	if r.fresh {
		t := time.NewTimer(r.o.OpenTimeout)
		defer t.Stop()
		opening = t.C
	} else if r.o.StallTimeout > 0 {
		// A stream that answered before: watch it for silence (see
		// StallTimeout).
		t := time.NewTicker(r.o.StallTimeout / 8)
		defer t.Stop()
		checking = t.C
	}
	last := time.Now()      // the last sign of life: a byte read, or written for this call
	var ping chan *rpc.Call // the Ping asked meanwhile, until answered
	for {
		select {
		case call := <-done:
			var refused rpc.ServerError
			switch {
			case call.Error == nil:
				reflect.ValueOf(reply).Elem().Set(answer.Elem())
				r.answered()
				return nil
			case errors.As(call.Error, &refused):
				// The other side answered, with an error of its own.
				r.answered()
				return call.Error
			case r.isClosed:
				return call.Error
			}
			err := call.Error
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, rpc.ErrShutdown) {
				err = fmt.Errorf("the stream ended: %w", err)
			}
			r.broke(err)
			return fmt.Errorf("%w: %w", ErrAway, err)
		case <-opening:
			err := fmt.Errorf("no answer in %v", r.o.OpenTimeout)
			r.broke(err)
			return fmt.Errorf("%w: %w", ErrAway, err)
		case <-checking:
			// Bytes written count while this call's request is still
			// going out (a large file on a slow link), not after: a
			// Ping's, written into a silent stream's buffers, says
			// nothing of the other side.
			isSent := isClosed(sent)
			if t := when(&pr.read); t.After(last) {
				last = t
			}
			if t := when(&pr.wrote); !isSent && t.After(last) {
				last = t
			}
			silent := time.Since(last)
			if silent >= r.o.StallTimeout {
				err := fmt.Errorf("no answer for %v", silent.Round(time.Second))
				r.broke(err)
				return fmt.Errorf("%w: %w", ErrAway, err)
			}
			// A Ping once a quarter of it passed in silence, and again
			// once that one is answered: its answer is the bytes that
			// say a slow server is still there.
			if ping != nil && isAnswered(ping) {
				ping = nil
			}
			if isSent && silent >= r.o.StallTimeout/4 && ping == nil {
				ping = make(chan *rpc.Call, 1)
				go c.Go("Tree.Ping", struct{}{}, &struct{}{}, ping)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isClosed says whether c is closed.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// isAnswered says whether the call that reports on c has its answer
// (taking it: once only).
func isAnswered(c <-chan *rpc.Call) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Scan is Tree.Scan. A side that does not know List (a cove before it,
// still serving in the Pod) is asked for its entries alone: what it
// could not read looks deleted there, as it did before.
func (r *Remote) Scan(ctx context.Context) (Listing, error) {
	var out Listing
	err := r.call(ctx, "List", struct{}{}, &out)
	if err != nil && err.Error() == "rpc: can't find method Tree.List" {
		out = Listing{}
		err = r.call(ctx, "Scan", struct{}{}, &out.Entries)
	}
	if err != nil {
		return Listing{}, err
	}
	if len(out.Entries)+len(out.Unreadable) > maxEntries {
		return Listing{}, fmt.Errorf("the workspace lists %d files, more than cove syncs (%d)", len(out.Entries)+len(out.Unreadable), maxEntries)
	}
	for p, e := range out.Entries {
		if err := checkPath(p); err != nil {
			return Listing{}, err
		}
		if !validEntry(e) {
			return Listing{}, fmt.Errorf("sync: the workspace says %q is %v, %d bytes", p, e.Mode, e.Size)
		}
		if err := checkParents(out.Entries, p); err != nil {
			return Listing{}, err
		}
	}
	for i, u := range out.Unreadable {
		if err := checkPath(u.Path); err != nil {
			return Listing{}, err
		}
		if len(u.Why) > maxWhy {
			out.Unreadable[i].Why = u.Why[:maxWhy] + "…"
		}
	}
	return out, nil
}

// checkParents refuses a listing that puts p under something it says is
// not a directory: a walk never lists a path under a symlink or a file,
// so only a lying side does (a link ln -> /home/you and ln/.bashrc), and
// the whole answer is refused rather than the one write at checkAbove.
func checkParents(entries map[string]Entry, p string) error {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if e, ok := entries[d]; ok && !e.dir() {
			return fmt.Errorf("sync: the workspace lists %q under %q, which it says is not a directory", p, d)
		}
	}
	return nil
}

// maxWhy bounds the workspace's reason a path cannot be read, as said
// here.
const maxWhy = 200

// validEntry says whether e is one a side can have: a file, a symlink or
// a directory (no size, no sum), with permissions only.
func validEntry(e Entry) bool {
	switch e.Mode &^ 0o777 {
	case 0, modeSymlink:
		return e.Size >= 0
	case fs.ModeDir:
		return e.Size == 0 && e.Sum == ""
	}
	return false
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
