package ide

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/agent"
)

// AgentBackend is what the agent panel needs of the launcher: the
// workspace's conversation, and, while there is no model to talk to, the
// first-run setup.
type AgentBackend interface {
	// Conversation returns the workspace's conversation, starting it on
	// first use; an error (no model configured) is not kept.
	Conversation() (*agent.Conversation, error)
	// Setup is the first-run form's back end.
	Setup() AgentSetup
}

// AgentSetup is the panel's first run, the browser's side of cove agent
// --setup: with no model configured, the panel gets a form with what
// setup would offer, asks the server it names for its models, and saves
// a choice only once the model answered. Keys go from the page to the
// launcher over the token-guarded WebSocket and are never sent back.
type AgentSetup interface {
	// Offer is the form's first content (why: what kept the conversation
	// from starting); a key written out in the user's file is left out of
	// it.
	Offer(ctx context.Context, why error) any
	// Models lists what the server c names serves.
	Models(ctx context.Context, c agent.Config) ([]agent.Model, error)
	// Save checks c's model, then saves c; note is for the user, path
	// where it went.
	Save(ctx context.Context, c agent.Config) (note, path string, err error)
}

// AgentPanel serves the IDE's agent panel on the launcher's side of the
// proxy (GET /api/agent?after=ID, a WebSocket): the model is called from
// here, so API keys never enter the container, while the tools work on
// the project and run commands in the workspace. The workspace has one
// conversation (an agent.Conversation), which outlives the WebSockets:
// every window shows it, a turn goes on while none is open, and a window
// that reconnects with the id of the last event it saw gets what it
// missed. With no model configured, a window gets the setup form.
//
//	client → {"type":"prompt","text":…}
//	         {"type":"decision","approval":N,"approve":bool,"reason":…,"always":KEY}
//	                 (KEY, one of the approval's "always", allows its like for the session)
//	         {"type":"stop"}                      (the turn in progress)
//	         {"type":"rewind","text":CHECKPOINT}  (files and conversation, to before that turn)
//	         {"type":"new"}                       (a new conversation)
//	         {"type":"sessions"}, {"type":"open","text":SESSION}  (the kept ones; go on with one)
//	         {"type":"mode","text":"ask"|"edits"|"yolo"}  (what runs without asking)
//	         {"type":"setup_models","config":…}, {"type":"setup_save","config":…}  (no model yet)
//	server → events, each with an "id" one above the last:
//	         {"type":"user","text":…} (a prompt, from any window),
//	         {"type":"state","text":"running"|"idle"},
//	         the loop's ({"type":"text"|"thinking"|"tool_call"|"tool_output"|"tool_result"|
//	         "edited"|"usage"|"checkpoint"|"compacted"|"error"|"done",…}),
//	         {"type":"approval","approval":N,"action":…,"diff":…} to decide
//	         (for an edit also "path", "before", "after"; for an MCP tool
//	         "always": the keys that may be allowed for the session),
//	         {"type":"mcp","servers":[{name, where, state, error, tools, …}]}
//	         (the MCP servers, whole, each time one changes),
//	         {"type":"decided","approval":N,"approve":bool},
//	         {"type":"stopped"}, {"type":"rewound","text":CHECKPOINT},
//	         {"type":"cleared","text":SESSION} (a new conversation from here),
//	         {"type":"note",…}, {"type":"mode","text":MODE};
//	         and without an id, to this window alone: {"type":"live"} once
//	         what it missed has been sent, {"type":"reset"} when the id it
//	         gave is from another launcher's conversation (all is sent
//	         again), {"type":"sessions","sessions":[…]}, {"type":"error",…} for
//	         its own requests; before a model is set up, the setup form
//	         ({"type":"setup",…}), {"type":"setup_models","models":[…]},
//	         {"type":"setup_done","text":PATH,"reason":NOTE} or
//	         {"type":"setup_error","text":…}.
type AgentPanel struct{ Backend AgentBackend }

// panelMsg is what a window sends, and what the panel sends to one window
// alone.
type panelMsg struct {
	Type     string        `json:"type"`
	Config   *agent.Config `json:"config,omitempty"` // setup_models, setup_save
	Text     string        `json:"text,omitempty"`
	Approval int           `json:"approval,omitempty"`
	Approve  bool          `json:"approve,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Always   string        `json:"always,omitempty"`
}

func (p AgentPanel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	c, err := websocket.Accept(w, r, acceptOptions())
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
	setup := p.Backend.Setup()
	cv, err := p.Backend.Conversation()
	if err != nil {
		// No model yet: the panel sets one up.
		send(setup.Offer(ctx, err))
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
				if models, err := setup.Models(ctx, *m.Config); err != nil {
					send(panelMsg{Type: "setup_error", Text: err.Error()})
				} else {
					send(map[string]any{"type": "setup_models", "models": models})
				}
				continue
			case m.Type == "setup_save" && m.Config != nil:
				note, path, err := setup.Save(ctx, *m.Config)
				if err != nil {
					send(panelMsg{Type: "setup_error", Text: err.Error()})
					continue
				}
				send(panelMsg{Type: "setup_done", Text: path, Reason: note})
			}
			// Set up here, in another window, or with cove agent --setup.
			if cv, err = p.Backend.Conversation(); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
				continue
			}
			stream(cv)
			if m.Type == "setup_save" {
				continue
			}
		}
		p.handle(cv, m, send)
	}
}

// handle does what a window asked of the conversation.
func (p AgentPanel) handle(cv *agent.Conversation, m panelMsg, send func(any)) {
	var err error
	switch m.Type {
	case "decision":
		reason := m.Reason
		if m.Approve && reason == "" {
			reason = "approved in the IDE" // for the audit log; only a refusal's reason goes to the model
		}
		cv.Decide(m.Approval, agent.Decision{Approve: m.Approve, Reason: reason, Always: m.Always})
	case "stop":
		cv.Stop()
	case "rewind":
		err = cv.Rewind(m.Text)
	case "mode":
		err = cv.SetMode(agent.Mode(m.Text))
	case "sessions":
		var list []agent.SessionInfo
		if list, err = cv.Sessions(); err == nil {
			send(map[string]any{"type": "sessions", "sessions": list})
		}
	case "open":
		err = cv.Open(m.Text)
	case "new":
		err = cv.Reset()
	case "prompt":
		err = cv.Prompt(m.Text)
	}
	if err != nil {
		send(panelMsg{Type: "error", Text: err.Error()})
	}
}
