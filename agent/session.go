package agent

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// Session is an append-only JSONL log of one conversation (ID.jsonl in a
// sessions directory, the project's host-only state: the workspace can
// neither forge nor read it): every message, decision and compaction, one
// JSON object a line, written as it happens. It is the audit log, and what
// -c, -r and the panel go on with. The full transcript stays there even
// when compaction shortens what the model sees.
type Session struct {
	ID   string
	Path string
	// Turns are the prompts of a resumed session that have a checkpoint,
	// oldest first (since its last compaction), for rewinding to them.
	Turns []Turn
	mu    sync.Mutex
	f     *os.File
}

// Turn is where a prompt began: the checkpoint taken then, and how many
// messages of the conversation came before it.
type Turn struct {
	Checkpoint string
	Before     int
}

// sessionLine is one line of a session log.
type sessionLine struct {
	Time time.Time `json:"time"`
	LoopEvent
}

// NewSession starts a session log in dir.
func NewSession(dir string) (*Session, error) {
	b := make([]byte, 4)
	rand.Read(b)
	id := time.Now().UTC().Format("20060102-150405.000000") + "-" + hex.EncodeToString(b) // sorts as they began
	return openSession(dir, id)
}

// sessionID is what a session's id looks like (NewSession makes them):
// a plain name, so that one given by a user or a window (-r ID, the
// panel's open) can only name a log in the sessions directory.
var sessionID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{8}-[0-9]{6}\.[0-9]{6}-[0-9a-f]{8}$`) })

// checkSessionID refuses an id that is not one NewSession makes.
func checkSessionID(id string) error {
	if !sessionID().MatchString(id) {
		return fmt.Errorf("session %q: not a session id (cove agent lists them as 20250102-150405.000000-1a2b3c4d)", id)
	}
	return nil
}

func openSession(dir, id string) (*Session, error) {
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	if err := mkdirState(dir); err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	p := filepath.Join(dir, id+".jsonl")
	f, err := openState(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &Session{ID: id, Path: p, f: f}, nil
}

// Append writes one event. Errors are dropped: the log must not stop the
// agent (a full disk shows up elsewhere soon enough).
func (s *Session) Append(ev LoopEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := json.Marshal(sessionLine{Time: time.Now().UTC(), LoopEvent: ev})
	if err == nil {
		s.f.Write(append(b, '\n'))
	}
}

// Close closes the log.
func (s *Session) Close() error { return s.f.Close() }

// ResumeSession reopens session id in dir (the latest one when id is
// empty) and returns the conversation so far. A step that was cut short
// (tool calls without results, from Ctrl-C or a crash) is closed with
// results that say it was interrupted, so that resuming never runs it.
func ResumeSession(dir, id string) (*Session, []Message, error) {
	if id == "" {
		logs := sessionLogs(dir)
		if len(logs) == 0 {
			return nil, nil, errors.New("no session to continue")
		}
		id = strings.TrimSuffix(filepath.Base(logs[0]), ".jsonl")
	}
	if err := checkSessionID(id); err != nil {
		return nil, nil, err
	}
	msgs, turns, err := readSession(dir, id)
	if err != nil {
		return nil, nil, err
	}
	s, err := openSession(dir, id)
	if err != nil {
		return nil, nil, err
	}
	s.Turns = turns
	for _, m := range unanswered(msgs) {
		msgs = append(msgs, m)
		s.Append(LoopEvent{Type: "message", Message: &m})
	}
	return s, msgs, nil
}

// ReadSession returns the conversation of session id in dir (the latest
// one when id is empty) as the model last saw it (after a compaction,
// its summary), writing nothing: for showing
// a session that may still be going on (a task's, in the IDE).
func ReadSession(dir, id string) ([]Message, error) {
	if id == "" {
		logs := sessionLogs(dir)
		if len(logs) == 0 {
			return nil, errors.New("no session yet")
		}
		id = strings.TrimSuffix(filepath.Base(logs[0]), ".jsonl")
	}
	if err := checkSessionID(id); err != nil {
		return nil, err
	}
	msgs, _, err := readSession(dir, id)
	return msgs, err
}

// readSession reads the messages and the turns of session id's log.
func readSession(dir, id string) ([]Message, []Turn, error) {
	f, err := openState(filepath.Join(dir, id+".jsonl"), os.O_RDONLY)
	if err != nil {
		return nil, nil, fmt.Errorf("session %s: %w", id, err)
	}
	var (
		msgs  []Message
		turns []Turn
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l sessionLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a line cut by a crash
		}
		switch l.Type {
		case "message":
			if l.Message != nil {
				msgs = append(msgs, *l.Message)
			}
		case "checkpoint": // logged just before its prompt
			turns = append(turns, Turn{Checkpoint: l.Text, Before: len(msgs)})
		case "compacted":
			// What the model saw from here on (the messages it kept were
			// logged before this line).
			_, kept := splitForCompaction(msgs)
			msgs = afterCompaction(l.Text, kept)
			turns = nil // what they would take back is a summary now
		}
	}
	f.Close()
	return msgs, turns, nil
}

// unanswered returns results for the tool calls of the last assistant
// message that have none (the step was cut short by Ctrl-C or a crash),
// saying they did not run; every provider wants each call answered.
func unanswered(msgs []Message) []Message {
	n := len(msgs)
	if n == 0 {
		return nil
	}
	last := n - 1
	for last >= 0 && msgs[last].Role == "tool" {
		last--
	}
	if last < 0 || msgs[last].Role != "assistant" {
		return nil
	}
	answered := map[string]bool{}
	for _, m := range msgs[last+1:] {
		answered[m.ToolCallID] = true
	}
	var out []Message
	for _, c := range msgs[last].ToolCalls {
		if !answered[c.ID] {
			out = append(out, Message{Role: "tool", ToolCallID: c.ID, Content: "interrupted before it ran: not run", IsError: true})
		}
	}
	return out
}

// RestartSession closes old and starts a session in dir that begins with
// kept and the turns among them: a session log only grows, so a
// conversation cut back by a rewind goes on in a new one (which resumes
// as cut, its checkpoints still there to rewind to), the old log left
// whole.
func RestartSession(dir string, old *Session, kept []Message, turns []Turn) (*Session, error) {
	s, err := NewSession(dir)
	if err != nil {
		return nil, err
	}
	old.Close()
	next := 0
	for i := range kept {
		for next < len(turns) && turns[next].Before == i {
			s.Append(LoopEvent{Type: "checkpoint", Text: turns[next].Checkpoint})
			next++
		}
		s.Append(LoopEvent{Type: "message", Message: &kept[i]})
	}
	s.Turns = turns[:next]
	return s, nil
}

// SessionInfo describes a session log, for choosing one to go on with.
type SessionInfo struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Prompt   string    `json:"prompt"`   // the first, on one line
	Prompts  int       `json:"prompts"`  // how many the user gave
	Messages int       `json:"messages"` // lines of the log that are messages
}

// ListSessions describes the session logs in dir, the latest first, at
// most max of them (0: all).
func ListSessions(dir string, max int) ([]SessionInfo, error) {
	matches := sessionLogs(dir)
	if max > 0 && len(matches) > max {
		matches = matches[:max]
	}
	var out []SessionInfo
	for _, p := range matches {
		info := SessionInfo{ID: strings.TrimSuffix(filepath.Base(p), ".jsonl")}
		f, err := openState(p, os.O_RDONLY)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			info.Modified = fi.ModTime()
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var l sessionLine
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Type != "message" || l.Message == nil {
				continue
			}
			info.Messages++
			if l.Message.Role == "user" {
				if _, ok := Summary(*l.Message); !ok {
					if info.Prompts++; info.Prompt == "" {
						info.Prompt, _, _ = strings.Cut(l.Message.Content, "\n")
					}
				}
			}
		}
		f.Close()
		out = append(out, info)
	}
	return out, nil
}

// sessionLogs are the session logs in dir (regular files named by a
// session id), the one written last first: an ID tells the second a
// session began, and several may begin in one (a rewind and a new
// start), or an old one be written to again.
func sessionLogs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var matches []string
	mtime := map[string]time.Time{}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() || !sessionID().MatchString(id) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		matches = append(matches, p)
		if fi, err := e.Info(); err == nil {
			mtime[p] = fi.ModTime()
		}
	}
	sort.SliceStable(matches, func(i, j int) bool {
		a, b := mtime[matches[i]], mtime[matches[j]]
		if !a.Equal(b) {
			return a.After(b)
		}
		return matches[i] > matches[j]
	})
	return matches
}

// TurnsAfterCompaction is what is left of turns once a conversation was
// compacted into msgs: the turns before are a summary now, and only the
// newest, whose prompt stays word for word, can still be rewound, its
// prompt now where msgs has it.
func TurnsAfterCompaction(turns []Turn, msgs []Message) []Turn {
	if len(turns) == 0 {
		return nil
	}
	last := turns[len(turns)-1]
	if last.Before = newestUser(msgs); last.Before < 0 {
		return nil
	}
	return []Turn{last}
}
