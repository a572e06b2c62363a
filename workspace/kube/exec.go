package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// TermSize is a terminal's size.
type TermSize = remotecommand.TerminalSize

// ExecOptions are a command's streams in the Pod. With TTY, Stderr is
// unused (the terminal carries both) and Resize, if set, sends its sizes.
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TermSize
}

// Exec runs argv in the workspace's container and returns its exit
// status. It speaks the API server's WebSocket exec protocol, and SPDY to
// servers too old for it, as kubectl does.
func (p *Pod) Exec(ctx context.Context, argv []string, o ExecOptions) (int, error) {
	k := p.cluster
	req := k.rc.Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: "workspace",
			Command:   argv,
			Stdin:     o.Stdin != nil,
			Stdout:    o.Stdout != nil,
			Stderr:    o.Stderr != nil && !o.TTY,
			TTY:       o.TTY,
		}, k.params)
	ws, err := remotecommand.NewWebSocketExecutor(k.rest, "GET", req.URL().String())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(k.rest, "POST", req.URL())
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	opts := remotecommand.StreamOptions{Stdin: o.Stdin, Stdout: o.Stdout, Tty: o.TTY}
	if !o.TTY {
		opts.Stderr = o.Stderr
	}
	if o.Resize != nil {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, c: o.Resize}
	}
	err = ex.StreamWithContext(ctx, opts)
	var exit utilexec.CodeExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		return exit.Code, nil
	}
	// The runtime's refusal to start the command comes back as an error;
	// say it as a shell and cove exec do, with their statuses.
	for _, e := range []struct {
		says string
		code int
	}{{"executable file not found", 127}, {"no such file or directory", 127}, {"permission denied", 126}} {
		if strings.Contains(err.Error(), "exec failed: unable to start container process") && strings.Contains(err.Error(), e.says) {
			w := o.Stderr
			if w == nil || o.TTY {
				w = o.Stdout
			}
			if w != nil {
				fmt.Fprintf(w, "cove: %s: %s\n", argv[0], e.says)
			}
			return e.code, nil
		}
	}
	return 0, fmt.Errorf("exec in %s/%s: %w", p.Namespace, p.Name, err)
}

// sizeQueue hands remotecommand the terminal's sizes; nil ends it.
type sizeQueue struct {
	ctx context.Context
	c   <-chan TermSize
}

func (q sizeQueue) Next() *TermSize {
	select {
	case s, ok := <-q.c:
		if !ok {
			return nil
		}
		return &s
	case <-q.ctx.Done():
		return nil
	}
}
