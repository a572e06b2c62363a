package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
)

// panel is a window's connection to a workspace's agent panel.
type panel struct {
	t  *testing.T
	ws *websocket.Conn
}

func openPanel(t *testing.T, url string, after int) *panel {
	t.Helper()
	base, token, _ := strings.Cut(url, "/?token=")
	h := http.Header{"Cookie": {"cove_token=" + token}, "Origin": {base}}
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
	t.Setenv("COVE_BASE_URL", llm.URL())
	t.Setenv("COVE_MODEL", "test-model")
	root := t.TempDir()

	up, url := startUp(t, root, ref, project)
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
	_, url = startUp(t, root, ref, project)
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
	logs, _ := filepath.Glob(filepath.Join(project, ".cove", "sessions", "*.jsonl"))
	audited := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		audited = audited || strings.Contains(string(b), `"type":"decision","text":"by the panel's mode, edits","action":"write a.txt"`)
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
	sessions, _ := filepath.Glob(filepath.Join(project, ".cove", "sessions", "*.jsonl"))
	if len(sessions) < 3 { // the first, the rewound one, the new one
		t.Errorf("sessions: %v", sessions)
	}
}
