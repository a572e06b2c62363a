package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/setup"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/workspace"
)

// agentPanel is the agent panel's back end on the launcher (the
// protocol is ide.AgentPanel's): it builds the workspace's one
// conversation, whose model is called from here, so API keys never enter
// the container, while its tools work on the project and run commands in
// the workspace.
type agentPanel struct {
	root   string              // --root, for cove exec
	layout dirs.Layout         // where the project's agent state is kept
	target workspace.Workspace // the workspace its commands run in
	dir    string
	ctx    context.Context // the launcher's: the conversation ends with it

	mu         sync.Mutex
	conv       *agent.Conversation
	closeAgent func() // its shell and workspace files
}

// Conversation implements ide.AgentBackend: the workspace's conversation,
// started on first use. A failure (no model configured) is not kept: the
// next window or prompt tries again, after the user set a model up.
func (p *agentPanel) Conversation() (*agent.Conversation, error) {
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
	state, err := agent.OpenState(p.layout, workspace.Name(p.dir))
	if err != nil {
		return nil, err
	}
	a, x, closeAgent, err := buildAgent(p.ctx, p.root, p.target, p.dir, state, cfg, nil)
	if err != nil {
		return nil, err
	}
	cv, err := agent.NewConversation(p.ctx, a, state.Sessions)
	if err != nil {
		closeAgent()
		return nil, err
	}
	if note := state.LegacyNote(p.dir, home); note != "" {
		cv.Events().Add(agent.Notice{Type: "note", Text: note})
	}
	for _, b := range x.broken {
		cv.Events().Add(agent.Notice{Type: "error", Text: fmt.Sprintf("tool %s is broken: %v", b.Path, b.Err)})
	}
	if n := cfg.IgnoredNote(); n != "" {
		cv.Events().Add(agent.Notice{Type: "note", Text: n})
	}
	for _, n := range x.mcpNotes {
		cv.Events().Add(agent.Notice{Type: "error", Text: n})
	}
	// The servers' state, whole each time it changes, for the panel's list.
	showMCP := func() { cv.Events().Add(agent.Notice{Type: "mcp", Servers: x.mcp.Status()}) }
	x.mcp.OnChange(showMCP)
	showMCP()
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

// Setup implements ide.AgentBackend: the user's config file, the usual
// local servers.
func (p *agentPanel) Setup() ide.AgentSetup { return setup.NewPanel() }

var _ ide.AgentSetup = setup.Panel{}
