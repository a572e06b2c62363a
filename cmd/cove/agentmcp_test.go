package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/mcptest"
	"github.com/cove-sh/cove/internal/testimage"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// nodeImage is busybox plus this machine's node (its binary and the
// libraries ldd names, at their paths) and the reference MCP servers at
// /opt/mcp, plus /srv/only-in-the-workspace/marker.txt, a path the host
// does not have: an image with Node made offline.
func nodeImage(t *testing.T) string {
	t.Helper()
	nodeImageOnce.mu.Lock()
	defer nodeImageOnce.mu.Unlock()
	if nodeImageOnce.ref == "" {
		nodeImageOnce.ref = buildNodeImage(t) // pushed once for the tests of this run
	}
	return nodeImageOnce.ref
}

var nodeImageOnce struct {
	mu  sync.Mutex
	ref string
}

func buildNodeImage(t *testing.T) string {
	t.Helper()
	servers := mcptest.ServersDir(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on this machine")
	}
	node, _ = filepath.EvalSymlinks(node)
	out, err := exec.Command("ldd", node).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", node, err)
	}
	var entries []testimage.Entry
	dirs := map[string]bool{}
	addDirs := func(p string) {
		var parents []string
		for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, testimage.Dir(strings.TrimPrefix(d, "/"), 0o755))
			}
		}
	}
	addFile := func(inImage, host string) {
		b, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(host)
		addDirs(inImage)
		e := testimage.File(strings.TrimPrefix(inImage, "/"), "", int64(fi.Mode().Perm()))
		e.Body = b
		entries = append(entries, e)
	}
	addFile("/usr/bin/node", node)
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			t.Fatal(err)
		}
		addFile(lib, real)
	}
	root := filepath.Join(servers, "node_modules")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		in := "/opt/mcp/node_modules/" + strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		switch {
		case d.IsDir():
			addDirs(in + "/x")
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			addDirs(in)
			entries = append(entries, testimage.Symlink(strings.TrimPrefix(in, "/"), target))
		case d.Type().IsRegular():
			addFile(in, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	addDirs("/srv/only-in-the-workspace/marker.txt")
	entries = append(entries, testimage.Entry{Name: "srv/only-in-the-workspace/marker.txt", Type: tar.TypeReg, Mode: 0o644, Body: []byte("in the image\n")})
	nodeLayer, err := testimage.ZstdLayer(entries...)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := testimage.BusyboxLayer()
	if err != nil {
		t.Skip(err)
	}
	img, err := testimage.Image(runtime.GOARCH, bb, nodeLayer)
	if err != nil {
		t.Fatal(err)
	}
	return testregistry.Push(t, testregistry.Addr(t), img)
}

// TestAgentMCPServersRunInTheWorkspace: the servers a project's .mcp.json
// names run inside its workspace, driven by cove agent -p and the scripted
// model: server-filesystem lists a directory only the workspace's image
// has and reads the workspace's host name; server-everything, started in
// the workspace on its own loopback, is reached over streamable HTTP from
// the workspace's side. What the project names never runs on the host,
// nor reaches the host's network: a command that would leave a mark here
// leaves none, and a listener on the host's loopback is never dialled.
func TestAgentMCPServersRunInTheWorkspace(t *testing.T) {
	t.Parallel()
	needRoot(t)
	t0 := time.Now()
	ref := nodeImage(t)
	t.Logf("node image built and pushed in %v", time.Since(t0))
	project := t.TempDir()
	root := t.TempDir()
	name := workspace.Name(project)

	// The host's listener that the project points at: never dialled.
	hostL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostL.Close()
	var dialled atomic.Int32
	go func() {
		for {
			c, err := hostL.Accept()
			if err != nil {
				return
			}
			dialled.Add(1)
			c.Close()
		}
	}()
	// A path both sides have a directory for: /tmp.
	hostMark := fmt.Sprintf("/tmp/cove-mcp-ran-here-%d", time.Now().UnixNano())
	t.Cleanup(func() { os.Remove(hostMark) })
	const inPort = 3917
	mcpJSON := map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": "node", "args": []string{
			"/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/srv/only-in-the-workspace", "/proc/sys/kernel"}},
		"web":     map[string]any{"type": "http", "url": fmt.Sprintf("http://127.0.0.1:%d/mcp", inPort)},
		"sneaky":  map[string]any{"command": "/bin/touch", "args": []string{hostMark}},
		"hostweb": map[string]any{"type": "http", "url": "http://" + hostL.Addr().String() + "/mcp"},
	}}
	b, _ := json.Marshal(mcpJSON)
	os.WriteFile(filepath.Join(project, ".mcp.json"), b, 0o644)

	// The workspace, and server-everything in it on its own loopback.
	if r := runProc(t, root, "", "up", "--detach", "--no-browser", "--image", ref, project); r.code != 0 {
		t.Fatalf("cove up: %d\n%s", r.code, r.stderr)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", name) })
	if r := runProc(t, root, "", "exec", name, "sh", "-c", fmt.Sprintf(
		"PORT=%d setsid node /opt/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp >/tmp/everything.log 2>&1 </dev/null &", inPort)); r.code != 0 {
		t.Fatalf("starting server-everything in the workspace: %s", r.stderr)
	}
	for i := 0; ; i++ {
		r := runProc(t, root, "", "exec", name, "sh", "-c", "grep -q listening /tmp/everything.log")
		if r.code == 0 {
			break
		}
		if i > 200 {
			log := runProc(t, root, "", "exec", name, "cat", "/tmp/everything.log")
			t.Fatalf("server-everything did not start in the workspace: %s", log.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", inPort), time.Second); err == nil {
		c.Close()
		t.Fatalf("port %d answers on the host's loopback too: the test proves nothing", inPort)
	}

	srv := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	srv.Push(
		toolCall("c1", "mcp__fs__list_directory", map[string]any{"path": "/srv/only-in-the-workspace"}),
		toolCall("c2", "mcp__fs__read_text_file", map[string]any{"path": "/proc/sys/kernel/hostname"}),
		toolCall("c3", "mcp__web__echo", map[string]any{"message": "from the workspace's side"}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Done."})},
	)
	cmd, out, errb := coveProc(root, "agent", "--yes", "-p", "look around", project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
	cmd.Stdin = strings.NewReader("")
	t1 := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("cove agent: %v\n%s", err, errb)
	}
	t.Logf("cove agent -p with four servers in the workspace: %v\n%s", time.Since(t1), errb)
	if out.String() != "Done.\n" {
		t.Errorf("stdout %q", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests\n%s", len(reqs), errb)
	}
	results := reqs[3].ToolResults(t)
	want := []string{"[FILE] marker.txt", name + "\n", "Echo: from the workspace's side"}
	if len(results) != 3 || results[0] != want[0] || strings.TrimSpace(results[1]) != strings.TrimSpace(want[1]) || results[2] != want[2] {
		t.Fatalf("the model saw %q, want %q\n%s", results, want, errb)
	}
	if h, _ := os.Hostname(); h == name {
		t.Fatalf("the host is named %s too: the test proves nothing", h)
	}
	if _, err := os.Stat("/srv/only-in-the-workspace"); err == nil {
		t.Fatal("the host has /srv/only-in-the-workspace: the test proves nothing")
	}
	// The project's command ran in the workspace (the mark is there), not here.
	if _, err := os.Stat(hostMark); err == nil {
		t.Errorf("the project's .mcp.json ran %s on the host", hostMark)
	}
	if r := runProc(t, root, "", "exec", name, "test", "-e", hostMark); r.code != 0 {
		t.Errorf("the project's command did not run in the workspace either (%d): the test proves nothing", r.code)
	}
	if n := dialled.Load(); n != 0 {
		t.Errorf("the project's URL on the host's loopback was dialled %d times", n)
	}
	// The trace says how each server went.
	for _, line := range []string{"· MCP fs (workspace, stdio, .mcp.json): running, 14 tools", "· MCP web (workspace, http, .mcp.json): running", "! MCP sneaky (workspace, stdio, .mcp.json): failed", "! MCP hostweb (workspace, http, .mcp.json): failed"} {
		if !strings.Contains(errb.String(), line) {
			t.Errorf("the trace lacks %q:\n%s", line, errb)
		}
	}

	// The user's servers run here: ~/.config/cove/mcp.json and
	// --mcp-config FILE; the user's "fs" wins over the project's.
	node, _ := exec.LookPath("node")
	everything := filepath.Join(mcptest.ServersDir(t), "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config", "cove"), 0o700)
	userCfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs": map[string]any{"command": node, "args": []string{everything, "stdio"}, "env": map[string]string{"WHERE": "${MCP_TEST_WHERE}"}}}})
	os.WriteFile(filepath.Join(home, ".config", "cove", "mcp.json"), userCfg, 0o600)
	extra := filepath.Join(t.TempDir(), "extra.json")
	extraCfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"extra": map[string]any{"command": node, "args": []string{everything, "stdio"}}}})
	os.WriteFile(extra, extraCfg, 0o600)
	srv.Push(
		toolCall("h1", "mcp__fs__get-env", map[string]any{}),
		toolCall("h2", "mcp__extra__echo", map[string]any{"message": "on the host"}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Host done."})},
	)
	cmd, out, errb = coveProc(root, "agent", "--yes", "--mcp-config", extra, "-p", "and here", project)
	cmd.Env = append(cmd.Env, "HOME="+home, "MCP_TEST_WHERE=the-host-env", "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("cove agent --mcp-config: %v\n%s", err, errb)
	}
	if out.String() != "Host done.\n" {
		t.Errorf("stdout %q", out)
	}
	reqs = srv.Requests()
	results = reqs[len(reqs)-1].ToolResults(t)
	if len(results) != 2 || !strings.Contains(results[0], `"WHERE": "the-host-env"`) || results[1] != "Echo: on the host" {
		t.Fatalf("the model saw %q\n%s", results, errb)
	}
	for _, line := range []string{"· MCP fs (host, stdio, " + filepath.Join(home, ".config", "cove", "mcp.json") + "): running", "· MCP extra (host, stdio, " + extra + "): running",
		`! the project's MCP server "fs" is left out: your own config names one "fs" too`} {
		if !strings.Contains(errb.String(), line) {
			t.Errorf("the trace lacks %q:\n%s", line, errb)
		}
	}
}

// TestBrowserAgentMCP: the IDE panel, in Chromium, lists the project's MCP
// servers with their state and errors, and allows a server for the
// conversation from its approval card (scripts in ide/web/test/mcp.mjs).
func TestBrowserAgentMCP(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	ref := nodeImage(t)
	_, env := noModelEnv(t)
	llm := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	llm.Push(
		toolCall("c1", "mcp__fs__list_directory", map[string]any{"path": "/srv/only-in-the-workspace"}),
		toolCall("c2", "mcp__fs__list_allowed_directories", map[string]any{}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Looked around."})},
	)
	env = append(env, "COVE_BASE_URL="+llm.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
	project := t.TempDir()
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		"fs":     map[string]any{"command": "node", "args": []string{"/opt/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/srv/only-in-the-workspace"}},
		"broken": map[string]any{"command": "/no/such/server"},
	}})
	os.WriteFile(filepath.Join(project, ".mcp.json"), b, 0o644)
	_, url := startUpEnv(t, t.TempDir(), ref, project, env)
	shot := filepath.Join(t.TempDir(), "mcp.png")
	if out, err := exec.Command(node, "../../ide/web/test/mcp.mjs", url, shot).CombinedOutput(); err != nil {
		t.Fatalf("browser: %v\n%s\nlauncher: %s", err, out, upErr(t))
	}
	if dst := os.Getenv("COVE_TEST_SHOTS"); dst != "" {
		if b, err := os.ReadFile(shot); err == nil {
			os.WriteFile(filepath.Join(dst, "agent-mcp.png"), b, 0o644)
		}
	}
}
