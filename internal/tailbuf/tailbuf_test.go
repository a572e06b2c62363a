package tailbuf

import (
	"strings"
	"testing"
)

func TestBufferKeepsTheEnd(t *testing.T) {
	b := New(10)
	b.Write([]byte("first line\n"))
	b.Write([]byte(strings.Repeat("x", 3) + "\nlast\n\n"))
	if got := b.String(); got != "xxx\nlast\n\n" {
		t.Errorf("kept %q", got)
	}
	if got := b.LastLine(); got != "last" {
		t.Errorf("LastLine = %q", got)
	}
	if got := New(4).LastLine(); got != "" {
		t.Errorf("empty LastLine = %q", got)
	}
}
