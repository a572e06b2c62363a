// Package testbuf is a test's view of a program's output: a buffer safe
// to read while it is written, with a way to wait for some text.
package testbuf

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects what is written to it. Make one with New.
type Buffer struct {
	mu  sync.Mutex
	b   strings.Builder
	new chan struct{}
}

// New returns an empty Buffer.
func New() *Buffer { return &Buffer{new: make(chan struct{}, 1)} }

// Write adds p and wakes a waiter.
func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.new <- struct{}{}:
	default:
	}
	return len(p), nil
}

// String is all that was written.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// WaitFor waits until s has been written, failing t after 20 seconds.
func (w *Buffer) WaitFor(t testing.TB, s string) {
	t.Helper()
	w.WaitForNth(t, s, 1)
}

// WaitForNth waits until s has been written n times, failing t after 20
// seconds.
func (w *Buffer) WaitForNth(t testing.TB, s string, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for strings.Count(w.String(), s) < n {
		select {
		case <-w.new:
		case <-deadline:
			t.Fatalf("no %q (%d) in the output:\n%q", s, n, w.String())
		}
	}
}
