package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/dirs"
)

// agentPanel serves the IDE's agent panel on the launcher's side of the
// proxy (GET /api/agent?after=ID, a WebSocket): the model is called from
// here, so API keys never enter the container, while the tools work on
// the project and run commands in the workspace. The workspace has one
// conversation (an agent.Conversation), which outlives the WebSockets:
// every window shows it, a turn goes on while none is open, and a window
// that reconnects with the id of the last event it saw gets what it
// missed. With no model configured, a window gets panelSetup's form.
//
//	client → {"type":"prompt","text":…}
//	         {"type":"decision","approval":N,"approve":bool,"reason":…}
//	         {"type":"stop"}                      (the turn in progress)
//	         {"type":"rewind","text":CHECKPOINT}  (files and conversation, to before that turn)
//	         {"type":"new"}                       (a new conversation)
//	         {"type":"sessions"}, {"type":"open","text":SESSION}  (the kept ones; go on with one)
//	         {"type":"mode","text":"ask"|"edits"|"yolo"}  (what runs without asking)
//	server → events, each with an "id" one above the last:
//	         {"type":"user","text":…} (a prompt, from any window),
//	         {"type":"state","text":"running"|"idle"},
//	         the loop's ({"type":"text"|"thinking"|"tool_call"|"tool_output"|"tool_result"|
//	         "edited"|"usage"|"checkpoint"|"compacted"|"error"|"done",…}),
//	         {"type":"approval","approval":N,"action":…,"diff":…} to decide
//	         (for an edit also "path", "before", "after"),
//	         {"type":"decided","approval":N,"approve":bool},
//	         {"type":"stopped"}, {"type":"rewound","text":CHECKPOINT},
//	         {"type":"cleared","text":SESSION} (a new conversation from here),
//	         {"type":"note",…}, {"type":"mode","text":MODE};
//	         and without an id, to this window alone: {"type":"live"} once
//	         what it missed has been sent, {"type":"reset"} when the id it
//	         gave is from another launcher's conversation (all is sent
//	         again), {"type":"sessions","sessions":[…]}, {"type":"error",…} for
//	         its own requests.
type agentPanel struct {
	root   string      // --root, for cove exec
	layout dirs.Layout // where the project's agent state is kept
	st     *container.State
	dir    string
	ctx    context.Context // the launcher's: the conversation ends with it
	// setup is the first-run form's back end; the zero value means the
	// user's config file and the usual local servers.
	setup panelSetup

	mu         sync.Mutex
	conv       *agent.Conversation
	closeAgent func() // its shell and workspace files
}

// panelMsg is what a window sends, and what the panel sends to one window
// alone.
type panelMsg struct {
	Type     string        `json:"type"`
	Config   *agent.Config `json:"config,omitempty"` // setup_models, setup_save (see panelSetup)
	Text     string        `json:"text,omitempty"`
	Approval int           `json:"approval,omitempty"`
	Approve  bool          `json:"approve,omitempty"`
	Reason   string        `json:"reason,omitempty"`
}

// conversation returns the workspace's conversation, starting it on first
// use. A failure (no model configured) is not kept: the next window or
// prompt tries again, after the user set a model up.
func (p *agentPanel) conversation() (*agent.Conversation, error) {
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
	state, err := projectAgentState(p.layout, p.dir)
	if err != nil {
		return nil, err
	}
	a, broken, closeAgent, err := buildAgent(p.ctx, p.root, p.st, p.dir, state, cfg)
	if err != nil {
		return nil, err
	}
	cv, err := agent.NewConversation(p.ctx, a, state.Sessions)
	if err != nil {
		closeAgent()
		return nil, err
	}
	if note := legacyStateNote(p.dir, state, home); note != "" {
		cv.Events().Add(agent.Notice{Type: "note", Text: note})
	}
	for _, b := range broken {
		cv.Events().Add(agent.Notice{Type: "error", Text: fmt.Sprintf("tool %s is broken: %v", b.Path, b.Err)})
	}
	if n := ignoredNote(cfg); n != "" {
		cv.Events().Add(agent.Notice{Type: "note", Text: n})
	}
	p.conv, p.closeAgent = cv, closeAgent
	return cv, nil
}

// Close ends the conversation's session log and shell.
func (p *agentPanel) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conv != nil {
		p.conv.Close()
		p.closeAgent()
	}
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
	send := func(v any) {
		b, _ := json.Marshal(v)
		write(b)
	}
	// The stream: what this window missed, then what comes.
	var streaming sync.Once
	stream := func(cv *agent.Conversation) {
		streaming.Do(func() {
			go func() {
				defer cancel()
				live, cursor := cv.Events().Last(), after
				if cursor > live {
					// An id from before this launcher: another conversation.
					send(panelMsg{Type: "reset"})
					cursor = 0
				}
				for {
					if cursor >= live {
						send(panelMsg{Type: "live"})
						live = 1<<63 - 1
					}
					evs, last, err := cv.Events().Since(ctx, cursor)
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
					send(panelMsg{Type: "setup_error", Text: err.Error()})
				} else {
					send(setupMsg{Type: "setup_models", Models: models})
				}
				continue
			case m.Type == "setup_save" && m.Config != nil:
				note, err := setup.save(ctx, *m.Config)
				if err != nil {
					send(panelMsg{Type: "setup_error", Text: err.Error()})
					continue
				}
				send(panelMsg{Type: "setup_done", Text: setup.path, Reason: note})
			}
			// Set up here, in another window, or with cove agent --setup.
			if cv, err = p.conversation(); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
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
			cv.Decide(m.Approval, agent.Decision{Approve: m.Approve, Reason: reason})
		case "stop":
			cv.Stop()
		case "rewind":
			if err := cv.Rewind(m.Text); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			}
		case "mode":
			if err := cv.SetMode(agent.Mode(m.Text)); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			}
		case "sessions":
			if list, err := cv.Sessions(); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			} else {
				send(map[string]any{"type": "sessions", "sessions": list})
			}
		case "open":
			if err := cv.Open(m.Text); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			}
		case "new":
			if err := cv.Reset(); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			}
		case "prompt":
			if err := cv.Prompt(m.Text); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			}
		}
	}
}
