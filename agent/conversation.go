package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Conversation is one conversation with the agent that any number of
// windows share (the IDE's panel): its events go to an EventLog that each
// reads from where it left off; prompts, approvals, a stop, a rewind or a
// new start may come from any of them. It owns the Agent's Emit and
// Approve, and its Session: the latest conversation in the sessions
// directory goes on, as an editor's chat does after a restart. What runs
// without asking is the Conversation's mode, which may change mid-turn;
// the Agent itself asks for everything. Safe for concurrent use.
type Conversation struct {
	a        *Agent
	events   *EventLog
	sessions string
	ctx      context.Context

	mu        sync.Mutex
	history   []Message
	turns     []Turn // the prompts with a checkpoint, oldest first
	compacted bool   // during the turn in progress
	decisions map[int]chan Decision
	approvals int                // the last approval's number
	mode      Mode               // what runs without asking
	busy      bool               // a turn runs, or a rewind
	stopTurn  context.CancelFunc // set while a turn runs
}

// Notice is an event of a Conversation beside the loop's: a prompt
// ("user"), "state" (running, idle), an "approval" to answer by its
// number, "decided", "mode", "stopped", "rewound", "cleared" (a new
// conversation), "note", "error".
type Notice struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Approval int    `json:"approval,omitempty"`
	Approve  bool   `json:"approve,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Action   string `json:"action,omitempty"`
	Diff     string `json:"diff,omitempty"`
	// An edit's file and its text before and after, for a merge view;
	// left out for big files, which show the diff alone.
	Path   string  `json:"path,omitempty"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
	// An approval's keys the user may allow for the session (Action.Always).
	Always []string `json:"always,omitempty"`
	// "mcp": the MCP servers and their state, whole each time.
	Servers any `json:"servers,omitempty"`
}

// mergeViewMax bounds the text an approval carries for a merge view.
const mergeViewMax = 512 << 10

// keptEvents bounds the events kept for replay; a conversation's text
// arrives in small deltas, so this is a long one.
const keptEvents = 200_000

// NewConversation takes a over (its Emit, Approve and Session) for a
// conversation whose sessions are kept in sessions; ctx bounds its turns.
func NewConversation(ctx context.Context, a *Agent, sessions string) (*Conversation, error) {
	cv := &Conversation{a: a, events: NewEventLog(keptEvents), sessions: sessions, ctx: ctx,
		decisions: map[int]chan Decision{}, mode: ModeAsk}
	a.Mode = ModeAsk // the Conversation's mode decides
	cv.events.Add(Notice{Type: "mode", Text: string(cv.mode)})
	if s, history, err := ResumeSession(sessions, ""); err == nil {
		a.Session, cv.history, cv.turns = s, history, s.Turns
		cv.show(history)
	} else if a.Session, err = NewSession(sessions); err != nil {
		return nil, err
	}
	a.Emit = func(ev LoopEvent) {
		switch ev.Type {
		case "checkpoint":
			cv.mu.Lock()
			cv.turns = append(cv.turns, Turn{Checkpoint: ev.Text, Before: len(cv.history)})
			cv.mu.Unlock()
		case "compacted":
			cv.mu.Lock()
			cv.compacted = true
			cv.mu.Unlock()
		case "approval", "decision": // the Conversation sends its own, numbered to answer
			return
		}
		cv.events.Add(ev)
	}
	a.Approve = cv.approve
	return cv, nil
}

// Events is where the conversation's events go, numbered for windows to
// read from where they left off.
func (cv *Conversation) Events() *EventLog { return cv.events }

// Close closes the session log; a turn in progress ends with ctx.
func (cv *Conversation) Close() error {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return cv.a.Session.Close()
}

func (cv *Conversation) approve(ctx context.Context, act *Action) Decision {
	cv.mu.Lock()
	if mode := cv.mode; mode.Allows(act) { // the mode may have changed since the turn began
		cv.mu.Unlock()
		return Decision{Approve: true, Reason: "by the mode, " + string(mode)} // for the audit log
	}
	cv.approvals++
	n, ch := cv.approvals, make(chan Decision, 1)
	cv.decisions[n] = ch
	cv.mu.Unlock()
	m := Notice{Type: "approval", Approval: n, Action: act.Summary, Diff: act.Diff, Always: act.Always}
	if act.Kind == "edit" && len(act.Before)+len(act.After) <= mergeViewMax {
		m.Path, m.Before, m.After = act.Path, &act.Before, &act.After
	}
	cv.events.Add(m)
	var d Decision
	select {
	case d = <-ch:
	case <-ctx.Done():
		cv.mu.Lock()
		delete(cv.decisions, n)
		cv.mu.Unlock()
		d = Decision{Reason: "the turn was stopped"}
	}
	cv.events.Add(Notice{Type: "decided", Approval: n, Approve: d.Approve, Reason: d.Reason})
	return d
}

// SetMode changes what runs without asking, from the next action on (the
// turn in progress included).
func (cv *Conversation) SetMode(m Mode) error {
	switch m {
	case ModeAsk, ModeEdits, ModeYolo:
	default:
		return fmt.Errorf("mode %q: ask, edits or yolo", m)
	}
	cv.mu.Lock()
	cv.mode = m
	cv.mu.Unlock()
	cv.events.Add(Notice{Type: "mode", Text: string(m)})
	return nil
}

// Decide answers approval n; the first answer, from any window, counts.
func (cv *Conversation) Decide(n int, d Decision) {
	cv.mu.Lock()
	ch := cv.decisions[n]
	delete(cv.decisions, n)
	cv.mu.Unlock()
	if ch != nil {
		ch <- d
	}
}

// Stop ends the turn in progress, if one is.
func (cv *Conversation) Stop() {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.stopTurn != nil {
		cv.stopTurn()
	}
}

// Prompt starts a turn; it says why not when one is running.
func (cv *Conversation) Prompt(text string) error {
	cv.mu.Lock()
	if cv.busy {
		cv.mu.Unlock()
		return errors.New("the agent is still at work on the last prompt")
	}
	cv.busy = true
	turnCtx, cancel := context.WithCancel(cv.ctx)
	cv.stopTurn = cancel
	history := cv.history
	cv.mu.Unlock()
	cv.events.Add(Notice{Type: "user", Text: text})
	cv.events.Add(Notice{Type: "state", Text: "running"})
	go func() {
		msgs, err := cv.a.Run(turnCtx, history, text)
		cancel()
		stopped := errors.Is(err, context.Canceled) && cv.ctx.Err() == nil
		cv.mu.Lock()
		cv.history = msgs // what was said stays, a stopped step included
		if cv.compacted {
			cv.turns, cv.compacted = TurnsAfterCompaction(cv.turns, msgs), false
		}
		cv.stopTurn, cv.busy = nil, false
		cv.mu.Unlock()
		if stopped {
			cv.events.Add(Notice{Type: "stopped"})
		}
		cv.events.Add(Notice{Type: "state", Text: "idle"})
	}()
	return nil
}

// Reset starts a new conversation (a new session; the old one's log stays).
func (cv *Conversation) Reset() error {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.busy {
		return errors.New("stop the agent before starting a new conversation")
	}
	s, err := NewSession(cv.sessions)
	if err != nil {
		return err
	}
	cv.a.Session.Close()
	cv.a.Session, cv.history, cv.turns = s, nil, nil
	cv.events.Add(Notice{Type: "cleared", Text: s.ID})
	return nil
}

// show sends a resumed conversation to the windows as the events it was
// made of, its checkpoints where its prompts began.
func (cv *Conversation) show(history []Message) {
	if len(history) == 0 {
		return
	}
	cv.events.Add(Notice{Type: "note", Text: "the conversation of session " + cv.a.Session.ID + " goes on (New starts another)"})
	next := 0
	for i, m := range history {
		cp := ""
		for next < len(cv.turns) && cv.turns[next].Before <= i {
			cp = cv.turns[next].Checkpoint
			next++
		}
		if summary, ok := Summary(m); ok {
			if summary != "" {
				cv.events.Add(LoopEvent{Type: "compacted", Text: summary})
			}
			continue
		}
		switch m.Role {
		case "user":
			cv.events.Add(Notice{Type: "user", Text: m.Content})
			if cp != "" {
				cv.events.Add(LoopEvent{Type: "checkpoint", Text: cp})
			}
		case "assistant":
			if m.Content != "" {
				cv.events.Add(LoopEvent{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				cv.events.Add(LoopEvent{Type: "tool_call", Call: &c})
			}
			if len(m.ToolCalls) == 0 {
				cv.events.Add(LoopEvent{Type: "done"})
			}
		case "tool":
			cv.events.Add(LoopEvent{Type: "tool_result", Text: m.Content, IsError: m.IsError})
		}
	}
}

// Rewind puts the files and the conversation back as they were before the
// turn of checkpoint id.
func (cv *Conversation) Rewind(id string) error {
	cv.mu.Lock()
	if cv.busy {
		cv.mu.Unlock()
		return errors.New("stop the agent before rewinding")
	}
	turn := slices.IndexFunc(cv.turns, func(t Turn) bool { return t.Checkpoint == id })
	if turn < 0 || cv.a.Checkpoints == nil {
		cv.mu.Unlock()
		return errors.New("that checkpoint is not from this conversation")
	}
	n := cv.turns[turn].Before
	cv.busy = true
	cv.mu.Unlock()
	defer func() {
		cv.mu.Lock()
		cv.busy = false
		cv.mu.Unlock()
	}()
	if err := cv.a.Checkpoints.Rewind(cv.ctx, id); err != nil {
		return fmt.Errorf("rewind: %w (nothing else changed)", err)
	}
	s, err := RestartSession(cv.sessions, cv.a.Session, cv.history[:n], cv.turns[:turn])
	if err != nil {
		return err
	}
	cv.mu.Lock()
	cv.a.Session, cv.history, cv.turns = s, cv.history[:n:n], cv.turns[:turn:turn]
	cv.mu.Unlock()
	cv.events.Add(Notice{Type: "rewound", Text: id})
	return nil
}

// Open goes on with session id instead: the windows are told to clear,
// then shown what was said in it.
func (cv *Conversation) Open(id string) error {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.busy {
		return errors.New("stop the agent before opening another conversation")
	}
	s, history, err := ResumeSession(cv.sessions, id)
	if err != nil {
		return err
	}
	cv.a.Session.Close()
	cv.a.Session, cv.history, cv.turns = s, history, s.Turns
	cv.events.Add(Notice{Type: "cleared", Text: s.ID})
	cv.show(history)
	return nil
}

// Sessions lists the conversations kept, the latest first.
func (cv *Conversation) Sessions() ([]SessionInfo, error) { return ListSessions(cv.sessions, 100) }
