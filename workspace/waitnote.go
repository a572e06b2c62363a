package workspace

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// waitNote says on stderr what a start waits for when a step of it takes
// longer than a few seconds without a word (a large image's extraction, a
// service's healthcheck, the IDE server), so that a cove up that waits is
// never silent.
type waitNote struct {
	mu    sync.Mutex
	w     io.Writer
	what  string
	since time.Time
	said  bool
	done  chan struct{}
}

// newWaitNote starts the watch: a step unchanged for after is said once.
func newWaitNote(w io.Writer, after time.Duration) *waitNote {
	n := &waitNote{w: w, done: make(chan struct{}), since: time.Now()}
	go func() {
		t := time.NewTicker(after / 4)
		defer t.Stop()
		for {
			select {
			case <-n.done:
				return
			case <-t.C:
				n.mu.Lock()
				if n.what != "" && !n.said && time.Since(n.since) >= after {
					fmt.Fprintf(n.w, "cove: waiting: %s (%ds so far)\n", n.what, int(time.Since(n.since).Seconds()))
					n.said = true
				}
				n.mu.Unlock()
			}
		}
	}()
	return n
}

// step says what the start does now.
func (n *waitNote) step(what string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.what, n.since, n.said = what, time.Now(), false
}

// stop ends the watch.
func (n *waitNote) stop() { close(n.done) }
