package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/agent/mcpclient"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/mcptest"
	"github.com/cove-sh/cove/internal/testbuf"
)

// TestChatMCP: in the terminal conversation, /mcp lists the servers with
// their state and tools, and an MCP call's approval offers "always" for
// the tool or the server: allowing the server lets its next tool run
// without asking.
func TestChatMCP(t *testing.T) {
	servers := mcptest.ServersDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	everything := filepath.Join(servers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	c := mcpclient.ServerConfig{Command: node, Args: []string{everything, "stdio"}}
	m := mcpclient.Start(context.Background(), []mcpclient.Spec{{Named: mcpclient.Named{Name: "everything", Source: "mcp.json", ServerConfig: c},
		Where: mcpclient.OnHost, Connect: func() mcpclient.Transport { return mcpclient.HostTransport(c) }}}, nil)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m.Ready(ctx)

	srv := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	srv.Push(
		toolCall("c1", "mcp__everything__echo", map[string]any{"message": "hi"}),
		toolCall("c2", "mcp__everything__get-sum", map[string]any{"a": 1, "b": 2}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "All done."})},
	)
	provider, err := agent.Config{Provider: "openai", BaseURL: srv.URL(), APIKey: "k", Model: "m"}.NewProvider()
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(t.TempDir(), "sessions")
	s, err := agent.NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Provider: provider, Model: "m", Mode: agent.ModeAsk, Session: s, More: m.Tools}
	inR, inW := io.Pipe()
	out := testbuf.New()
	ch := &chat{a: a, lines: &plainLines{in: bufio.NewReader(inR), out: out}, out: out, sessions: sessions, mcp: m}
	done := make(chan error, 1)
	go func() { done <- ch.run(context.Background()) }()
	say := func(line string) { io.WriteString(inW, line+"\n") }

	say("/mcp")
	out.WaitFor(t, "everything (host, stdio, mcp.json): running, 13 tools, 7 resources, 4 prompts")
	out.WaitFor(t, "echo, get-annotated-message")
	say("use the server")
	out.WaitFor(t, `MCP everything (host): echo {"message":"hi"} — allow? [y/N, 1: always mcp:host:everything/echo, 2: always mcp:host:everything, or say why not]`)
	say("2")
	out.WaitFor(t, "All done.")
	say("/exit")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "allow?"); n != 1 {
		t.Errorf("asked %d times, want once (the server was allowed for the session):\n%s", n, out)
	}
	results := srv.Requests()[2].ToolResults(t)
	if len(results) != 2 || results[0] != "Echo: hi" || !strings.Contains(results[1], "3") {
		t.Errorf("the model saw %q", results)
	}
	s.Close()
	log, _ := os.ReadFile(filepath.Join(sessions, s.ID+".jsonl"))
	if !strings.Contains(string(log), "and from now on, all of mcp:host:everything") {
		t.Errorf("the session log does not record the always:\n%s", log)
	}
}

// TestChatMCPProjectAlwaysStaysOnItsSide: a project's server named as
// the user's own (both "gh", both with echo): allowing the project's
// server for the session does not allow the user's. Its keys were the
// same (mcp:gh); now they name the origin.
func TestChatMCPProjectAlwaysStaysOnItsSide(t *testing.T) {
	servers := mcptest.ServersDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	everything := filepath.Join(servers, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	c := mcpclient.ServerConfig{Command: node, Args: []string{everything, "stdio"}}
	spec := func(where, source string) mcpclient.Spec {
		return mcpclient.Spec{Named: mcpclient.Named{Name: "gh", Source: source, ServerConfig: c}, Where: where,
			Connect: func() mcpclient.Transport { return mcpclient.HostTransport(c) }}
	}
	m := mcpclient.Start(context.Background(), []mcpclient.Spec{spec(mcpclient.OnHost, "mcp.json"), spec(mcpclient.InWorkspace, ".mcp.json")}, nil)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m.Ready(ctx)
	var hostEcho, projEcho string
	for _, tl := range m.Tools() {
		if n := tl.Spec().Name; n == "mcp__gh__echo" {
			hostEcho = n
		} else if strings.HasPrefix(n, "mcp__gh__echo_") {
			projEcho = n
		}
	}
	if hostEcho == "" || projEcho == "" {
		t.Fatalf("the two echo tools: %q %q", hostEcho, projEcho)
	}

	srv := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	srv.Push(
		toolCall("c1", projEcho, map[string]any{"message": "project"}),
		toolCall("c2", hostEcho, map[string]any{"message": "host"}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "All done."})},
	)
	provider, err := agent.Config{Provider: "openai", BaseURL: srv.URL(), APIKey: "k", Model: "m"}.NewProvider()
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(t.TempDir(), "sessions")
	s, err := agent.NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := &agent.Agent{Provider: provider, Model: "m", Mode: agent.ModeAsk, Session: s, More: m.Tools}
	inR, inW := io.Pipe()
	out := testbuf.New()
	ch := &chat{a: a, lines: &plainLines{in: bufio.NewReader(inR), out: out}, out: out, sessions: sessions, mcp: m}
	done := make(chan error, 1)
	go func() { done <- ch.run(context.Background()) }()
	say := func(line string) { io.WriteString(inW, line+"\n") }

	say("use them")
	out.WaitFor(t, `MCP gh (workspace): echo {"message":"project"} — allow?`)
	say("2") // always, for the whole (project's) server
	if !strings.Contains(out.String(), "2: always mcp:workspace:gh,") {
		t.Errorf("the project server's key does not say where it runs:\n%s", out)
	}
	out.WaitFor(t, `MCP gh (host): echo {"message":"host"} — allow?`)
	say("n")
	out.WaitFor(t, "All done.")
	say("/exit")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	results := srv.Requests()[2].ToolResults(t)
	if len(results) != 2 || results[0] != "Echo: project" || strings.Contains(results[1], "Echo: host") {
		t.Errorf("the model saw %q: the host's tool ran on the project server's approval", results)
	}
}
