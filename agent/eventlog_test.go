package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

func ids(t *testing.T, evs []json.RawMessage) []int64 {
	t.Helper()
	var out []int64
	for _, b := range evs {
		var e struct {
			ID   int64
			Type string
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Type == "" {
			t.Fatalf("event %s: %v", b, err)
		}
		out = append(out, e.ID)
	}
	return out
}

func TestEventLogReplaysAfterAnID(t *testing.T) {
	l := NewEventLog(100)
	if l.Last() != 0 {
		t.Fatalf("Last of an empty log = %d", l.Last())
	}
	for range 5 {
		l.Add(LoopEvent{Type: "text", Text: "x"})
	}
	evs, last, err := l.Since(context.Background(), 2)
	if err != nil || last != 5 {
		t.Fatalf("Since(2): last %d, %v", last, err)
	}
	if got := ids(t, evs); len(got) != 3 || got[0] != 3 || got[2] != 5 {
		t.Fatalf("after 2: ids %v, want 3 4 5", got)
	}
	if string(evs[0]) != `{"id":3,"type":"text","text":"x"}` {
		t.Errorf("event: %s", evs[0])
	}

	// A reader that has seen everything waits for the next.
	got := make(chan []int64, 1)
	go func() {
		evs, _, _ := l.Since(context.Background(), 5)
		got <- ids(t, evs)
	}()
	select {
	case g := <-got:
		t.Fatalf("Since returned %v before anything was added", g)
	case <-time.After(50 * time.Millisecond):
	}
	l.Add(LoopEvent{Type: "done"})
	select {
	case g := <-got:
		if len(g) != 1 || g[0] != 6 {
			t.Fatalf("woken with %v, want [6]", g)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Since did not wake on Add")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.Since(ctx, 6); err == nil {
		t.Error("Since with an ended context and nothing new did not return its error")
	}
}

func TestEventLogKeepsTheNewest(t *testing.T) {
	l := NewEventLog(10)
	for range 25 {
		l.Add(map[string]string{"type": "text"})
	}
	evs, _, _ := l.Since(context.Background(), 0)
	got := ids(t, evs)
	if len(got) > 10 || got[len(got)-1] != 25 {
		t.Fatalf("kept %v, want at most 10 ending at 25", got)
	}
	for i := 1; i < len(got); i++ {
		if got[i] != got[i-1]+1 {
			t.Fatalf("ids not consecutive: %v", got)
		}
	}
	if l.Last() != 25 {
		t.Errorf("Last = %d", l.Last())
	}
}
