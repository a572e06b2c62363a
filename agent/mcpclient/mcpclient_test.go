package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/mcptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// referenceServers are node and the reference MCP servers' scripts.
func referenceServers(t testing.TB) (node, everything, filesystem string) {
	t.Helper()
	dir := mcptest.ServersDir(t)
	node, _ = exec.LookPath("node")
	return node, filepath.Join(dir, mcptest.Everything), filepath.Join(dir, mcptest.Filesystem)
}

func call(id, name string, args any) llmtest.Response {
	b, _ := json.Marshal(args)
	return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
}

func answer(text string) llmtest.Response {
	return llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": text})}
}

// toolMessages returns the tool messages of request i (-1: the last).
func toolMessages(t *testing.T, srv *llmtest.Server, i int) []map[string]any {
	t.Helper()
	reqs := srv.Requests()
	if i < 0 {
		i = len(reqs) + i
	}
	var out []map[string]any
	for _, m := range reqs[i].JSON(t)["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "tool" {
			out = append(out, mm)
		}
	}
	return out
}

// toolNames returns the tools offered in request i.
func toolNames(t *testing.T, srv *llmtest.Server, i int) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	tools, _ := srv.Requests()[i].JSON(t)["tools"].([]any)
	for _, tl := range tools {
		fn := tl.(map[string]any)["function"].(map[string]any)
		out[fn["name"].(string)] = fn
	}
	return out
}

func hostSpec(name string, c ServerConfig) Spec {
	return Spec{Named: Named{Name: name, Source: "test", ServerConfig: c}, Where: OnHost, Connect: func() Transport { return HostTransport(c) }}
}

func start(t *testing.T, specs ...Spec) *Manager {
	t.Helper()
	m := Start(context.Background(), specs, nil)
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	t0 := time.Now()
	m.Ready(ctx)
	for _, st := range m.Status() {
		if st.State != StateRunning {
			t.Fatalf("server %s: %s: %s", st.Name, st.State, st.Error)
		}
	}
	t.Logf("servers ready in %v", time.Since(t0))
	return m
}

func newAgent(srv *llmtest.Server, m *Manager, dir string) *agent.Agent {
	return &agent.Agent{Provider: &agent.OpenAI{BaseURL: srv.URL(), Backoff: agent.Backoff{Attempts: 1}}, Model: "m", Mode: agent.ModeYolo, More: m.Tools}
}

// TestEverythingOverStdio: the reference server, run on the host over
// stdio, offers its tools to the model with their schemas; the model's
// call reaches it and its answer is in the model's next request, and in
// the session log.
func TestEverythingOverStdio(t *testing.T) {
	node, everything, _ := referenceServers(t)
	m := start(t, hostSpec("everything", ServerConfig{Command: node, Args: []string{everything, "stdio"}}))
	srv := llmtest.New(t)
	srv.Push(call("c1", "mcp__everything__echo", map[string]any{"message": "hello from the test"}),
		call("c2", "mcp__everything__get-sum", map[string]any{"a": "not a number"}), answer("done"))
	a := newAgent(srv, m, t.TempDir())
	sessions := t.TempDir()
	s, err := agent.NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	a.Session = s
	t0 := time.Now()
	if _, err := a.Run(context.Background(), nil, "echo something"); err != nil {
		t.Fatal(err)
	}
	t.Logf("prompt to answer, one MCP call included: %v", time.Since(t0))
	s.Close()
	echo, ok := toolNames(t, srv, 0)["mcp__everything__echo"]
	if !ok {
		t.Fatalf("the model was not offered mcp__everything__echo: %v", toolNames(t, srv, 0))
	}
	if params, _ := json.Marshal(echo["parameters"]); !strings.Contains(string(params), `"message"`) {
		t.Errorf("echo's schema did not reach the model: %s", params)
	}
	res := toolMessages(t, srv, -1)
	if len(res) != 2 || res[0]["content"] != "Echo: hello from the test" {
		t.Fatalf("the model saw %v", res)
	}
	// The server's isError answer reaches the model as an error, its words kept.
	if c := res[1]["content"].(string); !strings.HasPrefix(c, "error: ") || !strings.Contains(c, "a") || !strings.Contains(strings.ToLower(c), "invalid") {
		t.Errorf("a call the server refused gave the model %q", c)
	}
	log, _ := os.ReadFile(filepath.Join(sessions, s.ID+".jsonl"))
	if !strings.Contains(string(log), "mcp__everything__echo") || !strings.Contains(string(log), "Echo: hello from the test") {
		t.Errorf("the session log lacks the call or its answer:\n%s", log)
	}
}

// TestEverythingImageGoesToAnthropic: an image in a tool's result goes to
// a provider that takes images in tool results as an image block.
func TestEverythingImageGoesToAnthropic(t *testing.T) {
	node, everything, _ := referenceServers(t)
	m := start(t, hostSpec("everything", ServerConfig{Command: node, Args: []string{everything, "stdio"}}))
	srv := llmtest.New(t)
	ev := llmtest.AnthropicEvent
	toolUse := llmtest.Response{Events: []llmtest.SSE{
		ev("message_start", map[string]any{"message": map[string]any{"usage": map[string]any{"input_tokens": 5}}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": "tu1", "name": "mcp__everything__get-tiny-image", "input": map[string]any{}}}),
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{}`}}),
		ev("content_block_stop", map[string]any{"index": 0}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use"}, "usage": map[string]any{"output_tokens": 3}}),
		ev("message_stop", nil),
	}}
	done := llmtest.Response{Events: []llmtest.SSE{
		ev("message_start", map[string]any{"message": map[string]any{"usage": map[string]any{"input_tokens": 5}}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "a logo"}}),
		ev("content_block_stop", map[string]any{"index": 0}),
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 3}}),
		ev("message_stop", nil),
	}}
	srv.Push(toolUse, done)
	a := &agent.Agent{Provider: &agent.Anthropic{BaseURL: srv.URL(), Backoff: agent.Backoff{Attempts: 1}}, Model: "m", Mode: agent.ModeYolo, More: m.Tools}
	if _, err := a.Run(context.Background(), nil, "show me"); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[1].JSON(t)
	msgs := body["messages"].([]any)
	result := msgs[len(msgs)-1].(map[string]any)["content"].([]any)[0].(map[string]any)
	blocks, _ := result["content"].([]any)
	var kinds []string
	for _, b := range blocks {
		bm := b.(map[string]any)
		kinds = append(kinds, bm["type"].(string))
		if bm["type"] == "image" {
			src := bm["source"].(map[string]any)
			if src["media_type"] != "image/png" || !strings.HasPrefix(src["data"].(string), "iVBORw0KGgo") {
				t.Errorf("image block %v", src)
			}
		}
	}
	if strings.Join(kinds, ",") != "text,image" {
		t.Fatalf("tool result blocks %v (want text then the image): %v", kinds, result)
	}
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs the reference server's streamable HTTP mode on
// a free port and returns its endpoint once it answers.
func startEverythingHTTP(t *testing.T, node, everything string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(node, everything, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 300; i++ {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("server-everything streamableHttp did not listen")
	return ""
}

// TestEverythingOverStreamableHTTP: the same over streamable HTTP.
func TestEverythingOverStreamableHTTP(t *testing.T) {
	node, everything, _ := referenceServers(t)
	url := startEverythingHTTP(t, node, everything)
	m := start(t, hostSpec("remote", ServerConfig{Type: "http", URL: url}))
	srv := llmtest.New(t)
	srv.Push(call("c1", "mcp__remote__get-sum", map[string]any{"a": 2, "b": 40}), answer("42"))
	a := newAgent(srv, m, t.TempDir())
	t0 := time.Now()
	if _, err := a.Run(context.Background(), nil, "add"); err != nil {
		t.Fatal(err)
	}
	t.Logf("prompt to answer over HTTP: %v", time.Since(t0))
	res := toolMessages(t, srv, -1)
	if len(res) != 1 || !strings.Contains(res[0]["content"].(string), "42") {
		t.Fatalf("the model saw %v", res)
	}
	if st := m.Status()[0]; st.Kind != "http" || st.Resources == 0 || st.Prompts == 0 {
		t.Errorf("status %+v: want its resources and prompts counted", st)
	}
}

// TestServerCrashMidCall: the server is killed while a call runs; the
// model gets an error, the agent goes on, and the server, restarted
// once, answers the next call.
func TestServerCrashMidCall(t *testing.T) {
	node, everything, _ := referenceServers(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	m := start(t, hostSpec("everything", ServerConfig{Command: "sh", Args: []string{"-c", `echo $$ > "$0"; exec "$1" "$2" stdio`, pidFile, node, everything}}))
	srv := llmtest.New(t)
	srv.Push(
		call("c1", "mcp__everything__trigger-long-running-operation", map[string]any{"duration": 20, "steps": 20}),
		call("c2", "mcp__everything__echo", map[string]any{"message": "still here"}),
		answer("done"),
	)
	a := newAgent(srv, m, t.TempDir())
	a.Emit = func(ev agent.LoopEvent) {
		if ev.Type == "tool_call" && ev.Call.ID == "c1" {
			go func() {
				time.Sleep(time.Second)
				b, _ := os.ReadFile(pidFile)
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				syscall.Kill(pid, syscall.SIGKILL)
			}()
		}
		if ev.Type == "tool_call" && ev.Call.ID == "c2" {
			// The restart is under way; give it the time it takes.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for st := m.Status()[0]; ctx.Err() == nil && (st.State != StateRunning || st.Restarts == 0); st = m.Status()[0] {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	t0 := time.Now()
	if _, err := a.Run(context.Background(), nil, "wait a while"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("the crash was noticed after %v: the call should fail when the server dies, not when its 20 s end", d)
	}
	res := toolMessages(t, srv, -1)
	if len(res) != 2 {
		t.Fatalf("tool results %v", res)
	}
	if c := res[0]["content"].(string); !strings.HasPrefix(c, "error: ") || !strings.Contains(c, `MCP server "everything"`) {
		t.Errorf("the crashed call gave the model %q", c)
	}
	if res[1]["content"] != "Echo: still here" {
		t.Errorf("after the restart the model saw %v", res[1]["content"])
	}
	if st := m.Status()[0]; st.State != StateRunning || st.Restarts != 1 {
		t.Errorf("status after the crash: %+v", st)
	}
}

// TestServerDyingTwiceIsLeftFailed: a server that dies again after its
// one restart stays failed, says why, and its tools are gone.
func TestServerDyingTwiceIsLeftFailed(t *testing.T) {
	node, everything, _ := referenceServers(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	m := start(t, hostSpec("everything", ServerConfig{Command: "sh", Args: []string{"-c", `echo $$ > "$0"; exec "$1" "$2" stdio`, pidFile, node, everything}}))
	kill := func() {
		b, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		syscall.Kill(pid, syscall.SIGKILL)
	}
	waitFor := func(state string) Status {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if st := m.Status()[0]; st.State == state {
				return st
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("never %s: %+v", state, m.Status()[0])
		return Status{}
	}
	kill()
	st := waitFor(StateRunning)
	for st.Restarts == 0 {
		time.Sleep(50 * time.Millisecond)
		st = waitFor(StateRunning)
	}
	kill()
	st = waitFor(StateFailed)
	if !strings.Contains(st.Error, "stopped") || len(m.Tools()) != 0 {
		t.Errorf("after a second death: %+v, %d tools", st, len(m.Tools()))
	}
}

// TestToolListChanged: a server (the Go SDK's own, over streamable HTTP)
// adds a tool mid-session; its list-changed notification brings the new
// tool to the model's next request.
func TestToolListChanged(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "sdk-server", Version: "1"}, nil)
	type none struct{}
	sdk.AddTool(s, &sdk.Tool{Name: "first", Description: "adds a second tool"}, func(ctx context.Context, req *sdk.CallToolRequest, _ none) (*sdk.CallToolResult, any, error) {
		sdk.AddTool(s, &sdk.Tool{Name: "second", Description: "new"}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "second ran"}}}, nil, nil
		})
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "added"}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	m := start(t, hostSpec("gosdk", ServerConfig{Type: "http", URL: hs.URL}))
	srv := llmtest.New(t)
	srv.Push(call("c1", "mcp__gosdk__first", map[string]any{}), answer("ok"), call("c2", "mcp__gosdk__second", map[string]any{}), answer("ok"))
	a := newAgent(srv, m, t.TempDir())
	msgs, err := a.Run(context.Background(), nil, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := toolNames(t, srv, 0)["mcp__gosdk__second"]; ok {
		t.Fatal("second offered before it existed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(m.Tools()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := a.Run(context.Background(), msgs, "two"); err != nil {
		t.Fatal(err)
	}
	if _, ok := toolNames(t, srv, 2)["mcp__gosdk__second"]; !ok {
		t.Fatalf("after the list changed the model was offered %v", toolNames(t, srv, 2))
	}
	if res := toolMessages(t, srv, -1); res[len(res)-1]["content"] != "second ran" {
		t.Errorf("the new tool's answer: %v", res)
	}
}

// TestToolNamesFitTheProviders: names keep to ^[a-zA-Z0-9_-]{1,64}$, and
// two long names sharing their start stay apart.
func TestToolNamesFitTheProviders(t *testing.T) {
	ok := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	used := map[string]bool{}
	long := strings.Repeat("x", 70)
	names := []string{
		ToolName("everything", "get-sum", used),
		ToolName("my server.v2", "read/file ☃", used),
		ToolName(long, "a", used),
		ToolName(long, "b", used),
	}
	if names[0] != "mcp__everything__get-sum" || names[1] != "mcp__my_server_v2__read_file__" {
		t.Errorf("names %q", names)
	}
	for _, n := range names {
		if !ok.MatchString(n) {
			t.Errorf("%q does not fit the providers", n)
		}
	}
	if names[2] == names[3] {
		t.Errorf("two long names collide: %q", names[2])
	}
}

// TestParseReadsOtherAgentsFiles: a Claude Code .mcp.json works as it
// is; a bad entry is refused with the name and what to write.
func TestParseReadsOtherAgentsFiles(t *testing.T) {
	servers, err := Parse(".mcp.json", []byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."], "env": {"A": "1"}},
		"api": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
		"old": {"type": "sse", "url": "http://localhost:3000/sse"},
		"off": {"command": "x", "disabled": true}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range servers {
		got = append(got, s.Name+":"+s.Kind())
	}
	if strings.Join(got, ",") != "api:http,fs:stdio,old:sse" {
		t.Errorf("servers %v", got)
	}
	if c := ExpandEnv(servers[0].ServerConfig, func(k string) string { return map[string]string{"TOKEN": "t0k"}[k] }); c.Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("expanded %v", c.Headers)
	}
	for _, bad := range []struct{ file, want string }{
		{`{"mcpServers": {"x": {"args": ["a"]}}}`, `server "x" has no "command"`},
		{`{"mcpServers": {"x": {"type": "http", "url": "file:///etc/passwd"}}}`, `is not an http:// or https:// URL`},
		{`{"mcpServers": {"x": {"type": "ws", "url": "ws://a"}}}`, `unknown "type" "ws"`},
		{`{"mcpServers": [1]}`, `it should be {"mcpServers"`},
	} {
		if _, err := Parse(".mcp.json", []byte(bad.file)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: got %v, want %q", bad.file, err, bad.want)
		}
	}
}

// TestReadProjectIsConfined: the project's files are read through the
// confined view: .cove/mcp.json's entries win over .mcp.json's, and a
// .mcp.json that is a symlink out of the project is not followed.
func TestReadProjectIsConfined(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".cove"), 0o755)
	os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(`{"mcpServers": {"a": {"command": "one"}, "b": {"command": "two"}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, ".cove", "mcp.json"), []byte(`{"mcpServers": {"b": {"command": "three"}}}`), 0o644)
	servers, err := ReadProject(dir)
	if err != nil || len(servers) != 2 || servers[0].Command != "one" || servers[1].Command != "three" || servers[1].Source != ".cove/mcp.json" {
		t.Fatalf("servers %+v (%v)", servers, err)
	}
	outside := filepath.Join(t.TempDir(), "host.json")
	os.WriteFile(outside, []byte(`{"mcpServers": {"host": {"command": "x"}}}`), 0o644)
	other := t.TempDir()
	os.Symlink(outside, filepath.Join(other, ".mcp.json"))
	if servers, err := ReadProject(other); err == nil || len(servers) != 0 {
		t.Errorf("a .mcp.json symlinked out of the project was read: %+v (%v)", servers, err)
	}
}

// TestToolsAreCapped: a server with more tools than a model should be
// offered (300) gets its first 256 offered, each description cut.
func TestToolsAreCapped(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "many", Version: "1"}, nil)
	type none struct{}
	for i := range 300 {
		sdk.AddTool(s, &sdk.Tool{Name: fmt.Sprintf("t%03d", i), Description: strings.Repeat("d", 10000)}, func(context.Context, *sdk.CallToolRequest, none) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{}, nil, nil
		})
	}
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	m := start(t, hostSpec("many", ServerConfig{Type: "http", URL: hs.URL}))
	tools := m.Tools()
	if len(tools) != maxTools {
		t.Fatalf("%d tools offered, want %d", len(tools), maxTools)
	}
	if d := tools[0].Spec().Description; len(d) > maxDescription+100 {
		t.Errorf("a description of %d bytes was offered", len(d))
	}
}
