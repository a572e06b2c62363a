package main

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// watchedBuffer is a command's output, safe to read while it is written,
// with a way to wait for some text. (agent/terminal's tests have the same
// for the chat's output: a test helper is not worth a package.)
type watchedBuffer struct {
	mu  sync.Mutex
	b   strings.Builder
	new chan struct{}
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.new <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *watchedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *watchedBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	w.waitForNth(t, s, 1)
}

// waitForNth waits until s has been written n times.
func (w *watchedBuffer) waitForNth(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for strings.Count(w.String(), s) < n {
		select {
		case <-w.new:
		case <-deadline:
			t.Fatalf("no %q (%d) in the chat:\n%q", s, n, w.String())
		}
	}
}
