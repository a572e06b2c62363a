package ide

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/termtext"
)

// DefaultNotesLimit is how much of its record a Notes keeps by default:
// the newest 256 KiB of lines.
const DefaultNotesLimit = 256 << 10

// MaxNoteLine is the longest line a Notes keeps, in bytes; a longer one
// is cut there and says so.
const MaxNoteLine = 4 << 10

// The kinds of a NoteLine.
const (
	// NoteKind is a line that says what cove did not do as asked (a
	// devcontainer.json key it ignores, a port it forwards on loopback
	// only, a runArg it dropped) or a warning: "cove: note: …",
	// "cove: warning: …".
	NoteKind = "note"
	// CoveKind is any other line of the launcher's ("cove: …"), such as
	// the lifecycle command about to run.
	CoveKind = "cove"
	// OutputKind is the output of a command (a lifecycle command's).
	OutputKind = "output"
)

// NoteLine is one line of a Notes record.
type NoteLine struct {
	// ID counts the lines written, from 1: a reader that saw up to ID
	// asks for what came after it.
	ID int64 `json:"id"`
	// Kind is NoteKind, CoveKind or OutputKind.
	Kind string `json:"kind"`
	// Text is the line without its newline, with no control character
	// in it but tab, at most MaxNoteLine bytes of valid UTF-8. It may
	// hold anything else the workspace printed (<b>, a fake "cove: note:"
	// line): the page shows it as text.
	Text string `json:"text"`
}

// Notes is the launcher's record of what it said about a workspace, for
// the IDE's workspace log: its notes (what cove did not honour), and the
// lifecycle commands' output. It is an io.Writer that takes the same
// bytes as the launcher's stderr; each whole line is kept, made safe to
// show (terminal control sequences removed, other control characters as
// their pictures, invalid UTF-8 replaced, cut at MaxNoteLine), up to
// Limit bytes of the newest lines: older ones are dropped, and a reader
// that missed them is told how many. A note said twice is kept once.
//
// Lifecycle output is the workspace's (hostile): Notes makes it text, and
// the page must show it as text (textContent), never as HTML.
//
// Notes is an http.Handler for GET /api/notes (see ServeHTTP), to be
// served behind the Proxy's checks (Proxy.Handle). Its zero value keeps
// DefaultNotesLimit; it is safe for concurrent use.
type Notes struct {
	// Limit is how many bytes of lines are kept (0: DefaultNotesLimit).
	// Set it before the first Write.
	Limit int

	mu      sync.Mutex
	lines   []NoteLine
	size    int    // bytes of text in lines
	last    int64  // the last line's ID
	partial []byte // a line not ended yet
	cut     bool   // the partial line was cut: the rest of it is dropped
	said    map[string]bool
	changed chan struct{} // closed when a line comes
}

// Write takes the launcher's output; a line is recorded once its newline
// comes. It never fails.
func (n *Notes) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		chunk := rest
		if i >= 0 {
			chunk = rest[:i]
		}
		if !n.cut {
			// The line is cut at MaxNoteLine, but control sequences,
			// removed later, may count for much of it: keep some more.
			room := 2*MaxNoteLine - len(n.partial)
			if len(chunk) > room {
				chunk, n.cut = chunk[:room], true
			}
			n.partial = append(n.partial, chunk...)
		}
		if i < 0 {
			break
		}
		n.add(string(n.partial), n.cut, "")
		n.partial, n.cut = n.partial[:0], false
		rest = rest[i+1:]
	}
	return len(p), nil
}

// csi matches a terminal's control sequences (colours, cursor moves) and
// OSC strings (titles, links), raw or shown as pictures (␛) by termtext.
var csi = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:\x1b|\x{241b})(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\x{2407}\x{241b}]*(?:\x07|\x{2407}|(?:\x1b|\x{241b})\\)?)`)
})

// Restore records lines another Notes kept (Lines), each with its own
// kind: what cove up --detach said, for its background launcher.
func (n *Notes) Restore(lines []NoteLine) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, l := range lines {
		switch l.Kind {
		case NoteKind, CoveKind, OutputKind:
			n.add(l.Text, false, l.Kind)
		}
	}
}

// add records one line, of kind, or of the kind it reads as when kind is
// ""; n.mu is held.
func (n *Notes) add(raw string, cut bool, kind string) {
	text := termtext.Visible(csi().ReplaceAllString(raw, ""))
	if len(text) > MaxNoteLine {
		i := MaxNoteLine
		for i > 0 && !utf8.RuneStart(text[i]) {
			i--
		}
		text, cut = text[:i], true
	}
	if cut {
		text += " … (cut: the line is longer than " + strconv.Itoa(MaxNoteLine) + " bytes)"
	}
	// The kind is read from the line as written, before its control
	// sequences go: cove writes its own lines plain, and a command's
	// output that hides an escape before "cove: note:" is output.
	if kind == "" {
		kind = OutputKind
		switch {
		case strings.HasPrefix(raw, "cove: note: "), strings.HasPrefix(raw, "cove: warning: "):
			kind = NoteKind
		case strings.HasPrefix(raw, "cove: "):
			kind = CoveKind
		}
	}
	if kind == NoteKind {
		if n.said[text] {
			return
		}
		if n.said == nil || len(n.said) > 4096 {
			n.said = map[string]bool{}
		}
		n.said[text] = true
	}
	n.last++
	n.lines = append(n.lines, NoteLine{ID: n.last, Kind: kind, Text: text})
	n.size += len(text)
	limit := n.Limit
	if limit <= 0 {
		limit = DefaultNotesLimit
	}
	drop := 0
	for n.size > limit && drop < len(n.lines)-1 {
		n.size -= len(n.lines[drop].Text)
		drop++
	}
	if drop > 0 {
		n.lines = append(n.lines[:0:0], n.lines[drop:]...)
	}
	if n.changed != nil {
		close(n.changed)
		n.changed = nil
	}
}

// Lines returns the lines kept after the line after (0: all), and how
// many lines after it were dropped before they could be read.
func (n *Notes) Lines(after int64) (lines []NoteLine, dropped int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	lines, dropped, _ = n.since(after)
	return lines, dropped
}

// since is Lines, and a channel closed when a line comes; n.mu is held.
func (n *Notes) since(after int64) ([]NoteLine, int64, <-chan struct{}) {
	if after < 0 || after > n.last {
		after = 0 // a reader from another launcher's record
	}
	var dropped int64
	i := 0
	if len(n.lines) > 0 {
		if first := n.lines[0].ID; after < first-1 {
			dropped = first - 1 - after
		} else {
			i = int(after - first + 1)
		}
	}
	lines := append([]NoteLine(nil), n.lines[i:]...)
	if n.changed == nil {
		n.changed = make(chan struct{})
	}
	return lines, dropped, n.changed
}

// Next waits for lines after the line after, and returns them (as
// Lines), or ctx's error when it ends first.
func (n *Notes) Next(ctx context.Context, after int64) ([]NoteLine, int64, error) {
	for {
		n.mu.Lock()
		lines, dropped, changed := n.since(after)
		n.mu.Unlock()
		if len(lines) > 0 || dropped > 0 {
			return lines, dropped, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// notesPage is what GET /api/notes answers, and each message of its
// WebSocket.
type notesPage struct {
	Lines []NoteLine `json:"lines"`
	// Dropped is how many lines came before these that are no longer
	// kept (the record holds the newest Limit bytes).
	Dropped int64 `json:"dropped,omitempty"`
}

// ServeHTTP serves the record: GET /api/notes?after=ID answers
// {"lines":[{id, kind, text}…], "dropped":N} with the lines after ID
// (all without it); as a WebSocket it sends the same, one message for
// what is kept, then one for each new line or lines as they come (the
// page only listens; it reconnects with the last id it saw).
func (n *Notes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "cove: GET only", http.StatusMethodNotAllowed)
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if !isWebSocket(r) {
		lines, dropped := n.Lines(after)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(notesPage{Lines: nonNil(lines), Dropped: dropped})
		return
	}
	c, err := websocket.Accept(w, r, acceptOptions())
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx := c.CloseRead(r.Context())
	lines, dropped := n.Lines(after)
	for {
		b, _ := json.Marshal(notesPage{Lines: nonNil(lines), Dropped: dropped})
		if c.Write(ctx, websocket.MessageText, b) != nil {
			return
		}
		if len(lines) > 0 {
			after = lines[len(lines)-1].ID
		}
		if lines, dropped, err = n.Next(ctx, after); err != nil {
			return
		}
	}
}

func nonNil(l []NoteLine) []NoteLine {
	if l == nil {
		return []NoteLine{}
	}
	return l
}
