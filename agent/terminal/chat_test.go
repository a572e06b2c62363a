package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/mdterm"
	"github.com/cove-sh/cove/internal/testbuf"
)

// TestChatApproveInterruptRewind holds a terminal conversation against a
// scripted OpenAI-compatible server: an edit approved on the chat's own
// input, a turn stopped mid-stream (the chat goes on, the server sees the
// request go), and /rewind, which takes back the file and the
// conversation, so the next request carries only the new prompt.
func TestChatApproveInterruptRewind(t *testing.T) {
	dir := t.TempDir()
	w, err := agent.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	state := t.TempDir() // the project's agent state, host-only
	cp, err := agent.OpenCheckpoints(context.Background(), dir, filepath.Join(state, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t)
	args, _ := json.Marshal(map[string]any{"path": "notes.txt", "content": "written by the agent\n"})
	srv.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "write", "arguments": string(args)}}}})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Wrote notes.txt."})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Let me think about th"})[:1], Hang: true},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Fresh start."})},
	)
	provider, err := agent.Config{Provider: "openai", BaseURL: srv.URL(), APIKey: "k", Model: "m"}.NewProvider()
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(state, "sessions")
	s, err := agent.NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent.Agent{Provider: provider, Model: "m", Mode: agent.ModeAsk, Session: s, Checkpoints: cp,
		Tools: []agent.Tool{agent.WriteTool{W: w}}}
	inR, inW := io.Pipe()
	out := testbuf.New()
	ch := &chat{a: a, lines: &plainLines{in: bufio.NewReader(inR), out: out}, out: out, sessions: sessions}
	done := make(chan error, 1)
	go func() { done <- ch.run(context.Background()) }()
	say := func(line string) { io.WriteString(inW, line+"\n") }

	say("write some notes")
	out.WaitFor(t, "allow?")
	say("y")
	out.WaitFor(t, "Wrote notes.txt.")
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "written by the agent\n" {
		t.Fatalf("notes.txt = %q", b)
	}

	say("now think hard")
	out.WaitFor(t, "Let me think about th")
	if !ch.interrupt() {
		t.Fatal("no turn to interrupt")
	}
	out.WaitFor(t, "stopped")

	say("/rewind 1")
	out.WaitFor(t, "back before turn 1")
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); !os.IsNotExist(err) {
		t.Errorf("notes.txt after /rewind 1: %v", err)
	}
	say("start over")
	out.WaitFor(t, "Fresh start.")
	say("/exit")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	msgs := reqs[3].JSON(t)["messages"].([]any)
	var contents []string
	for _, m := range msgs {
		if mm := m.(map[string]any); mm["role"] != "system" {
			c, _ := mm["content"].(string)
			contents = append(contents, c)
		}
	}
	if len(contents) != 1 || contents[0] != "start over" {
		t.Errorf("after /rewind the model saw %q, want only the new prompt", contents)
	}
	// The rewound conversation went on in a new session; resuming it gives
	// what the model saw.
	rs, resumed, err := agent.ResumeSession(sessions, a.Session.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if len(resumed) != 2 || resumed[0].Content != "start over" || resumed[1].Content != "Fresh start." {
		t.Errorf("resumed %+v", resumed)
	}
	// And its turn can be rewound after -c: the checkpoint came along.
	if turns := resumedTurns(rs, resumed); len(turns) != 1 || turns[0].label != "start over" || turns[0].Before != 0 || turns[0].Checkpoint == "" {
		t.Errorf("the resumed conversation's turns: %+v", turns)
	}
}

// TestChatRendersAnswers: with a renderer, the answer's text shows as it
// streams, then styled, and its unfinished line is ended before a tool
// call's trace; without one, the output is the model's text exactly.
func TestChatRendersAnswers(t *testing.T) {
	for _, rendered := range []bool{true, false} {
		dir := t.TempDir()
		w, err := agent.OpenWorkspace(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		srv := llmtest.New(t)
		args, _ := json.Marshal(map[string]any{"path": "a.txt", "content": "x\n"})
		srv.Push(
			llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"content": "Writing *it*"}, map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "write", "arguments": string(args)}}}})},
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "**Do"}, map[string]any{"content": "ne**"})},
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
		var out strings.Builder
		a := &agent.Agent{Provider: provider, Model: "m", Mode: agent.ModeYolo, Session: s, Tools: []agent.Tool{agent.WriteTool{W: w}},
			Emit: func(ev agent.LoopEvent) {
				if ev.Type == "tool_call" {
					out.WriteString("· " + ev.Call.Name + "\n") // the trace
				}
			}}
		ch := &chat{a: a, lines: &plainLines{in: bufio.NewReader(strings.NewReader("go\n")), out: &out}, out: &out, sessions: sessions}
		if rendered { // on a terminal, with input from elsewhere
			ch.md = mdterm.New(&out, func() int { return 80 })
			ch.lines.(*plainLines).echo = true
		}
		if err := ch.run(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, got, _ := strings.Cut(out.String(), "commands\n")
		want := "› Writing *it*· write\n**Do" + "ne**\n› \n"
		if rendered {
			want = "› go\nWriting *it*\r\x1b[KWriting \x1b[3mit\x1b[0m\n· write\n**Done**\r\x1b[K\x1b[1mDone\x1b[0m\n› \n"
		}
		if got != want {
			t.Errorf("rendered %v:\n got %q\nwant %q", rendered, got, want)
		}
	}
}
