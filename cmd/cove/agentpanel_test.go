package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// panel is a window's connection to a workspace's agent panel.
type panel struct {
	t  *testing.T
	ws *websocket.Conn
}

func openPanel(t *testing.T, url string, after int) *panel {
	t.Helper()
	base, token, _ := strings.Cut(url, "/?token=")
	h := http.Header{"X-Cove-Token": {token}, "Origin": {base}}
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/agent?after="+strconv.Itoa(after), &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadLimit(16 << 20)
	t.Cleanup(func() { ws.CloseNow() })
	return &panel{t, ws}
}

func (p *panel) send(m map[string]any) {
	p.t.Helper()
	b, _ := json.Marshal(m)
	if err := p.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		p.t.Fatal(err)
	}
}

// until reads events until one of type typ, and returns them all.
func (p *panel) until(typ string) []map[string]any {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var evs []map[string]any
	for {
		_, b, err := p.ws.Read(ctx)
		if err != nil {
			p.t.Fatalf("waiting for %q: %v after %v", typ, err, evs)
		}
		var ev map[string]any
		json.Unmarshal(b, &ev)
		evs = append(evs, ev)
		if ev["type"] == typ {
			return evs
		}
	}
}

func find(evs []map[string]any, typ string) map[string]any {
	for _, ev := range evs {
		if ev["type"] == typ {
			return ev
		}
	}
	return nil
}

// TestAgentPanelConversationOutlivesTheLauncher: the panel's conversation
// is the workspace's: a later cove up shows it again, its turns can still
// be rewound, the model gets it as history, and New starts another.
func TestAgentPanelConversationOutlivesTheLauncher(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("one\n"), 0o644)
	llm := llmtest.New(t)
	write, _ := json.Marshal(map[string]any{"path": "a.txt", "content": "two\n"})
	llm.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Hello **there**."})},
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "w1", "type": "function", "function": map[string]any{"name": "write", "arguments": string(write)}}}})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Wrote it."})},
	)
	model := []string{"COVE_BASE_URL=" + llm.URL(), "COVE_MODEL=test-model"}
	root := t.TempDir()

	up, url := startUpEnv(t, root, ref, project, model)
	p := openPanel(t, url, 0)
	p.until("live")
	p.send(map[string]any{"type": "prompt", "text": "first prompt"})
	first := p.until("done")
	cp, _ := find(first, "checkpoint")["text"].(string)
	if cp == "" {
		t.Fatalf("no checkpoint: %v", first)
	}
	p.until("state") // idle
	up.Process.Signal(syscall.SIGINT)
	up.Wait()

	// A new launcher: the conversation is there, as it was said.
	_, url = startUpEnv(t, root, ref, project, model)
	again := agentEvents(t, url, 0)
	var said []string
	for _, ev := range again {
		switch ev["type"] {
		case "user", "text", "checkpoint":
			said = append(said, ev["type"].(string)+":"+ev["text"].(string))
		}
	}
	if strings.Join(said, "|") != "user:first prompt|checkpoint:"+cp+"|text:Hello **there**." {
		t.Fatalf("after a restart the panel shows %q", said)
	}
	// It goes on with the model seeing it; in Auto-edit mode (every
	// window is told), the edit is made without asking, its diff shown.
	p = openPanel(t, url, len(again))
	p.send(map[string]any{"type": "mode", "text": "edits"})
	if m := p.until("mode"); m[len(m)-1]["text"] != "edits" {
		t.Fatalf("mode: %v", m)
	}
	p.send(map[string]any{"type": "prompt", "text": "second prompt"})
	second := p.until("done")
	if ev := find(second, "approval"); ev != nil {
		t.Errorf("Auto-edit asked: %v", ev)
	}
	if ev := find(second, "edited"); ev == nil || !strings.Contains(ev["diff"].(string), "+two") || ev["action"] != "write a.txt" {
		t.Errorf("the edit's event: %v", ev)
	}
	p.until("state")
	// The audit log (the session) says who let it run.
	sessionsDir := filepath.Join(root, "state", "projects", workspace.Name(project), "sessions")
	logs, _ := filepath.Glob(filepath.Join(sessionsDir, "*.jsonl"))
	audited := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		audited = audited || strings.Contains(string(b), `"type":"decision","text":"by the mode, edits","action":"write a.txt"`)
	}
	if !audited {
		t.Errorf("no decision by the mode in the session logs %v", logs)
	}
	reqs := llm.Requests()
	if msgs := reqs[len(reqs)-2].JSON(t)["messages"].([]any); len(msgs) != 4 { // system, first, hello, second
		t.Errorf("the model saw %d messages after the restart, want 4", len(msgs))
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "two\n" {
		t.Fatalf("a.txt = %q", b)
	}
	// The first turn, from before the restart, can be rewound.
	p.send(map[string]any{"type": "rewind", "text": cp})
	if ev := find(p.until("rewound"), "error"); ev != nil {
		t.Fatalf("rewind: %v", ev)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "a.txt")); string(b) != "one\n" {
		t.Errorf("a.txt after rewinding to before the first prompt: %q", b)
	}
	// New: the panel is told to clear, and the next launcher starts empty.
	p.send(map[string]any{"type": "new"})
	p.until("cleared")
	// History: the kept conversations, latest first; opening one shows it.
	p.send(map[string]any{"type": "sessions"})
	got := p.until("sessions")
	list, _ := got[len(got)-1]["sessions"].([]any)
	var firstID string
	for _, it := range list {
		if s := it.(map[string]any); s["prompt"] == "first prompt" {
			firstID = s["id"].(string)
		}
	}
	if len(list) < 3 || list[0].(map[string]any)["prompts"].(float64) != 0 || firstID == "" {
		t.Fatalf("sessions: %v", list)
	}
	p.send(map[string]any{"type": "open", "text": firstID})
	opened := p.until("done")
	if ev := find(opened, "cleared"); ev == nil || ev["text"] != firstID || find(opened, "user")["text"] != "first prompt" {
		t.Errorf("opening %s: %v", firstID, opened)
	}
	sessions, _ := filepath.Glob(filepath.Join(sessionsDir, "*.jsonl"))
	if len(sessions) < 3 { // the first, the rewound one, the new one
		t.Errorf("sessions: %v", sessions)
	}
	if _, err := os.Lstat(filepath.Join(project, ".cove")); !os.IsNotExist(err) {
		t.Errorf("the agent wrote into the project's .cove: %v", err)
	}
}

// noModelEnv leaves a launcher without a model: env, appended to its
// environment, empties the model's settings and gives it an empty home of
// its own, which it returns. The test process's environment is not
// touched, so such a test runs beside others.
func noModelEnv(t *testing.T) (home string, env []string) {
	for _, k := range []string{"COVE_BASE_URL", "COVE_MODEL", "COVE_API_KEY", "COVE_PROVIDER", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"} {
		env = append(env, k+"=")
	}
	home = t.TempDir()
	return home, append(env, "HOME="+home)
}

// TestAgentPanelSetsUpTheModel: with no model configured, the panel offers
// setup (a saved key never sent back, only kept), lists the server's
// models, and saves the choice only after the model answered; then the
// conversation starts.
func TestAgentPanelSetsUpTheModel(t *testing.T) {
	t.Parallel()
	needRoot(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	home, env := noModelEnv(t)
	llm := llmtest.New(t)
	llm.Push(
		llmtest.Response{Body: `{"object":"list","data":[{"id":"test-model","max_model_len":32768},{"id":"other"}]}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Hello from the new model."})},
	)
	// A key saved before, without a model.
	path := filepath.Join(home, ".config", "cove", "config.json")
	os.MkdirAll(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte(`{"provider":"openai","base_url":"`+llm.URL()+`","api_key":"sk-saved"}`), 0o600)

	_, url := startUpEnv(t, t.TempDir(), ref, t.TempDir(), env)
	p := openPanel(t, url, 0)
	offer := p.until("setup")[0]
	cfg, _ := offer["config"].(map[string]any)
	if offer["text"] != "No model is set up yet: choose a provider and a model." || cfg["api_key"] != nil || offer["saved_key"] != true || cfg["base_url"] != llm.URL() {
		t.Fatalf("the setup offered: %v", offer)
	}
	form := map[string]any{"provider": "openai", "base_url": llm.URL(), "api_key": ""}
	p.send(map[string]any{"type": "setup_models", "config": form})
	got := p.until("setup_models")
	if ms := got[len(got)-1]["models"].([]any); len(ms) != 2 {
		t.Fatalf("models: %v", got)
	}
	form["model"], form["context_window"] = "test-model", 32768
	p.send(map[string]any{"type": "setup_save", "config": form})
	if done := p.until("setup_done"); find(done, "setup_error") != nil {
		t.Fatalf("setup: %v", done)
	}
	p.until("live")
	p.send(map[string]any{"type": "prompt", "text": "hi"})
	if ev := find(p.until("done"), "text"); ev == nil || ev["text"] != "Hello from the new model." {
		t.Errorf("the first answer: %v", ev)
	}
	reqs := llm.Requests()
	if len(reqs) != 3 || reqs[0].Path != "/models" || reqs[1].Header.Get("Authorization") != "Bearer sk-saved" {
		t.Fatalf("requests: %d (%v)", len(reqs), reqs)
	}
	c, err := agent.ReadConfigFile(path)
	if fi, _ := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || c.Model != "test-model" || c.APIKey != "sk-saved" || c.ContextWindow != 32768 {
		t.Errorf("saved %+v (%v)", c, err)
	}
}

// TestBrowserAgentSetup fills in the panel's setup form in Chromium.
func TestBrowserAgentSetup(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	home, env := noModelEnv(t)
	llm := llmtest.New(t)
	llm.Push(
		llmtest.Response{Body: `{"object":"list","data":[{"id":"test-model"},{"id":"other"}]}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Hello from the new model."})},
	)
	_, url := startUpEnv(t, t.TempDir(), ref, t.TempDir(), env)
	if out, err := exec.Command(node, "../../ide/web/test/setup.mjs", url, llm.URL()).CombinedOutput(); err != nil {
		t.Fatalf("browser: %v\n%s\nlauncher: %s", err, out, upErr(t))
	}
	c, err := agent.ReadConfigFile(filepath.Join(home, ".config", "cove", "config.json"))
	if err != nil || c.Model != "test-model" || c.APIKey != "sk-typed" || c.BaseURL != llm.URL() {
		t.Errorf("saved %+v (%v)", c, err)
	}
	if reqs := llm.Requests(); len(reqs) != 3 || reqs[2].Header.Get("Authorization") != "Bearer sk-typed" {
		t.Errorf("requests: %d", len(reqs))
	}
}
