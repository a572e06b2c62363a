package ide

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/internal/procstat"
	"github.com/creack/pty"
)

// Terminal frames: one byte of opcode, then the payload. The same values
// are in the web UI's terminal client.
const (
	opInput  = 0x00 // client → server: keystrokes
	opResize = 0x01 // client → server: {"cols":N,"rows":N}
	opAck    = 0x02 // client → server: 8 bytes, big-endian: output offset it has shown
	opOutput = 0x10 // server → client: 8-byte offset, then bytes
	opExit   = 0x11 // server → client: {"code":N}
	opHello  = 0x12 // server → client: {"id":"…"} on a new terminal
)

// Defaults of a Terminal.
const (
	ringSize   = 1 << 20   // output kept for replay after a reload (1 MiB)
	flowWindow = 256 << 10 // output sent beyond the client's last ack (256 KiB)
)

// Terminal is a shell on a pseudo-terminal that outlives its WebSocket
// connections: its output goes to a ring buffer addressed by byte offset,
// from which a reconnecting client replays what it missed. The PTY is read
// only while connected clients keep up (acknowledged bytes), so `yes`
// cannot flood the page and Ctrl-C takes effect at once. Safe for
// concurrent use.
type Terminal struct {
	ID   string
	pty  *os.File
	cmd  *exec.Cmd
	mu   sync.Mutex
	cond *sync.Cond
	ring []byte
	end  uint64             // offset just past the last output byte
	acks map[*client]uint64 // connected clients and what they acknowledged
	done bool
	gone chan struct{} // closed when the shell has exited
	code int
}

type client struct{}

// StartTerminal runs cmd on a new pseudo-terminal.
func StartTerminal(id string, cmd *exec.Cmd, cols, rows uint16) (*Terminal, error) {
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: cols, Rows: rows})
	if err != nil {
		return nil, err
	}
	t := &Terminal{ID: id, pty: f, cmd: cmd, ring: make([]byte, ringSize), acks: map[*client]uint64{}, gone: make(chan struct{})}
	t.cond = sync.NewCond(&t.mu)
	go t.read()
	return t, nil
}

func (t *Terminal) read() {
	// The shell's exit is the end, even if a job it left in the
	// background holds the PTY open (then no EOF comes): what it wrote is
	// read for a moment more, then the rest of its session is hung up on,
	// as closing a terminal window does, and killed if that was not
	// enough.
	exited := make(chan int, 1)
	go func() {
		code := 0
		if err := t.cmd.Wait(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		}
		exited <- code
		select {
		case <-t.gone:
			return
		case <-time.After(100 * time.Millisecond):
		}
		t.signalSession(syscall.SIGHUP)
		select {
		case <-t.gone:
		case <-time.After(2 * time.Second):
			t.signalSession(syscall.SIGKILL)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		t.mu.Lock()
		for t.behind() {
			t.cond.Wait()
		}
		t.mu.Unlock()
		n, err := t.pty.Read(buf)
		t.mu.Lock()
		t.copyIn(buf[:n])
		t.end += uint64(n)
		t.cond.Broadcast()
		t.mu.Unlock()
		if err != nil {
			break
		}
	}
	code := <-exited
	t.mu.Lock()
	t.done, t.code = true, code
	t.cond.Broadcast()
	t.mu.Unlock()
	t.pty.Close()
	close(t.gone)
}

// Exited is closed when the shell has exited.
func (t *Terminal) Exited() <-chan struct{} { return t.gone }

// copyIn appends b (at most the ring's size) to the ring at t.end, in at
// most two copies (where it wraps), not byte by byte: this is the path of
// every byte of output.
func (t *Terminal) copyIn(b []byte) {
	n := copy(t.ring[t.end%ringSize:], b)
	copy(t.ring, b[n:])
}

// copyOut fills b (at most the ring's size) with the output at offset off.
func (t *Terminal) copyOut(b []byte, off uint64) {
	n := copy(b, t.ring[off%ringSize:])
	copy(b[n:], t.ring)
}

// behind says whether every connected client is a window behind (then the
// PTY waits, and the program writing to it blocks, as on a slow terminal).
func (t *Terminal) behind() bool {
	if len(t.acks) == 0 {
		return false
	}
	for _, a := range t.acks {
		if a+flowWindow > t.end {
			return false
		}
	}
	return true
}

// Input writes keystrokes.
func (t *Terminal) Input(b []byte) error { _, err := t.pty.Write(b); return err }

// Resize sets the window size.
func (t *Terminal) Resize(cols, rows uint16) error {
	return pty.Setsize(t.pty, &pty.Winsize{Cols: cols, Rows: rows})
}

// Close kills the shell and the rest of its session.
func (t *Terminal) Close() {
	if t.cmd.Process == nil {
		return
	}
	t.cmd.Process.Kill()
	t.signalSession(syscall.SIGKILL)
}

// signalSession sends sig to every process of the shell's session (the
// PTY's) but the shell: its background jobs have process groups of their
// own, and hold the PTY open while they live.
func (t *Terminal) signalSession(sig syscall.Signal) {
	sid := strconv.Itoa(t.cmd.Process.Pid)
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || d.Name() == sid {
			continue
		}
		if f, err := procstat.Fields(pid); err == nil && len(f) > 3 && f[3] == sid {
			syscall.Kill(pid, sig)
		}
	}
}

// subscribe registers a client that has shown output up to from (clamped
// to what the ring still holds), for flow control.
func (t *Terminal) subscribe(from uint64) (*client, uint64) {
	c := &client{}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end > ringSize && from < t.end-ringSize {
		from = t.end - ringSize
	}
	if from > t.end {
		from = t.end
	}
	t.acks[c] = from
	return c, from
}

func (t *Terminal) unsubscribe(c *client) {
	t.mu.Lock()
	delete(t.acks, c)
	t.cond.Broadcast()
	t.mu.Unlock()
}

// ack records that c has shown output up to off.
func (t *Terminal) ack(c *client, off uint64) {
	t.mu.Lock()
	if cur, ok := t.acks[c]; ok && off > cur && off <= t.end {
		t.acks[c] = off
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

// stream sends output from offset sent on, never more than the window
// beyond c's last ack, until ctx ends or the shell exits (then it sends
// the exit status and returns nil).
func (t *Terminal) stream(ctx context.Context, c *client, sent uint64, send func(op byte, p []byte) error) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	for {
		t.mu.Lock()
		for ctx.Err() == nil && !(sent < t.end && sent < t.acks[c]+flowWindow) && !(t.done && sent >= t.end) {
			t.cond.Wait()
		}
		if ctx.Err() != nil {
			t.mu.Unlock()
			return ctx.Err()
		}
		if t.done && sent >= t.end {
			code := t.code
			t.mu.Unlock()
			b, _ := json.Marshal(map[string]int{"code": code})
			return send(opExit, b)
		}
		if t.end-sent > ringSize { // fell out of the ring: what is gone is gone
			sent = t.end - ringSize
		}
		limit := min(t.end, t.acks[c]+flowWindow, sent+32<<10)
		chunk := make([]byte, 8+limit-sent)
		binary.BigEndian.PutUint64(chunk, sent)
		t.copyOut(chunk[8:], sent)
		t.mu.Unlock()
		if err := send(opOutput, chunk); err != nil {
			return err
		}
		sent = limit
	}
}
