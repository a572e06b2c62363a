package ide

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestNotesKeepWholeLinesSafe: a line is kept once whole, whatever the
// writes cut it into; the launcher's notes are told from its other lines
// and from command output, and a note said twice is kept once; what the
// workspace printed loses its terminal control sequences (colours, a
// title, the clipboard by OSC 52), keeps its other bytes as text, and is
// cut at MaxNoteLine.
func TestNotesKeepWholeLinesSafe(t *testing.T) {
	var n Notes
	for _, w := range []string{
		"cove: note: devcontainer.json: forwardPorts: 0.0.0.0:8080 is forwarded on 127.0.0.1 only\n",
		"cove: postCreateCommand: echo hi\nmar", "ker \x1b[1m<b>x</b>\x1b[0m \x1b]0;title\x07\x1b]52;c;aGk=\x1b\\done\r\n",
		"␛[31mred␛[0m bell\x07 bad\xff\n",
		"cove: note: devcontainer.json: forwardPorts: 0.0.0.0:8080 is forwarded on 127.0.0.1 only\n",
		"cove: warning: postStartCommand (false) failed with exit status 1\n",
		strings.Repeat("é", MaxNoteLine) + "\n",
		"not ended yet",
	} {
		if k, err := n.Write([]byte(w)); k != len(w) || err != nil {
			t.Fatalf("Write: %d, %v", k, err)
		}
	}
	lines, dropped := n.Lines(0)
	if dropped != 0 || len(lines) != 6 {
		t.Fatalf("%d lines (%d dropped): %+v", len(lines), dropped, lines)
	}
	want := []NoteLine{
		{1, NoteKind, "cove: note: devcontainer.json: forwardPorts: 0.0.0.0:8080 is forwarded on 127.0.0.1 only"},
		{2, CoveKind, "cove: postCreateCommand: echo hi"},
		{3, OutputKind, "marker <b>x</b> done"},
		{4, OutputKind, "red bell␇ bad\uFFFD"},
		{5, NoteKind, "cove: warning: postStartCommand (false) failed with exit status 1"},
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %+v, want %+v", i+1, lines[i], w)
		}
	}
	long := lines[5].Text
	if !strings.HasPrefix(long, strings.Repeat("é", MaxNoteLine/2)+" … (cut") || len(long) > MaxNoteLine+80 {
		t.Errorf("a long line: %d bytes, ends %q", len(long), long[len(long)-60:])
	}
	if got, _ := n.Lines(3); len(got) != 3 || got[0].ID != 4 {
		t.Errorf("after 3: %+v", got)
	}
}

// TestNotesBounded: the record keeps the newest Limit bytes; a reader
// that starts before them is told how many lines it missed, and a line
// as long as a Notes takes does not grow what it keeps.
func TestNotesBounded(t *testing.T) {
	n := Notes{Limit: 10 << 10}
	for i := range 2000 {
		fmt.Fprintf(&n, "line %04d %s\n", i, strings.Repeat("x", 90))
	}
	fmt.Fprintf(&n, "%s\n", strings.Repeat("y", 1<<20)) // a megabyte, no newline for a while
	lines, dropped := n.Lines(0)
	size := 0
	for _, l := range lines {
		size += len(l.Text)
	}
	if size > 10<<10 || len(lines) < 50 {
		t.Errorf("kept %d lines, %d bytes; want the newest 10 KiB", len(lines), size)
	}
	if last := lines[len(lines)-1]; last.ID != 2001 || dropped != 2001-int64(len(lines)) || lines[0].ID != dropped+1 {
		t.Errorf("last %d, first %d, dropped %d", last.ID, lines[0].ID, dropped)
	}
	if got, d := n.Lines(1990); d != 0 || got[0].ID != 1991 {
		t.Errorf("after 1990: first %d, dropped %d", got[0].ID, d)
	}
}

// TestNotesFollow: Next waits for the next line and returns it; many
// writers at once lose no line.
func TestNotesFollow(t *testing.T) {
	var n Notes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got := make(chan []NoteLine, 1)
	go func() {
		l, _, _ := n.Next(ctx, 0)
		got <- l
	}()
	time.Sleep(50 * time.Millisecond)
	n.Write([]byte("cove: note: one\n"))
	if l := <-got; len(l) != 1 || l[0].Text != "cove: note: one" {
		t.Errorf("Next: %+v", l)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&n, "writer %d line %d\n", w, i)
			}
		}()
	}
	seen := 1
	for after := int64(1); seen < 801; {
		l, _, err := n.Next(ctx, after)
		if err != nil {
			t.Fatalf("after %d lines: %v", seen, err)
		}
		seen += len(l)
		after = l[len(l)-1].ID
	}
	wg.Wait()
	short, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	if _, _, err := n.Next(short, 801); err == nil {
		t.Error("Next returned with nothing new")
	}
}

// TestNotesRoute: /api/notes behind the proxy answers the record to a
// window with the token, and follows it over a WebSocket from the page's
// own origin; without the token, or from another origin, it is refused,
// and it never reaches the workspace.
func TestNotesRoute(t *testing.T) {
	reached := false
	p, base := behindProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	var n Notes
	p.Handle("/api/notes", &n)
	n.Write([]byte("cove: note: first\n"))
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if code, body := get(t, c, base+"/api/notes", nil); code != http.StatusUnauthorized || strings.Contains(body, "first") {
		t.Errorf("without the token: %d %q", code, body)
	}
	if code, body := get(t, c, base+"/api/notes", map[string]string{tokenHeader: "wrong"}); code != http.StatusUnauthorized || strings.Contains(body, "first") {
		t.Errorf("a wrong token: %d %q", code, body)
	}
	code, body := get(t, c, base+"/api/notes", map[string]string{tokenHeader: p.Token})
	var page notesPage
	if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Lines) != 1 || page.Lines[0].Kind != NoteKind {
		t.Errorf("with the token: %d %q", code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := strings.Replace(base, "http", "ws", 1) + "/api/notes?after=1"
	dial := func(origin, token string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}, tokenHeader: {token}}})
	}
	for _, bad := range []struct{ origin, token string }{{"http://evil.example", p.Token}, {base, "wrong"}} {
		if c, _, err := dial(bad.origin, bad.token); err == nil {
			c.CloseNow()
			t.Errorf("origin %s, token %s: let in", bad.origin, bad.token)
		}
	}
	conn, _, err := dial(base, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	read := func() notesPage {
		t.Helper()
		_, b, err := conn.Read(ctx)
		var pg notesPage
		if err != nil || json.Unmarshal(b, &pg) != nil {
			t.Fatalf("read: %v %q", err, b)
		}
		return pg
	}
	if pg := read(); len(pg.Lines) != 0 {
		t.Errorf("after 1, at first: %+v", pg)
	}
	n.Write([]byte("postCreate says <b>x</b>\n"))
	if pg := read(); len(pg.Lines) != 1 || pg.Lines[0] != (NoteLine{2, OutputKind, "postCreate says <b>x</b>"}) {
		t.Errorf("followed: %+v", pg)
	}
	if reached {
		t.Error("/api/notes reached the workspace's server")
	}
}

// TestNotesKindFromTheLineAsWritten: a line whose escape sequences hide
// "cove: note:" behind them is output, not one of cove's notes, though
// the log shows it without the escapes.
func TestNotesKindFromTheLineAsWritten(t *testing.T) {
	var n Notes
	n.Write([]byte("\x1b[0mcove: note: hidden\n␛[1mcove: warning: pictured\ncove: note: real\n"))
	lines, _ := n.Lines(0)
	kinds := map[string]string{}
	for _, l := range lines {
		kinds[l.Text] = l.Kind
	}
	if kinds["cove: note: hidden"] != OutputKind || kinds["cove: warning: pictured"] != OutputKind || kinds["cove: note: real"] != NoteKind {
		t.Errorf("kinds %v", kinds)
	}
}
