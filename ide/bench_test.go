package ide

// Benchmarks of the IDE's terminal on a real pseudo-terminal, each beside
// its floor: the same program read straight from a creack/pty PTY.
//
//	go test ./ide -run '^$' -bench 'Throughput|PTYFloor' -benchtime 3x
//	go test ./ide -run '^$' -bench 'Echo' -benchtime 2000x
//
// (an op is a whole 100 MiB cat, or one keystroke).
//
// The terminal rows go the whole way a browser's bytes go: the terminals
// WebSocket handler on a Unix socket, behind the real Proxy on a loopback
// port, to a Go client that acknowledges output as ide/web/src/terminal.js
// does. scripts/bench/ide.sh runs them and writes the table.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/creack/pty"
)

// catSize is the size of the file the throughput benchmarks cat.
const catSize = 100 << 20

// The web client's acknowledgements (ide/web/src/terminal.js): after
// writing a frame to the screen it acks once it has shown ackEvery bytes
// beyond its last ack, and ackIdle after the last frame in any case.
const (
	ackEvery = 32 * 1024
	ackIdle  = 50 * time.Millisecond
)

// The programs on the terminal. Each prints R once its terminal is set up
// (so no keystroke reaches it before, to be echoed by the line discipline),
// then waits for a line (throughput) or echoes what it reads (echo).
const (
	// Cooked output (OPOST, ONLCR: every \n goes out as \r\n), as for a
	// cat typed into a shell; only the echo of the start line is off.
	catProgram = `stty -echo && printf R && head -c1 >/dev/null && exec cat "$0"`
	// Raw mode without the PTY's echo: cat writes back each byte it
	// reads, as a shell's line editor (readline in raw mode) does.
	echoProgram = `stty raw -echo && printf R && exec cat`
)

// benchStack is ide_test.go's stack for benchmarks: the terminals handler
// running program (sh -c) in its terminals, behind the Proxy. The terminals still running at the end
// are killed.
func benchStack(tb testing.TB, program string, args ...string) (*Proxy, string) {
	tb.Helper()
	project := tb.TempDir()
	dir, err := projectfs.Open(project)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dir.Close() })
	terms := &terminals{dir: dir.Root, shell: append([]string{"/bin/sh", "-c", program}, args...), terms: map[string]*Terminal{}}
	tb.Cleanup(func() {
		terms.mu.Lock()
		defer terms.mu.Unlock()
		for _, t := range terms.terms {
			t.Close()
		}
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/term/{id}", terms.serve) // as NewHandler routes it
	return behindProxy(tb, mux)
}

// webClient is a terminal connection that reads and acknowledges output
// as the web UI does. Output must arrive in order, without gaps.
type webClient struct {
	c     *websocket.Conn
	buf   []byte     // the frame read last (reused: the client's own costs stay small)
	mu    sync.Mutex // for shown, acked and the ack writes
	shown uint64     // output offset "written to the screen"
	acked uint64
	timer *time.Timer
}

// dialTerminal opens a new terminal through the proxy, reads its hello and
// sends the window size, as the web UI does on open.
func dialTerminal(tb testing.TB, p *Proxy, base string) *webClient {
	tb.Helper()
	h := http.Header{tokenHeader: {p.Token}, "Origin": {base}}
	c, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/term/new", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		tb.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	w := &webClient{c: c}
	w.timer = time.AfterFunc(time.Hour, w.ack)
	w.timer.Stop()
	_, msg, err := c.Read(context.Background())
	if err != nil || len(msg) == 0 || msg[0] != opHello {
		tb.Fatalf("first frame %q (%v), want a hello", msg, err)
	}
	w.send(opResize, []byte(`{"cols":120,"rows":40}`))
	return w
}

func (w *webClient) close() {
	w.timer.Stop()
	w.c.CloseNow()
}

func (w *webClient) send(op byte, p []byte) error {
	return w.c.Write(context.Background(), websocket.MessageBinary, append([]byte{op}, p...))
}

// ack sends the offset shown, if it moved since the last ack.
func (w *webClient) ack() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shown == w.acked {
		return
	}
	b := make([]byte, 9)
	b[0] = opAck
	binary.BigEndian.PutUint64(b[1:], w.shown)
	if w.c.Write(context.Background(), websocket.MessageBinary, b) == nil {
		w.acked = w.shown
	}
}

// next reads one frame. For output it returns the data (after which it
// acknowledges as the web UI does, as if it had been written to the
// screen); for the exit frame, io.EOF and the exit code.
func (w *webClient) next() (data []byte, code int, err error) {
	for {
		msg, err := w.read()
		if err != nil {
			return nil, 0, err
		}
		if len(msg) == 0 {
			return nil, 0, errors.New("an empty frame")
		}
		switch msg[0] {
		case opOutput:
			if len(msg) < 9 {
				return nil, 0, fmt.Errorf("an output frame of %d bytes", len(msg))
			}
			off, data := binary.BigEndian.Uint64(msg[1:9]), msg[9:]
			w.mu.Lock()
			shown := w.shown
			w.shown = off + uint64(len(data))
			due := w.shown-w.acked >= ackEvery
			w.mu.Unlock()
			if off != shown {
				return nil, 0, fmt.Errorf("output at offset %d, after %d bytes: a gap or a repeat", off, shown)
			}
			if due {
				w.ack()
			}
			w.timer.Reset(ackIdle)
			return data, 0, nil
		case opExit:
			var e struct{ Code int }
			if err := json.Unmarshal(msg[1:], &e); err != nil {
				return nil, 0, err
			}
			return nil, e.Code, io.EOF
		}
	}
}

// read reads a message into w.buf.
func (w *webClient) read() ([]byte, error) {
	_, r, err := w.c.Reader(context.Background())
	if err != nil {
		return nil, err
	}
	n := 0
	for {
		if n == len(w.buf) {
			w.buf = append(w.buf, make([]byte, max(64<<10, len(w.buf)))...)
		}
		m, err := r.Read(w.buf[n:])
		n += m
		if err == io.EOF {
			return w.buf[:n], nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// waitReady reads the program's R, the first byte of output.
func (w *webClient) waitReady(tb testing.TB) {
	tb.Helper()
	data, _, err := w.next()
	if err != nil || string(data) != "R" {
		tb.Fatalf("first output %q (%v), want R", data, err)
	}
}

// catFile writes a file of size bytes of printable lines (of 20 to
// 119 characters and a newline) to dir and returns its path, the number
// of bytes cat prints on a terminal in cooked mode (each \n as \r\n) and
// their CRC-32.
func catFile(tb testing.TB, dir string, size int64) (path string, onTTY int64, sum uint32) {
	tb.Helper()
	path = filepath.Join(dir, "big.txt")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	crc := crc32.NewIEEE()
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-_=+()[]{}<>/|!?#$%&*"
	line := make([]byte, 0, 160)
	var written, lines int64
	for i := 0; written < size; i++ {
		line = strconv.AppendInt(line[:0], int64(i), 10)
		line = append(line, ' ')
		n := 20 + (i*7919)%100
		for j := len(line); j < n; j++ {
			line = append(line, alphabet[(i+j*31)%len(alphabet)])
		}
		line = append(line, '\n')
		if rest := size - written; int64(len(line)) > rest { // the last line: exactly size bytes
			line = append(line[:rest-1], '\n')
		}
		bw.Write(line)
		crc.Write(line[:len(line)-1])
		crc.Write([]byte("\r\n"))
		written += int64(len(line))
		lines++
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path, written + lines, crc.Sum32()
}

// checkCat fails the benchmark unless what came out of the terminal is the
// file as cat prints it on a terminal.
func checkCat(tb testing.TB, what string, got, want int64, gotSum, wantSum uint32) {
	tb.Helper()
	if got != want {
		tb.Fatalf("%s: received %d bytes of output, want %d (the file with \\r\\n line ends)", what, got, want)
	}
	if gotSum != wantSum {
		tb.Fatalf("%s: the output's CRC-32 is %08x, want %08x: bytes changed on the way", what, gotSum, wantSum)
	}
}

// catTerminal runs the cat in a new terminal through the proxy, reading
// and acknowledging as the browser does, and checks what came out. timing
// is called with true when the keystroke that starts cat goes out and with
// false when the exit frame is in. It returns the number of output frames.
func catTerminal(tb testing.TB, p *Proxy, base string, want int64, wantSum uint32, timing func(bool)) (frames int) {
	tb.Helper()
	w := dialTerminal(tb, p, base)
	defer w.close()
	w.waitReady(tb)
	crc := crc32.NewIEEE()
	var got int64
	timing(true)
	if err := w.send(opInput, []byte("\n")); err != nil {
		tb.Fatal(err)
	}
	var code int
	var err error
	for {
		var data []byte
		if data, code, err = w.next(); err != nil {
			break
		}
		got += int64(len(data))
		crc.Write(data)
		frames++
	}
	timing(false)
	if err != io.EOF {
		tb.Fatalf("after %d bytes: %v", got, err)
	}
	if code != 0 {
		tb.Fatalf("cat exited with status %d", code)
	}
	checkCat(tb, "terminal", got, want, crc.Sum32(), wantSum)
	return frames
}

// TestTerminalCatIsExact: a few MiB (several turns of the ring, at
// offsets that do not line up with it) come out of a terminal as cat
// wrote them, with the browser's acks: what the benchmark below checks,
// small enough for every test run.
func TestTerminalCatIsExact(t *testing.T) {
	path, want, wantSum := catFile(t, t.TempDir(), 3*ringSize+12345)
	p, base := benchStack(t, catProgram, path)
	catTerminal(t, p, base, want, wantSum, func(bool) {})
}

// BenchmarkTerminalThroughput: cat of a 100 MiB file in a terminal, to a
// client that acknowledges as the browser does, through the proxy. An
// op is the whole file, from the keystroke that starts cat to the exit
// frame; MB/s is of the file's bytes (10^6 bytes a second).
func BenchmarkTerminalThroughput(b *testing.B) {
	path, want, wantSum := catFile(b, b.TempDir(), catSize)
	p, base := benchStack(b, catProgram, path)
	b.SetBytes(catSize)
	b.ReportAllocs()
	timing := func(on bool) {
		if on {
			b.StartTimer()
		} else {
			b.StopTimer()
		}
	}
	b.StopTimer()
	b.ResetTimer()
	frames := 0
	for i := 0; i < b.N; i++ {
		frames += catTerminal(b, p, base, want, wantSum, timing)
	}
	// How much of the output one frame carries (at most 32 KiB): each
	// frame costs a WebSocket write and a trip through the proxy.
	b.ReportMetric(float64(want)*float64(b.N)/float64(frames), "B/frame")
}

// startPTY runs program (sh -c) on a bare PTY and reads its R.
func startPTY(b *testing.B, program string, args ...string) (*os.File, *exec.Cmd) {
	b.Helper()
	cmd := exec.Command("/bin/sh", append([]string{"-c", program}, args...)...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		b.Fatal(err)
	}
	r := make([]byte, 1)
	if _, err := io.ReadFull(f, r); err != nil || r[0] != 'R' {
		cmd.Process.Kill()
		b.Fatalf("first output %q (%v), want R", r, err)
	}
	return f, cmd
}

// BenchmarkPTYFloor: the same cat read straight from a PTY in a bare
// loop (32 KiB reads, as Terminal does), the floor for
// BenchmarkTerminalThroughput.
func BenchmarkPTYFloor(b *testing.B) {
	path, want, wantSum := catFile(b, b.TempDir(), catSize)
	buf := make([]byte, 32<<10)
	b.SetBytes(catSize)
	b.ResetTimer()
	reads := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		f, cmd := startPTY(b, catProgram, path)
		crc := crc32.NewIEEE()
		var got int64
		b.StartTimer()
		if _, err := f.Write([]byte("\n")); err != nil {
			b.Fatal(err)
		}
		var err error
		for {
			var n int
			n, err = f.Read(buf)
			got += int64(n)
			crc.Write(buf[:n])
			reads++
			if err != nil {
				break
			}
		}
		b.StopTimer()
		f.Close()
		werr := cmd.Wait()
		// EIO: what the master reads once the program on the PTY is gone.
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) {
			b.Fatalf("after %d bytes: %v", got, err)
		}
		if werr != nil {
			b.Fatalf("cat: %v", werr)
		}
		checkCat(b, "PTY", got, want, crc.Sum32(), wantSum)
		b.StartTimer()
	}
	// What one read of the PTY gets: the terminal reads it the same way.
	b.ReportMetric(float64(want)*float64(b.N)/float64(reads), "B/read")
}

// reportLatency reports the median and the 99th percentile of ds in µs.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration { // nearest rank
		return ds[max(0, int(math.Ceil(p*float64(len(ds))))-1)]
	}
	b.ReportMetric(float64(rank(0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(rank(0.99).Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkTerminalEcho: a keystroke's round trip: one byte of input over
// the WebSocket, through the proxy, to a program that writes it back
// (cat on a raw, non-echoing PTY, as a line editor does), until it is
// back in an output frame. An op is one keystroke.
func BenchmarkTerminalEcho(b *testing.B) {
	p, base := benchStack(b, echoProgram)
	w := dialTerminal(b, p, base)
	defer w.close()
	w.waitReady(b)
	ds := make([]time.Duration, 0, b.N)
	in := []byte{'a'}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in[0] = 'a' + byte(i%26)
		start := time.Now()
		if err := w.send(opInput, in); err != nil {
			b.Fatal(err)
		}
		data, _, err := w.next()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("keystroke %d: %v", i, err)
		}
		if !bytes.Equal(data, in) {
			b.Fatalf("keystroke %d: sent %q, got back %q", i, in, data)
		}
		ds = append(ds, d)
	}
	b.StopTimer()
	reportLatency(b, ds)
}

// BenchmarkPTYEcho: the same round trip on a bare PTY (write the byte to
// the master, read it back), the floor for BenchmarkTerminalEcho.
func BenchmarkPTYEcho(b *testing.B) {
	f, cmd := startPTY(b, echoProgram)
	defer func() { cmd.Process.Kill(); f.Close(); cmd.Wait() }()
	ds := make([]time.Duration, 0, b.N)
	in, out := []byte{'a'}, make([]byte, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in[0] = 'a' + byte(i%26)
		start := time.Now()
		if _, err := f.Write(in); err != nil {
			b.Fatal(err)
		}
		n, err := f.Read(out)
		d := time.Since(start)
		if err != nil {
			b.Fatalf("keystroke %d: %v", i, err)
		}
		if !bytes.Equal(out[:n], in) {
			b.Fatalf("keystroke %d: sent %q, got back %q", i, in, out[:n])
		}
		ds = append(ds, d)
	}
	b.StopTimer()
	reportLatency(b, ds)
}
