package kube

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/cove-sh/cove/workspace/filesync"
)

// Files opens the workspace's side of the file sync: cove's sync server
// in the Pod (Bring puts cove there) answering over one exec stream for
// the project's copy. Closing the Remote ends it. Once the stream breaks,
// the Remote fails; a Session's opens a new stream instead (see
// SyncDialer).
func (p *Pod) Files(ctx context.Context) *filesync.Remote {
	return filesync.NewRemote(p.syncStream(ctx))
}

// SyncDialer opens streams to the sync server in the Pod for
// filesync.DialRemote: each is a new exec of it, lasting until it is
// closed, the server or the connection ends, or ctx ends.
func (p *Pod) SyncDialer(ctx context.Context) filesync.Dialer {
	return func(context.Context) (io.ReadWriteCloser, error) { return p.syncStream(ctx), nil }
}

// syncStream starts cove sync-serve in the Pod and returns its stdout and
// stdin as one stream. The exec starts in the background: its failure
// is the stream's read error. Closing the stream ends the exec.
func (p *Pod) syncStream(ctx context.Context) io.ReadWriteCloser {
	ctx, cancel := context.WithCancel(ctx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		defer cancel()
		var errb bytes.Buffer
		code, err := p.Exec(ctx, []string{CovePath, "sync-serve", WorkspaceDir}, ExecOptions{Stdin: inR, Stdout: outW, Stderr: &limited{w: &errb, n: 4096}})
		if err == nil && code != 0 {
			err = fmt.Errorf("the sync server in the Pod exited %d: %s", code, strings.TrimSpace(errb.String()))
		}
		if err == nil {
			err = io.EOF
		}
		outW.CloseWithError(err)
		inR.CloseWithError(err)
	}()
	return pipeConn{outR, inW, cancel}
}

// pipeConn is the exec's stdout and stdin as one stream.
type pipeConn struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	cancel context.CancelFunc // ends the exec
}

func (c pipeConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c pipeConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c pipeConn) Close() error {
	c.w.Close()
	c.r.Close()
	// A stream that broke half way (a connection that went silent) may
	// not end by itself: the exec goes with it.
	c.cancel()
	return nil
}

// Capped is a writer to w that passes on the first n bytes written to it
// and drops the rest: what the Pod says is read only so far.
func Capped(w io.Writer, n int) io.Writer { return &limited{w: w, n: n} }

// limited keeps the first n bytes written to it: what the Pod says is
// only shown, never kept whole.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(b []byte) (int, error) {
	if l.n > 0 {
		k := min(len(b), l.n)
		l.w.Write(b[:k])
		l.n -= k
	}
	return len(b), nil
}
