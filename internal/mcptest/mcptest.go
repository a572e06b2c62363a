// Package mcptest finds the reference MCP servers (server-everything and
// server-filesystem, from npm) that scripts/test.sh installs for tests.
package mcptest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Everything and Filesystem are the servers' scripts, under ServersDir.
const (
	Everything = "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	Filesystem = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)

// ServersDir is where they are: $COVE_TEST_MCP_SERVERS, else
// scripts/test.sh's cache. Without them (or node, which runs them) t is
// skipped, or fails under CI, which must have installed them.
func ServersDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("COVE_TEST_MCP_SERVERS")
	if dir == "" {
		dir = "/var/cache/cove-test/mcp-servers"
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must install node for the reference MCP servers (scripts/test.sh does): %v", err)
		}
		t.Skipf("node is not installed (scripts/test.sh installs it): %v", err)
	}
	for _, s := range []string{Everything, Filesystem} {
		if _, err := os.Stat(filepath.Join(dir, s)); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must install the reference MCP servers (scripts/test.sh does, in %s): %v", dir, err)
			}
			t.Skipf("the reference MCP servers are not installed (scripts/test.sh installs them in %s): %v", dir, err)
		}
	}
	return dir
}
