package terminal

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/internal/termtext"
)

// mcpLine is one server as the terminal shows it (its name and errors
// made visible: a project's are the workspace's words).
func mcpLine(s mcpclient.Status) string {
	line := fmt.Sprintf("%s (%s, %s, %s): %s", s.Name, s.Where, s.Kind, s.Source, s.State)
	if s.State == mcpclient.StateRunning {
		line += fmt.Sprintf(", %d tools", len(s.Tools))
		if s.Resources > 0 || s.Prompts > 0 {
			line += fmt.Sprintf(", %d resources, %d prompts", s.Resources, s.Prompts)
		}
		line += fmt.Sprintf(", started in %d ms", s.StartMS)
	}
	if s.Restarts > 0 {
		line += fmt.Sprintf(", restarted %d×", s.Restarts)
	}
	if s.Error != "" {
		line += ": " + s.Error
	}
	return termtext.Visible(line)
}

// mcpTrace reports on w each server's changes of state after the first
// (a death, a restart, a failure), for the terminal.
func mcpTrace(w io.Writer, m *mcpclient.Manager) func() {
	var mu sync.Mutex
	last := map[string]string{}
	for _, s := range m.Status() {
		last[s.Name] = s.State
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range m.Status() {
			if last[s.Name] == s.State || s.State == mcpclient.StateStopped {
				continue // stopped: cove is leaving
			}
			last[s.Name] = s.State
			mark := "·"
			if s.State == mcpclient.StateFailed || s.State == mcpclient.StateRestarting {
				mark = "!"
			}
			fmt.Fprintf(w, "%s MCP %s\n", mark, mcpLine(s))
		}
	}
}

// WaitMCP waits (a minute at most) for m's servers' first start and says
// on w how each went, then reports their later changes there (a death, a
// restart): so that the first request already has their tools. m may be
// nil (no servers).
func WaitMCP(ctx context.Context, w io.Writer, m *mcpclient.Manager) {
	if m == nil || len(m.Status()) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m.Ready(ctx)
	for _, s := range m.Status() {
		mark := "·"
		if s.State != mcpclient.StateRunning {
			mark = "!"
		}
		fmt.Fprintf(w, "%s MCP %s\n", mark, mcpLine(s))
	}
	m.OnChange(mcpTrace(w, m))
}
