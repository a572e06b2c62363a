package launcher

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer written from one goroutine, read from another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClaimWaitsForTheFirstCove: a second cove up while the first holds
// the workspace's launcher lock (starting it) says it waits, and takes
// the lock once the first lets go without serving; one that is never let
// go gives up, saying what to do.
func TestClaimWaitsForTheFirstCove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var said syncBuffer
	c := Claim{Dir: dir, Name: "p-1234", Stderr: &said, Poll: 5 * time.Millisecond, Patience: time.Minute}
	first, url, err := c.LockOrWait(context.Background())
	if err != nil || first == nil || url != "" {
		t.Fatalf("the first claim: %v, %q, %v", first, url, err)
	}
	type got struct {
		lock bool
		err  error
	}
	second := make(chan got, 1)
	go func() {
		lock, _, err := c.LockOrWait(context.Background())
		if lock != nil {
			defer lock.Close()
		}
		second <- got{lock != nil, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(said.String(), "waiting for it"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the second claim did not say it waits: %q", said.String())
		}
	}
	select {
	case g := <-second:
		t.Fatalf("the second claim returned while the first held the lock: %+v", g)
	default:
	}
	first.Close()
	select {
	case g := <-second:
		if !g.lock || g.err != nil {
			t.Fatalf("the second claim after the first let go: %+v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second claim still waits after the first let go")
	}

	held, _, err := c.LockOrWait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c.Patience = 50 * time.Millisecond
	if _, _, err := c.LockOrWait(context.Background()); err == nil || !strings.Contains(err.Error(), "cove ps") {
		t.Errorf("a claim on a lock never let go: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Patience = time.Minute
	if _, _, err := c.LockOrWait(ctx); err != context.Canceled {
		t.Errorf("an interrupted claim: %v", err)
	}
}
