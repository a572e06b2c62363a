package ide

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// lspSilence is how long a language server may leave one of the page's
// requests unanswered, while it sends nothing at all and its processes
// use no CPU, before it is taken as hung: it is stopped, and the page,
// told so, starts it again. A server loading a big project works (CPU)
// or reports progress (messages), and is left alone.
const lspSilence = 60 * time.Second

// maxPending bounds the requests watched at once.
const maxPending = 10000

// lspWatch watches one running server for that silence. It reads each
// message's id and method, nothing more.
type lspWatch struct {
	pgid    int
	mu      sync.Mutex
	pending map[string]time.Time // the page's requests not yet answered, when sent
	last    time.Time            // the server's last message
	cpu     int64                // the server's processes' CPU ticks, when last looked
	busy    time.Time            // when they last grew
}

func newLSPWatch(pgid int) *lspWatch {
	now := time.Now()
	return &lspWatch{pgid: pgid, pending: map[string]time.Time{}, last: now, busy: now, cpu: groupCPU(pgid)}
}

// envelope is what the watch reads of a message: a request has an id
// and a method, a response an id alone.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// sent notes a message from the page: a request is pending.
func (w *lspWatch) sent(msg []byte) {
	var e envelope
	if json.Unmarshal(msg, &e) != nil || len(e.ID) == 0 || e.Method == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) < maxPending {
		w.pending[string(e.ID)] = time.Now()
	}
}

// heard notes a message from the server: it answers one request, if any.
func (w *lspWatch) heard(msg []byte) {
	var e envelope
	json.Unmarshal(msg, &e)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = time.Now()
	if len(e.ID) > 0 && e.Method == "" {
		delete(w.pending, string(e.ID))
	}
}

// hung says whether, at now, a request has waited silence or more while
// the server said nothing and its processes used no CPU for as long.
func (w *lspWatch) hung(now time.Time, silence time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cpu := groupCPU(w.pgid); cpu != w.cpu {
		w.cpu, w.busy = cpu, now
	}
	if now.Sub(w.last) < silence || now.Sub(w.busy) < silence {
		return false
	}
	for _, t := range w.pending {
		if now.Sub(t) >= silence {
			return true
		}
	}
	return false
}

// run looks every quarter of silence until ctx ends, and says on done
// when the server is hung.
func (w *lspWatch) run(ctx context.Context, silence time.Duration, done chan<- lspEnd) {
	t := time.NewTicker(max(silence/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if w.hung(now, silence) {
				done <- lspEnd{closeServerEnded, fmt.Sprintf("the language server left a request unanswered for %s, silent and idle: stopped, it starts again", silence)}
				return
			}
		}
	}
}

// groupCPU is the CPU time (in clock ticks) the processes of group pgid
// have used, from /proc; 0 when it cannot be read.
func groupCPU(pgid int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command's name in parentheses: state, ppid, pgrp, …,
		// utime (the 12th), stime (the 13th).
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + k
	}
	return sum
}
