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
// the project's copy. Closing the Remote ends it.
func (p *Pod) Files(ctx context.Context) *filesync.Remote {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
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
	return filesync.NewRemote(pipeConn{outR, inW})
}

// pipeConn is the exec's stdout and stdin as one stream.
type pipeConn struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (c pipeConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c pipeConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c pipeConn) Close() error {
	c.w.Close()
	return c.r.Close()
}

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
