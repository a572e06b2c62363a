// Package tailbuf keeps the end of what a process wrote (a language or
// MCP server's stderr): enough to say why it ended, however much it wrote.
package tailbuf

import (
	"strings"
	"sync"
)

// Buffer keeps the last Max bytes written to it; safe for concurrent use.
type Buffer struct {
	Max int

	mu sync.Mutex
	b  []byte
}

// New returns a Buffer that keeps the last max bytes.
func New(max int) *Buffer { return &Buffer{Max: max} }

// Write keeps the end of p; it never fails.
func (t *Buffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.Max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.Max:]...)
	}
	return len(p), nil
}

// String is what is kept.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// LastLine is the last non-empty line kept, trimmed.
func (t *Buffer) LastLine() string {
	lines := strings.Split(strings.TrimSpace(t.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
