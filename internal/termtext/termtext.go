// Package termtext makes text from the workspace safe to show on the
// host's terminal: control characters (an escape sequence that sets the
// clipboard with OSC 52, moves the cursor to rewrite what the user sees,
// or retitles the window) are shown as their pictures, never obeyed.
package termtext

import (
	"io"
	"strings"
	"unicode/utf8"
)

// Visible returns s with every control character but newline and tab
// shown as its picture (␛ for escape), C1 controls and invalid bytes as
// U+FFFD, and carriage returns dropped.
func Visible(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteString(picture(r))
	}
	return b.String()
}

func isControl(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' || r >= 0x7f && r < 0xa0 || r == utf8.RuneError
}

func picture(r rune) string {
	switch {
	case r == '\r':
		return ""
	case r == '\t' || r == '\n':
		return string(r)
	case r < 0x20:
		return string(0x2400 + r)
	case r == 0x7f:
		return "\u2421"
	case isControl(r):
		return string(utf8.RuneError)
	}
	return string(r)
}

// Writer passes what is written through Visible, keeping a character cut
// between two writes whole.
type Writer struct {
	w    io.Writer
	tail []byte // the start of a character the next write ends
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write implements io.Writer; it reports len(p) written when w took all.
func (t *Writer) Write(p []byte) (int, error) {
	buf := append(t.tail, p...)
	t.tail = nil
	// A character cut at the end waits for its next bytes.
	if i := lastStart(buf); i >= 0 && !utf8.FullRune(buf[i:]) {
		t.tail = append([]byte(nil), buf[i:]...)
		buf = buf[:i]
	}
	if _, err := io.WriteString(t.w, Visible(string(buf))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// lastStart is where the last (possibly partial) character of b begins,
// -1 when b is empty.
func lastStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return len(b) - 1
}
