package terminal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/testbuf"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestTTYLines types at the chat's prompt on a real terminal (a pty):
// editing keys, the history, Ctrl-C and Ctrl-D, requests of several lines
// (a backslash, a bracketed paste) and an approval's answer. Each line is
// typed once the prompt shows, when the terminal is raw.
func TestTTYLines(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80})
	out := testbuf.New()
	go io.Copy(out, ptmx)
	histFile := filepath.Join(t.TempDir(), "agent_history")
	hist, _ := loadHistory(histFile)
	lines, err := newTTYLines(tty, tty, hist, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		keys, want string
		err        error
	}{
		{"hello\r", "hello", nil},
		{"\x1b[A\r", "hello", nil},                      // Up
		{"world\x01hello \x05!\r", "hello world!", nil}, // Ctrl-A, Ctrl-E
		{"\x1b[A\x1b[A\x1b[B\r", "hello world!", nil},   // Up, Up, Down
		{"abc def\x17\r", "abc ", nil},                  // Ctrl-W
		{"abc\x1b[D\x1b[D\x0bxyz\r", "axyz", nil},       // Left, Ctrl-K
		{"abc\x15xyz\r", "xyz", nil},                    // Ctrl-U
		{"bc\x1b[1~a\x1b[4~d\r", "abcd", nil},           // Home, End as tmux sends them
		{"ab\x1b[D\x04\r", "a", nil},                    // Ctrl-D on a character deletes it
		{"junk\x03next\r", "next", nil},                 // Ctrl-C clears the line
		{"one \\\rtwo\r", "one \ntwo", nil},
		{"\x1b[200~p1\rp2\x1b[201~\r", "p1\np2", nil}, // pasted
		{"draft \\\r\x03", "", nil},                   // Ctrl-C on a next line drops the request
		{"\x03", "", ErrInterrupted},
		{"\x04", "", io.EOF},
	} {
		prompts := strings.Count(out.String(), "› ")
		done := make(chan struct{})
		var got string
		var err error
		go func() { got, err = lines.prompt(); close(done) }()
		out.WaitForNth(t, "› ", prompts+1)
		io.WriteString(ptmx, tc.keys)
		<-done
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("typed %q: %q, %v; want %q, %v", tc.keys, got, err, tc.want, tc.err)
		}
	}

	// An approval's answer is read the same way, and is no prompt to recall.
	done := make(chan struct{})
	var got string
	go func() { got, _ = lines.answer("--- a diff\nrun it? "); close(done) }()
	out.WaitFor(t, "run it? ")
	io.WriteString(ptmx, "y\r")
	<-done
	if got != "y" || !strings.Contains(out.String(), "--- a diff\r\n") {
		t.Errorf("answer %q", got)
	}

	want := []string{"hello", "hello world!", "abc ", "axyz", "xyz", "abcd", "a", "next", `one \`, "two", "p2", `draft \`}
	if !slices.Equal(hist.entries, want) {
		t.Errorf("history %q\nwant %q", hist.entries, want)
	}
	if b, _ := os.ReadFile(histFile); string(b) != strings.Join(want, "\n")+"\n" {
		t.Errorf("history file %q", b)
	}
	// Between lines the terminal is canonical, with signals (Ctrl-C is
	// SIGINT during a turn) but no echo; restore gives the echo back.
	lflag := func() uint32 {
		tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		return tio.Lflag & (unix.ICANON | unix.ECHO | unix.ISIG)
	}
	if got := lflag(); got != unix.ICANON|unix.ISIG {
		t.Errorf("between lines, lflag %#x", got)
	}
	lines.restore()
	if got := lflag(); got != unix.ICANON|unix.ECHO|unix.ISIG {
		t.Errorf("restored, lflag %#x", got)
	}
	if _, err := lines.prompt(); err == nil {
		t.Error("a prompt after restore")
	}
}

// TestTTYLinesNoteKeepsTheLine: a note written while a request is being
// typed (an MCP server's death) shows above it, and the line goes on as
// typed, drawn again after the note.
func TestTTYLinesNoteKeepsTheLine(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	pty.Setsize(ptmx, &pty.Winsize{Rows: 24, Cols: 80})
	out := testbuf.New()
	go io.Copy(out, ptmx)
	hist, _ := loadHistory(filepath.Join(t.TempDir(), "h"))
	lines, err := newTTYLines(tty, tty, hist, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer lines.restore()
	done := make(chan struct{})
	var got string
	go func() { got, _ = lines.prompt(); close(done) }()
	out.WaitFor(t, "› ")
	io.WriteString(ptmx, "half a req")
	out.WaitFor(t, "half a req")
	fmt.Fprintf(lines, "! MCP web (workspace, http, .mcp.json): restarting\n")
	out.WaitFor(t, "restarting\r\n")
	out.WaitForNth(t, "half a req", 2) // drawn again below the note
	io.WriteString(ptmx, "uest\r")
	<-done
	if got != "half a request" {
		t.Errorf("the line after the note: %q", got)
	}
	screen := out.String()
	if i, j := strings.Index(screen, "restarting\r\n"), strings.LastIndex(screen, "› half a req"); i < 0 || j < i {
		t.Errorf("the note is not above the line drawn again:\n%q", screen)
	}
}

// TestTraceShowsCallsBriefly: the trace names a call in a few words (not
// its JSON), shows a command's output once (as it runs, then only how it
// ended), and a diff on a terminal is coloured.
func TestTraceShowsCallsBriefly(t *testing.T) {
	var out strings.Builder
	emit := Trace(&out)
	emit(agent.LoopEvent{Type: "tool_call", Call: &agent.ToolCall{Name: "bash", Args: json.RawMessage(`{"command":"make test\nmake lint"}`)}})
	emit(agent.LoopEvent{Type: "tool_output", Text: "ok 1\nok 2\n"})
	emit(agent.LoopEvent{Type: "tool_result", Text: "ok 1\nok 2\n[exit status 0]"})
	emit(agent.LoopEvent{Type: "tool_call", Call: &agent.ToolCall{Name: "edit", Args: json.RawMessage(`{"path":"a.go","edits":[{"old":"x","new":"y"}]}`)}})
	emit(agent.LoopEvent{Type: "tool_result", Text: "edited a.go"})
	want := "· bash: make test …\n  │ ok 1\n  │ ok 2\n  → [exit status 0]\n· edit a.go\n  → edited a.go\n"
	if out.String() != want {
		t.Errorf("trace:\n%s\nwant:\n%s", out.String(), want)
	}
	if got := colourDiff("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n", true); !strings.Contains(got, "\x1b[31m-x\x1b[m\n") || !strings.Contains(got, "\x1b[32m+y\x1b[m\n") {
		t.Errorf("coloured diff: %q", got)
	}
	if got := colourDiff("-x\n", false); got != "-x\n" {
		t.Errorf("without colour: %q", got)
	}
}
