package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/container"
)

// agentPanel serves the IDE's agent panel on the launcher's side of the
// proxy (GET /api/agent, a WebSocket): the model is called from here, so
// API keys never enter the container, while the tools work on the
// project and run commands in the workspace.
//
//	client → {"type":"prompt","text":…}
//	         {"type":"decision","id":N,"approve":bool,"reason":…}
//	server → the loop's events ({"type":"text"|"thinking"|"tool_call"|"tool_result"|
//	         "checkpoint"|"compacted"|"error"|"done",…}), and
//	         {"type":"approval","id":N,"action":…,"diff":…} for a decision
type agentPanel struct {
	root string // --root, for cove exec
	st   *container.State
	dir  string
}

type panelMsg struct {
	Type    string `json:"type"`
	Text    string `json:"text,omitempty"`
	ID      int    `json:"id,omitempty"`
	Approve bool   `json:"approve,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Action  string `json:"action,omitempty"`
	Diff    string `json:"diff,omitempty"`
}

func (p *agentPanel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wmu sync.Mutex
	send := func(v any) {
		b, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		c.Write(ctx, websocket.MessageText, b)
	}
	home, _ := os.UserHomeDir()
	cfg, err := agent.LoadConfig(home, p.dir, os.Getenv, agent.Config{})
	var provider agent.Provider
	if err == nil {
		provider, err = cfg.NewProvider()
	}
	if err != nil {
		send(panelMsg{Type: "error", Text: err.Error()})
		return
	}
	a, broken, closeAgent, err := buildAgent(ctx, p.root, p.st, p.dir, provider, cfg.Model)
	if err != nil {
		send(panelMsg{Type: "error", Text: err.Error()})
		return
	}
	defer closeAgent()
	for _, b := range broken {
		send(panelMsg{Type: "error", Text: fmt.Sprintf("tool %s is broken: %v", b.Path, b.Err)})
	}
	if a.Session, err = agent.NewSession(filepath.Join(p.dir, ".cove", "sessions")); err != nil {
		send(panelMsg{Type: "error", Text: err.Error()})
		return
	}
	defer a.Session.Close()
	a.Emit = func(ev agent.LoopEvent) {
		if ev.Type != "approval" { // the panel sends its own, with an id to answer
			send(ev)
		}
	}
	var (
		dmu       sync.Mutex
		decisions = map[int]chan agent.Decision{}
		nextID    int
	)
	a.Approve = func(ctx context.Context, act *agent.Action) agent.Decision {
		dmu.Lock()
		nextID++
		id, ch := nextID, make(chan agent.Decision, 1)
		decisions[id] = ch
		dmu.Unlock()
		send(panelMsg{Type: "approval", ID: id, Action: act.Summary, Diff: act.Diff})
		select {
		case d := <-ch:
			return d
		case <-ctx.Done():
			return agent.Decision{Reason: "the window closed"}
		}
	}
	var history []agent.Message
	running := make(chan struct{}, 1) // one run at a time
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m panelMsg
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "decision":
			dmu.Lock()
			ch := decisions[m.ID]
			delete(decisions, m.ID)
			dmu.Unlock()
			if ch != nil {
				ch <- agent.Decision{Approve: m.Approve, Reason: m.Reason}
			}
		case "prompt":
			select {
			case running <- struct{}{}:
			default:
				send(panelMsg{Type: "error", Text: "the agent is still at work on the last prompt"})
				continue
			}
			go func(prompt string) {
				defer func() { <-running }()
				msgs, err := a.Run(ctx, history, prompt)
				if err == nil {
					history = msgs
				}
			}(m.Text)
		}
	}
}
