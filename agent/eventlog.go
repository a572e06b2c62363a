package agent

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
)

// EventLog numbers the events of a conversation (1, 2, 3…) and keeps them
// for readers that come and go: the IDE's panel reconnects after a reload
// or a dropped connection with the last id it saw, and gets what it
// missed, then what follows as it happens. The newest max events are kept.
// Safe for concurrent use.
type EventLog struct {
	mu      sync.Mutex
	events  []json.RawMessage // events[i] has id first+i
	first   int64
	max     int
	changed chan struct{} // closed and replaced by Add
}

// NewEventLog makes a log that keeps the newest max events.
func NewEventLog(max int) *EventLog {
	return &EventLog{first: 1, max: max, changed: make(chan struct{})}
}

// Add numbers v, keeps it and wakes the readers; it returns the id. v must
// encode as a JSON object: the id goes in as its "id" member.
func (l *EventLog) Add(v any) int64 {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		b, _ = json.Marshal(map[string]string{"type": "error", "text": "an event that does not encode"})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.first + int64(len(l.events))
	ev := append([]byte(`{"id":`), strconv.FormatInt(id, 10)...)
	if len(b) > 2 {
		ev = append(ev, ',')
	}
	ev = append(ev, b[1:]...)
	l.events = append(l.events, ev)
	if len(l.events) > l.max {
		// Drop a tenth at a time, so that trimming is rare.
		n := len(l.events) - l.max + l.max/10
		l.events = append([]json.RawMessage(nil), l.events[n:]...)
		l.first += int64(n)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return id
}

// Last is the id of the newest event, 0 before the first.
func (l *EventLog) Last() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first + int64(len(l.events)) - 1
}

// Since returns the events after the one numbered after, oldest first,
// and the id of the last of them, waiting until there is one or ctx ends.
// Those no longer kept are skipped: the first returned then has an id
// above after+1.
func (l *EventLog) Since(ctx context.Context, after int64) ([]json.RawMessage, int64, error) {
	for {
		l.mu.Lock()
		from := max(after+1-l.first, 0)
		if n := int64(len(l.events)); from < n {
			evs := l.events[from:n:n]
			last := l.first + n - 1
			l.mu.Unlock()
			return evs, last, nil
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, after, ctx.Err()
		}
	}
}
