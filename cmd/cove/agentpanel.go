package main

import (
	"context"
	"encoding/json"
	"errors"
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
//	         {"type":"stop"}                      (the turn in progress)
//	         {"type":"rewind","text":CHECKPOINT}  (files and conversation, to before that turn)
//	server → the loop's events ({"type":"text"|"thinking"|"tool_call"|"tool_result"|
//	         "checkpoint"|"compacted"|"error"|"done",…}),
//	         {"type":"approval","id":N,"action":…,"diff":…} for a decision,
//	         {"type":"stopped"}, {"type":"rewound","text":CHECKPOINT}
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
	defer func() { a.Session.Close() }() // a rewind starts a new one
	var history []agent.Message
	turns := map[string]int{} // checkpoint → the history's length before its turn
	a.Emit = func(ev agent.LoopEvent) {
		if ev.Type == "checkpoint" {
			turns[ev.Text] = len(history)
		}
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
	running := make(chan struct{}, 1) // one run (or rewind) at a time
	var stopTurn context.CancelFunc   // set while running holds
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
		case "stop":
			dmu.Lock()
			if stopTurn != nil {
				stopTurn()
			}
			dmu.Unlock()
		case "rewind":
			select {
			case running <- struct{}{}:
			default:
				send(panelMsg{Type: "error", Text: "stop the agent before rewinding"})
				continue
			}
			n, ok := turns[m.Text]
			if !ok || a.Checkpoints == nil {
				send(panelMsg{Type: "error", Text: "that checkpoint is not from this conversation"})
			} else if err := a.Checkpoints.Rewind(ctx, m.Text); err != nil {
				send(panelMsg{Type: "error", Text: "rewind: " + err.Error() + " (nothing else changed)"})
			} else if s, err := restartSession(filepath.Join(p.dir, ".cove", "sessions"), a.Session, history[:n]); err != nil {
				send(panelMsg{Type: "error", Text: err.Error()})
			} else {
				a.Session, history = s, history[:n:n]
				for id, before := range turns {
					if before >= n {
						delete(turns, id)
					}
				}
				send(panelMsg{Type: "rewound", Text: m.Text})
			}
			<-running
		case "prompt":
			select {
			case running <- struct{}{}:
			default:
				send(panelMsg{Type: "error", Text: "the agent is still at work on the last prompt"})
				continue
			}
			turnCtx, cancel := context.WithCancel(ctx)
			dmu.Lock()
			stopTurn = cancel
			dmu.Unlock()
			go func(prompt string) {
				defer func() { <-running }()
				msgs, err := a.Run(turnCtx, history, prompt)
				dmu.Lock()
				stopTurn = nil
				dmu.Unlock()
				cancel()
				history = msgs // what was said stays, a stopped step included
				if errors.Is(err, context.Canceled) && ctx.Err() == nil {
					send(panelMsg{Type: "stopped"})
				}
			}(m.Text)
		}
	}
}
