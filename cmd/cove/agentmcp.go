package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/cove-sh/cove/agent/mcpclient"
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
