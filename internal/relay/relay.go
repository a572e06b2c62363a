// Package relay connects a stream to a TCP address: the workspace's side
// of an HTTP MCP server the agent reaches through the workspace's network.
package relay

import (
	"context"
	"io"
	"net"
	"time"
)

// Run dials addr (from where it runs: inside the workspace), writes "+"
// once connected, then copies in to the connection and the connection to
// out until either ends. A failure to dial is returned (and the caller
// prints it on stderr).
func Run(ctx context.Context, addr string, in io.Reader, out io.Writer) error {
	conn, err := (&net.Dialer{Timeout: 30 * time.Second}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := out.Write([]byte("+")); err != nil {
		return err
	}
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(conn, in)
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() { io.Copy(out, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
