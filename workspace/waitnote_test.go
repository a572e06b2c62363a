package workspace

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWaitNoteSaysWhatItWaitsFor: a step that lasts past the limit is
// said once, on its own; a quick one is not.
func TestWaitNoteSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	n := newWaitNote(&out, 200*time.Millisecond)
	defer n.stop()
	n.step("quick")
	time.Sleep(50 * time.Millisecond)
	n.step("the slow thing")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "waiting: the slow thing") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if got := out.String(); strings.Count(got, "waiting:") != 1 || !strings.Contains(got, "cove: waiting: the slow thing") {
		t.Errorf("said %q, want the slow step once", got)
	}
}
