package main

import (
	"context"
	"os"
	"os/exec"

	"github.com/cove-sh/cove/agent/mcpclient"
)

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
