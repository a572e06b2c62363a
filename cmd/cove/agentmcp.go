package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/urfave/cli/v2"
)

// mcpRelayCommand is the workspace's side of a project's HTTP MCP server:
// run inside the workspace (from /.cove/cove) by cove exec, it connects
// its standard input and output to ADDR as the workspace's network sees it.
func mcpRelayCommand() *cli.Command {
	return &cli.Command{
		Name:      "mcp-relay",
		Usage:     "connect standard input and output to ADDR (inside a workspace, for its MCP servers)",
		ArgsUsage: "HOST:PORT",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return fmt.Errorf("mcp-relay: say HOST:PORT")
			}
			return mcpclient.Relay(c.Context, c.Args().First(), os.Stdin, os.Stdout)
		},
	}
}

// startMCP starts the MCP servers of the user's config, the --mcp-config
// files, and the project's (those run in the workspace st names, through
// cove exec; the user's on this machine).
func startMCP(ctx context.Context, bin string, coveArgs func(...string) []string, st string, dir string, extra []string) (*mcpclient.Manager, []string, error) {
	home, _ := os.UserHomeDir()
	inWorkspace := func(env []string, argv ...string) *exec.Cmd {
		args := coveArgs("exec", "-i", "-w", "/workspace")
		for _, kv := range env {
			args = append(args, "-e", kv)
		}
		return exec.Command(bin, append(append(args, st), argv...)...)
	}
	specs, notes, err := mcpclient.Load(mcpclient.Sources{
		UserFile: mcpclient.UserConfigPath(home), Extra: extra, Project: dir, Getenv: os.Getenv,
		Host: mcpclient.HostTransport,
		Workspace: func(c mcpclient.ServerConfig) mcpclient.Transport {
			return mcpclient.WorkspaceTransport(c, inWorkspace)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return mcpclient.Start(ctx, specs, nil), notes, nil
}

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

// waitMCP waits (a minute at most) for the servers' first start and says
// how each went, then reports later changes on w.
func waitMCP(ctx context.Context, w io.Writer, m *mcpclient.Manager) {
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

// allowQuestion is the terminal's approval question for act: y or n, or,
// for an action that may be allowed for the session, a number for which.
func allowQuestion(act *agent.Action) string {
	q := termtext.Visible(act.Summary) + " — allow? [y/N"
	for i, k := range act.Always {
		q += fmt.Sprintf(", %d: always %s", i+1, termtext.Visible(k))
	}
	return q + ", or say why not] "
}

// allowAnswer reads the answer to allowQuestion.
func allowAnswer(line string, act *agent.Action) agent.Decision {
	line = strings.TrimSpace(line)
	if strings.EqualFold(line, "y") || strings.EqualFold(line, "yes") {
		return agent.Decision{Approve: true}
	}
	for i, k := range act.Always {
		if line == fmt.Sprint(i+1) {
			return agent.Decision{Approve: true, Always: k}
		}
	}
	return agent.Decision{Reason: line}
}
