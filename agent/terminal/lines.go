package terminal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// lineReader is where the chat's lines come from.
type lineReader interface {
	// prompt shows the chat's prompt and reads the next request. io.EOF
	// means the input ended (or Ctrl-D on an empty line); ErrInterrupted
	// that Ctrl-C was pressed on an empty line.
	prompt() (string, error)
	// answer asks question (an approval's) and reads the reply.
	answer(question string) (string, error)
}

// ErrInterrupted is Chat's error when Ctrl-C was pressed at an empty
// prompt: the user left as a shell's user does, and the command's status
// should say so (130).
var ErrInterrupted = errors.New("interrupted")

// plainLines reads lines as they come, from a pipe or a file.
type plainLines struct {
	in   *bufio.Reader
	out  io.Writer
	echo bool // write each line read after its prompt: input not typed on out's terminal does not show there by itself
}

func (p *plainLines) prompt() (string, error) {
	fmt.Fprint(p.out, "› ")
	line, err := p.in.ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(p.out)
		return "", io.EOF
	}
	p.show(line)
	return line, nil
}

func (p *plainLines) answer(question string) (string, error) {
	fmt.Fprint(p.out, question)
	line, _ := p.in.ReadString('\n')
	p.show(line)
	return line, nil
}

func (p *plainLines) show(line string) {
	if p.echo {
		fmt.Fprintln(p.out, strings.TrimSuffix(line, "\n"))
	}
}

// ttyLines reads lines on a terminal, with editing (arrows, Home, End,
// Ctrl-A, E, K, U, W), Up and Down through the history, and requests of
// several lines (a line that ends in a backslash goes on; so does a
// bracketed paste). The terminal is raw only while a line is read, so
// that Ctrl-C during a turn is still the kernel's SIGINT (see setMode).
type ttyLines struct {
	in   *os.File // the terminal
	out  io.Writer
	t    *term.Terminal
	keys *keyReader
	hist *promptHistory
	warn io.Writer // where a history that cannot be saved is reported, once

	warned bool

	mu       sync.Mutex
	orig     unix.Termios // the terminal's mode when the chat began
	raw      bool         // a line is being read
	restored bool         // orig is back for good
}

// newTTYLines reads lines on in, a terminal, and shows them on out (the
// same terminal). The caller calls restore when the chat ends.
func newTTYLines(in *os.File, out io.Writer, hist *promptHistory, warn io.Writer) (*ttyLines, error) {
	orig, err := unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS)
	if err != nil {
		return nil, err
	}
	k := &keyReader{r: in}
	t := term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{k, out}, "")
	t.History = hist
	t.AutoCompleteCallback = k.key
	return &ttyLines{in: in, out: out, t: t, keys: k, hist: hist, warn: warn, orig: *orig}, nil
}

func (l *ttyLines) prompt() (string, error) {
	var lines []string
	for p := "› "; ; p = "… " {
		line, pasted, err := l.read(p)
		switch {
		case errors.Is(err, ErrInterrupted) && len(lines) > 0:
			return "", nil // the request being written is dropped
		case err != nil:
			return "", err
		}
		more := pasted
		if !pasted {
			l.remember(line)
			if strings.HasSuffix(line, `\`) {
				line, more = line[:len(line)-1], true
			}
		}
		lines = append(lines, line)
		if !more {
			return strings.Join(lines, "\n"), nil
		}
	}
}

// Write shows p above the line being typed, which is drawn again below
// it: for what comes while the user writes (an MCP server that died).
func (l *ttyLines) Write(p []byte) (int, error) { return l.t.Write(p) }

func (l *ttyLines) answer(question string) (string, error) {
	if i := strings.LastIndexByte(question, '\n'); i >= 0 {
		io.WriteString(l.out, question[:i+1])
		question = question[i+1:]
	}
	line, _, err := l.read(question)
	return line, err
}

// read reads one line with the terminal raw; pasted says the whole line
// was pasted.
func (l *ttyLines) read(prompt string) (line string, pasted bool, err error) {
	fd := int(l.in.Fd())
	if w, h, err := term.GetSize(fd); err == nil && w > 0 { // 0 when unknown (a pty nobody sized)
		l.t.SetSize(w, h)
	}
	if err := l.setMode(true); err != nil {
		return "", false, err
	}
	defer l.setMode(false)
	l.t.SetBracketedPasteMode(true)
	l.t.SetPrompt(prompt)
	line, err = l.t.ReadLine()
	if errors.Is(err, term.ErrPasteIndicator) {
		pasted, err = true, nil
	}
	if end := l.keys.end; end != nil {
		l.keys.end = nil
		return "", false, end
	}
	return line, pasted, err
}

// setMode makes the terminal raw while a line is read; between lines it
// is in its own mode without echo: keys typed while the model writes are
// kept for the next prompt, which shows them, instead of being echoed
// into the answer, and Ctrl-C is the kernel's SIGINT.
func (l *ttyLines) setMode(raw bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.restored {
		return io.EOF
	}
	fd := int(l.in.Fd())
	if raw {
		_, err := term.MakeRaw(fd)
		l.raw = err == nil
		return err
	}
	l.pasteOff()
	quiet := l.orig
	quiet.Lflag &^= unix.ECHO
	return unix.IoctlSetTermios(fd, unix.TCSETS, &quiet)
}

// restore puts the terminal back as it was when the chat began; later
// reads fail. It is safe to call from any goroutine, as the signal handler
// does before it exits, and more than once.
func (l *ttyLines) restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.restored {
		l.pasteOff()
		unix.IoctlSetTermios(int(l.in.Fd()), unix.TCSETS, &l.orig)
		l.restored = true
	}
}

// pasteOff turns bracketed paste off if a line was being read (read turns
// it on).
func (l *ttyLines) pasteOff() {
	if l.raw {
		io.WriteString(l.out, "\x1b[?2004l")
		l.raw = false
	}
}

func (l *ttyLines) remember(line string) {
	if err := l.hist.add(line); err != nil && !l.warned {
		l.warned = true
		fmt.Fprintf(l.warn, "! the prompt history is not saved: %v\n", err)
	}
}

// Ctrl-C and Ctrl-D reach term.Terminal as these keys (in Unicode's
// private use area), which it hands to its AutoCompleteCallback, where
// the line they act on is known.
const (
	keyInterrupt = '\uE003'
	keyEOF       = '\uE004'
)

// keyAliases turns Ctrl-C and Ctrl-D into the keys above, and sequences
// term.Terminal does not know into ones it does: Home and End as tmux and
// the Linux console send them, and the application cursor mode's; word
// motion with Ctrl or Alt; Alt-Backspace as Ctrl-W.
var keyAliases = strings.NewReplacer(
	"\x03", string(keyInterrupt), "\x04", string(keyEOF),
	"\x1b[1~", "\x1b[H", "\x1b[7~", "\x1b[H", "\x1bOH", "\x1b[H",
	"\x1b[4~", "\x1b[F", "\x1b[8~", "\x1b[F", "\x1bOF", "\x1b[F",
	"\x1bOA", "\x1b[A", "\x1bOB", "\x1b[B", "\x1bOC", "\x1b[C", "\x1bOD", "\x1b[D",
	"\x1b[1;5C", "\x1b[1;3C", "\x1bf", "\x1b[1;3C",
	"\x1b[1;5D", "\x1b[1;3D", "\x1bb", "\x1b[1;3D",
	"\x1b\x7f", "\x17",
)

// keyReader is the terminal's input as term.Terminal reads it (through
// keyAliases). It hands over input up to a Ctrl-C or Ctrl-D at most, so
// that no key after one is taken into the line it ends.
type keyReader struct {
	r       io.Reader
	buf     [256]byte
	pending []byte
	readErr error // after pending

	end   error // ErrInterrupted or io.EOF: what the line being read comes to
	enter bool  // an Enter for the Terminal next, to finish that line
}

func (k *keyReader) Read(p []byte) (int, error) {
	if k.enter {
		k.enter = false
		p[0] = '\r'
		return 1, nil
	}
	if len(k.pending) == 0 {
		if k.readErr != nil {
			return 0, k.readErr
		}
		n, err := k.r.Read(k.buf[:])
		k.pending = []byte(keyAliases.Replace(string(k.buf[:n])))
		k.readErr = err
		if len(k.pending) == 0 {
			return 0, err
		}
	}
	n := len(k.pending)
	if i := bytes.IndexFunc(k.pending, func(r rune) bool { return r == keyInterrupt || r == keyEOF }); i >= 0 {
		n = i + utf8.RuneLen(keyInterrupt)
	}
	n = copy(p, k.pending[:n])
	k.pending = k.pending[n:]
	return n, nil
}

// key is the Terminal's AutoCompleteCallback: Ctrl-C clears the line, or
// on an empty one interrupts; Ctrl-D deletes the character under the
// cursor, or on an empty line ends the input.
func (k *keyReader) key(line string, pos int, key rune) (string, int, bool) {
	switch key {
	case keyInterrupt:
		if line == "" {
			k.end, k.enter = ErrInterrupted, true
		}
		return "", 0, true
	case keyEOF:
		if line == "" {
			k.end, k.enter = io.EOF, true
			return "", 0, true
		}
		if pos < len(line) {
			_, n := utf8.DecodeRuneInString(line[pos:])
			line = line[:pos] + line[pos+n:]
		}
		return line, pos, true
	}
	return "", 0, false
}
