package kubeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// The exec protocol over WebSocket, version 5 (Kubernetes 1.30; on by
// default from 1.31): each message's first byte is its stream, and the
// client closes its standard input with a message of its own.
const (
	execProtocol = "v5.channel.k8s.io"

	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamError  = 3 // the command's Status, once it has ended
	streamResize = 4
	streamClose  = 255 // v5: the stream in the next byte ends
)

// A command's connection is pinged this often, and given up when a ping
// goes unanswered this long.
const (
	pingPeriod  = 5 * time.Second
	pingTimeout = 20 * time.Second
)

// TermSize is a terminal's size.
type TermSize struct {
	Width, Height uint16
}

// ExecOptions are a command's streams. With TTY, Stderr is unused (the
// terminal carries both) and Resize, if set, sends its sizes.
type ExecOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	TTY            bool
	Resize         <-chan TermSize
}

// ExecError is the API server's or the runtime's refusal to run the
// command (not the command's own failure, which is its exit status).
type ExecError struct{ Message string }

func (e *ExecError) Error() string { return e.Message }

// Exec runs argv in container of the Pod at podPath (e.g.
// /api/v1/namespaces/NS/pods/NAME) and returns its exit status.
func (c *Client) Exec(ctx context.Context, podPath, container string, argv []string, o ExecOptions) (int, error) {
	q := url.Values{"container": {container}, "command": argv}
	q.Set("stdin", strconv.FormatBool(o.Stdin != nil))
	q.Set("stdout", strconv.FormatBool(o.Stdout != nil))
	q.Set("stderr", strconv.FormatBool(o.Stderr != nil && !o.TTY))
	q.Set("tty", strconv.FormatBool(o.TTY))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn, err := c.dialWebSocket(ctx, podPath+"/exec", q, execProtocol)
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	// The kubelet sends up to 32 KiB of output a message, and a byte.
	conn.SetReadLimit(1 << 20)

	// As client-go: a connection that goes silent (a laptop on another
	// network, a NAT entry lost) ends the command's stream with an error
	// rather than holding it forever; the pings are answered by the API
	// server, however long the command is quiet.
	silent := make(chan struct{})
	go func() {
		t := time.NewTicker(pingPeriod)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				pctx, done := context.WithTimeout(ctx, pingTimeout)
				err := conn.Ping(pctx)
				done()
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					close(silent)
					cancel()
					return
				}
				if err != nil {
					return // closed: the command's end, or the caller's
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	var wmu sync.Mutex // one message at a time, whole
	send := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return conn.Write(ctx, websocket.MessageBinary, b)
	}
	// What went each way, for the error of a stream that ends with no
	// status (where it stopped says which side to look at).
	var sentIn atomic.Int64
	var sentEnd atomic.Bool
	var gotOut int64
	if o.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10+1)
			buf[0] = streamStdin
			for {
				n, err := o.Stdin.Read(buf[1:])
				if n > 0 {
					if send(buf[:1+n]) != nil {
						return
					}
					sentIn.Add(int64(n))
				}
				if err != nil {
					sentEnd.Store(send([]byte{streamClose, streamStdin}) == nil)
					return
				}
			}
		}()
	}
	progress := func() string {
		in := "no input"
		if o.Stdin != nil {
			in = fmt.Sprintf("%d bytes of input sent", sentIn.Load())
			if sentEnd.Load() {
				in += " and its end"
			}
		}
		return fmt.Sprintf("%s, %d bytes of output received, no status", in, gotOut)
	}
	if o.TTY && o.Resize != nil {
		go func() {
			for {
				select {
				case s, ok := <-o.Resize:
					if !ok {
						return
					}
					b, _ := json.Marshal(s)
					if send(append([]byte{streamResize}, b...)) != nil {
						return
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	var statusJSON []byte
	for {
		_, msg, err := conn.Read(ctx)
		if err != nil {
			if statusJSON != nil {
				return exitStatus(statusJSON)
			}
			select {
			case <-silent:
				return 0, fmt.Errorf("exec: the connection to the API server went silent (no answer to a ping in %v)", pingTimeout)
			default:
			}
			if ctx.Err() != nil {
				return 0, fmt.Errorf("exec: %w (%s)", ctx.Err(), progress())
			}
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				err = errors.New("the stream ended without the command's status")
			}
			return 0, fmt.Errorf("exec: %w (%s)", err, progress())
		}
		if len(msg) < 2 {
			continue // a stream opened, nothing in it
		}
		var w io.Writer
		switch msg[0] {
		case streamStdout:
			w = o.Stdout
		case streamStderr:
			w = o.Stderr
		case streamError:
			statusJSON = append(statusJSON, msg[1:]...)
			continue
		}
		gotOut += int64(len(msg) - 1)
		if w != nil {
			if _, err := w.Write(msg[1:]); err != nil {
				return 0, fmt.Errorf("exec: write the command's output: %w", err)
			}
		}
	}
}

// exitStatus reads the command's Status: Success, or a failure with an
// exit code, or the reason it could not run.
func exitStatus(b []byte) (int, error) {
	var s status
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("exec: the command's status: %w", err)
	}
	if s.Status == "Success" {
		return 0, nil
	}
	if s.Reason == "NonZeroExitCode" {
		for _, c := range s.Details.Causes {
			if c.Reason == "ExitCode" {
				if n, err := strconv.Atoi(c.Message); err == nil {
					return n, nil
				}
			}
		}
	}
	return 0, &ExecError{Message: s.Message}
}

// dialWebSocket upgrades a request to path to a WebSocket speaking
// protocol, with the user's credentials.
func (c *Client) dialWebSocket(ctx context.Context, path string, q url.Values, protocol string) (*websocket.Conn, error) {
	for try := 0; ; try++ {
		h, err := c.creds.headers(ctx)
		if err != nil {
			return nil, err
		}
		conn, resp, err := websocket.Dial(ctx, c.URL(path, q), &websocket.DialOptions{
			HTTPClient:      c.http1,
			HTTPHeader:      h,
			Subprotocols:    []string{protocol},
			CompressionMode: websocket.CompressionDisabled,
		})
		if err == nil {
			if conn.Subprotocol() != protocol {
				conn.CloseNow()
				return nil, fmt.Errorf("%s: the API server does not speak %s (cove needs Kubernetes 1.31 or later)", path, protocol)
			}
			return conn, nil
		}
		if resp != nil && resp.StatusCode == http.StatusUnauthorized && try == 0 && c.creds.expire() {
			continue
		}
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			b := []byte(nil)
			if resp.Body != nil {
				b, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			}
			if resp.StatusCode == http.StatusBadRequest {
				return nil, fmt.Errorf("%s: the API server refused the upgrade to %s (cove needs Kubernetes 1.31 or later): %w", path, protocol, answerError(resp.StatusCode, b))
			}
			return nil, fmt.Errorf("%s: %w", path, answerError(resp.StatusCode, b))
		}
		return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(path, "/api/v1/"), err)
	}
}
