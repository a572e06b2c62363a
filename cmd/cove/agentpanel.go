package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/container"
)

// agentPanel serves the IDE's agent panel on the launcher's side of the
// proxy (GET /api/agent?after=ID, a WebSocket): the model is called from
// here, so API keys never enter the container, while the tools work on
// the project and run commands in the workspace. The workspace has one
// conversation, which outlives the WebSockets: every window shows it, a
// turn goes on while none is open, and a window that reconnects with the
// id of the last event it saw gets what it missed.
//
//	client → {"type":"prompt","text":…}
//	         {"type":"decision","approval":N,"approve":bool,"reason":…}
//	         {"type":"stop"}                      (the turn in progress)
//	         {"type":"rewind","text":CHECKPOINT}  (files and conversation, to before that turn)
//	         {"type":"new"}                       (a new conversation)
//	         {"type":"mode","text":"ask"|"edits"|"yolo"}  (what runs without asking)
//	server → events, each with an "id" one above the last:
//	         {"type":"user","text":…} (a prompt, from any window),
//	         {"type":"state","text":"running"|"idle"},
//	         the loop's ({"type":"text"|"thinking"|"tool_call"|"tool_output"|"tool_result"|
//	         "usage"|"checkpoint"|"compacted"|"error"|"done",…}),
//	         {"type":"approval","approval":N,"action":…,"diff":…} to decide
//	         (for an edit also "path", "before", "after"),
//	         {"type":"decided","approval":N,"approve":bool},
//	         {"type":"stopped"}, {"type":"rewound","text":CHECKPOINT},
//	         {"type":"cleared","text":SESSION} (a new conversation from here),
//	         {"type":"note",…}, {"type":"mode","text":MODE};
//	         and without an id, to this window alone: {"type":"live"} once
//	         what it missed has been sent, {"type":"reset"} when the id it
//	         gave is from another launcher's conversation (all is sent
//	         again), {"type":"error",…} for its own requests.
type agentPanel struct {
	root string // --root, for cove exec
	st   *container.State
	dir  string
	ctx  context.Context // the launcher's: the conversation ends with it
	// setup is the first-run form's back end; the zero value means the
	// user's config file and the usual local servers.
	setup panelSetup

	mu   sync.Mutex
	conv *conversation
}

type panelMsg struct {
	Type     string        `json:"type"`
	Config   *agent.Config `json:"config,omitempty"` // setup_models, setup_save (see panelSetup)
	Text     string        `json:"text,omitempty"`
	Approval int           `json:"approval,omitempty"`
	Approve  bool          `json:"approve,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Action   string        `json:"action,omitempty"`
	Diff     string        `json:"diff,omitempty"`
	// An edit's file and its text before and after, for the panel's
	// merge view; left out for big files, which show the diff alone.
	Path   string  `json:"path,omitempty"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
}

// mergeViewMax bounds the text an approval carries for the merge view.
const mergeViewMax = 512 << 10

// keptEvents bounds the events kept for replay; a conversation's text
// arrives in small deltas, so this is a long one.
const keptEvents = 200_000

// conversation is the workspace's conversation with the agent.
type conversation struct {
	a        *agent.Agent
	close    func()
	events   *agent.EventLog
	sessions string
	ctx      context.Context

	mu        sync.Mutex
	history   []agent.Message
	turns     []agent.Turn // the prompts with a checkpoint, oldest first
	decisions map[int]chan agent.Decision
	approvals int                // the last approval's number
	mode      agent.Mode         // what runs without asking; the agent itself always asks the panel
	busy      bool               // a turn runs, or a rewind
	stopTurn  context.CancelFunc // set while a turn runs
}

// conversation returns the workspace's conversation, starting it on first
// use. A failure (no model configured) is not kept: the next window or
// prompt tries again, after the user ran cove agent --setup.
func (p *agentPanel) conversation() (*conversation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conv != nil {
		return p.conv, nil
	}
	home, _ := os.UserHomeDir()
	cfg, err := agent.LoadConfig(home, p.dir, os.Getenv, agent.Config{})
	if err != nil {
		return nil, err
	}
	a, broken, closeAgent, err := buildAgent(p.ctx, p.root, p.st, p.dir, cfg)
	if err != nil {
		return nil, err
	}
	cv := &conversation{a: a, close: closeAgent, events: agent.NewEventLog(keptEvents),
		sessions: filepath.Join(p.dir, ".cove", "sessions"), ctx: p.ctx,
		decisions: map[int]chan agent.Decision{}, mode: agent.ModeAsk}
	cv.events.Add(panelMsg{Type: "mode", Text: string(cv.mode)})
	// The workspace's latest conversation goes on, as an editor's chat
	// does after a restart; New starts another.
	if s, history, err := agent.ResumeSession(cv.sessions, ""); err == nil {
		a.Session, cv.history, cv.turns = s, history, s.Turns
		cv.show(history)
	} else if a.Session, err = agent.NewSession(cv.sessions); err != nil {
		closeAgent()
		return nil, err
	}
	for _, b := range broken {
		cv.events.Add(panelMsg{Type: "error", Text: fmt.Sprintf("tool %s is broken: %v", b.Path, b.Err)})
	}
	a.Emit = func(ev agent.LoopEvent) {
		switch ev.Type {
		case "checkpoint":
			cv.mu.Lock()
			cv.turns = append(cv.turns, agent.Turn{Checkpoint: ev.Text, Before: len(cv.history)})
			cv.mu.Unlock()
		case "approval", "decision": // the panel sends its own, numbered to answer
			return
		}
		cv.events.Add(ev)
	}
	a.Approve = cv.approve
	p.conv = cv
	return cv, nil
}

// Close ends the conversation's shell.
func (p *agentPanel) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conv != nil {
		p.conv.mu.Lock()
		p.conv.a.Session.Close()
		p.conv.mu.Unlock()
		p.conv.close()
	}
}

func (cv *conversation) approve(ctx context.Context, act *agent.Action) agent.Decision {
	cv.mu.Lock()
	if mode := cv.mode; mode.Allows(act) { // the mode may have changed since the turn began
		cv.mu.Unlock()
		return agent.Decision{Approve: true, Reason: "by the panel's mode, " + string(mode)} // for the audit log
	}
	cv.approvals++
	n, ch := cv.approvals, make(chan agent.Decision, 1)
	cv.decisions[n] = ch
	cv.mu.Unlock()
	m := panelMsg{Type: "approval", Approval: n, Action: act.Summary, Diff: act.Diff}
	if act.Kind == "edit" && len(act.Before)+len(act.After) <= mergeViewMax {
		m.Path, m.Before, m.After = act.Path, &act.Before, &act.After
	}
	cv.events.Add(m)
	var d agent.Decision
	select {
	case d = <-ch:
	case <-ctx.Done():
		cv.mu.Lock()
		delete(cv.decisions, n)
		cv.mu.Unlock()
		d = agent.Decision{Reason: "the turn was stopped"}
	}
	cv.events.Add(panelMsg{Type: "decided", Approval: n, Approve: d.Approve, Reason: d.Reason})
	return d
}

// setMode changes what runs without asking, from the next action on (the
// turn in progress included).
func (cv *conversation) setMode(m agent.Mode) error {
	switch m {
	case agent.ModeAsk, agent.ModeEdits, agent.ModeYolo:
	default:
		return fmt.Errorf("mode %q: ask, edits or yolo", m)
	}
	cv.mu.Lock()
	cv.mode = m
	cv.mu.Unlock()
	cv.events.Add(panelMsg{Type: "mode", Text: string(m)})
	return nil
}

// decide answers approval n; the first answer, from any window, counts.
func (cv *conversation) decide(n int, d agent.Decision) {
	cv.mu.Lock()
	ch := cv.decisions[n]
	delete(cv.decisions, n)
	cv.mu.Unlock()
	if ch != nil {
		ch <- d
	}
}

func (cv *conversation) stop() {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.stopTurn != nil {
		cv.stopTurn()
	}
}

// prompt starts a turn; it says why not when one is running.
func (cv *conversation) prompt(text string) error {
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
	cv.events.Add(panelMsg{Type: "user", Text: text})
	cv.events.Add(panelMsg{Type: "state", Text: "running"})
	go func() {
		msgs, err := cv.a.Run(turnCtx, history, text)
		cancel()
		stopped := errors.Is(err, context.Canceled) && cv.ctx.Err() == nil
		cv.mu.Lock()
		cv.history = msgs // what was said stays, a stopped step included
		cv.stopTurn, cv.busy = nil, false
		cv.mu.Unlock()
		if stopped {
			cv.events.Add(panelMsg{Type: "stopped"})
		}
		cv.events.Add(panelMsg{Type: "state", Text: "idle"})
	}()
	return nil
}

// reset starts a new conversation (a new session; the old one's log stays).
func (cv *conversation) reset() error {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if cv.busy {
		return errors.New("stop the agent before starting a new conversation")
	}
	s, err := agent.NewSession(cv.sessions)
	if err != nil {
		return err
	}
	cv.a.Session.Close()
	cv.a.Session, cv.history, cv.turns = s, nil, nil
	cv.events.Add(panelMsg{Type: "cleared", Text: s.ID})
	return nil
}

// show sends a resumed conversation to the panel as the events it was
// made of, its checkpoints where its prompts began.
func (cv *conversation) show(history []agent.Message) {
	if len(history) == 0 {
		return
	}
	cv.events.Add(panelMsg{Type: "note", Text: "the conversation of session " + cv.a.Session.ID + " goes on (New starts another)"})
	next := 0
	for i, m := range history {
		cp := ""
		for next < len(cv.turns) && cv.turns[next].Before <= i {
			cp = cv.turns[next].Checkpoint
			next++
		}
		if summary, ok := agent.Summary(m); ok {
			if summary != "" {
				cv.events.Add(agent.LoopEvent{Type: "compacted", Text: summary})
			}
			continue
		}
		switch m.Role {
		case "user":
			cv.events.Add(panelMsg{Type: "user", Text: m.Content})
			if cp != "" {
				cv.events.Add(agent.LoopEvent{Type: "checkpoint", Text: cp})
			}
		case "assistant":
			if m.Content != "" {
				cv.events.Add(agent.LoopEvent{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				cv.events.Add(agent.LoopEvent{Type: "tool_call", Call: &c})
			}
			if len(m.ToolCalls) == 0 {
				cv.events.Add(agent.LoopEvent{Type: "done"})
			}
		case "tool":
			cv.events.Add(agent.LoopEvent{Type: "tool_result", Text: m.Content, IsError: m.IsError})
		}
	}
}

// rewind puts the files and the conversation back as they were before the
// turn of checkpoint id.
func (cv *conversation) rewind(id string) error {
	cv.mu.Lock()
	if cv.busy {
		cv.mu.Unlock()
		return errors.New("stop the agent before rewinding")
	}
	turn := slices.IndexFunc(cv.turns, func(t agent.Turn) bool { return t.Checkpoint == id })
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
	s, err := agent.RestartSession(cv.sessions, cv.a.Session, cv.history[:n], cv.turns[:turn])
	if err != nil {
		return err
	}
	cv.mu.Lock()
	cv.a.Session, cv.history, cv.turns = s, cv.history[:n:n], cv.turns[:turn:turn]
	cv.mu.Unlock()
	cv.events.Add(panelMsg{Type: "rewound", Text: id})
	return nil
}

func (p *agentPanel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wmu sync.Mutex
	write := func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return c.Write(ctx, websocket.MessageText, b)
	}
	say := func(m panelMsg) {
		b, _ := json.Marshal(m)
		write(b)
	}
	// The stream: what this window missed, then what comes.
	var streaming sync.Once
	stream := func(cv *conversation) {
		streaming.Do(func() {
			go func() {
				defer cancel()
				live, cursor := cv.events.Last(), after
				if cursor > live {
					// An id from before this launcher: another conversation.
					say(panelMsg{Type: "reset"})
					cursor = 0
				}
				for {
					if cursor >= live {
						say(panelMsg{Type: "live"})
						live = 1<<63 - 1
					}
					evs, last, err := cv.events.Since(ctx, cursor)
					if err != nil {
						return
					}
					for _, b := range evs {
						if write(b) != nil {
							return
						}
					}
					cursor = last
				}
			}()
		})
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		write(b)
	}
	setup := p.setup
	if setup.path == "" {
		setup = newPanelSetup()
	}
	cv, err := p.conversation()
	if err != nil {
		// No model yet: the panel sets one up.
		send(setup.offer(ctx, err.Error()))
	} else {
		stream(cv)
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m panelMsg
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if cv == nil {
			switch {
			case m.Type == "setup_models" && m.Config != nil:
				if models, err := setup.models(ctx, *m.Config); err != nil {
					say(panelMsg{Type: "setup_error", Text: err.Error()})
				} else {
					send(setupMsg{Type: "setup_models", Models: models})
				}
				continue
			case m.Type == "setup_save" && m.Config != nil:
				if err := setup.save(ctx, *m.Config); err != nil {
					say(panelMsg{Type: "setup_error", Text: err.Error()})
					continue
				}
				say(panelMsg{Type: "setup_done", Text: setup.path})
			}
			// Set up here, in another window, or with cove agent --setup.
			if cv, err = p.conversation(); err != nil {
				say(panelMsg{Type: "error", Text: err.Error()})
				continue
			}
			stream(cv)
			if m.Type == "setup_save" {
				continue
			}
		}
		switch m.Type {
		case "decision":
			reason := m.Reason
			if m.Approve && reason == "" {
				reason = "approved in the IDE" // for the audit log; only a refusal's reason goes to the model
			}
			cv.decide(m.Approval, agent.Decision{Approve: m.Approve, Reason: reason})
		case "stop":
			cv.stop()
		case "rewind":
			if err := cv.rewind(m.Text); err != nil {
				say(panelMsg{Type: "error", Text: err.Error()})
			}
		case "mode":
			if err := cv.setMode(agent.Mode(m.Text)); err != nil {
				say(panelMsg{Type: "error", Text: err.Error()})
			}
		case "new":
			if err := cv.reset(); err != nil {
				say(panelMsg{Type: "error", Text: err.Error()})
			}
		case "prompt":
			if err := cv.prompt(m.Text); err != nil {
				say(panelMsg{Type: "error", Text: err.Error()})
			}
		}
	}
}
