package agent

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/execfile"
	"github.com/cove-sh/cove/internal/llmtest"
)

// call scripts one OpenAI answer that calls a tool.
func call(id, name string, args any) llmtest.Response {
	b, _ := json.Marshal(args)
	idx := 0
	return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
		"index": idx, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
}

func answer(text string) llmtest.Response {
	return llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": text})}
}

// project writes a Go module with a failing test.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":      "module demo\n\ngo 1.22\n",
		"add.go":      "package demo\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
		"add_test.go": "package demo\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
		"notes/a.txt": "one\ntwo\none\n",
		".gitignore":  "secret.txt\n",
		"secret.txt":  "hidden\n",
	}
	for name, body := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// toolResults returns the tool messages of the last request the server got.
func toolResults(t *testing.T, srv *llmtest.Server) []map[string]any {
	t.Helper()
	reqs := srv.Requests()
	var out []map[string]any
	for _, m := range reqs[len(reqs)-1].JSON(t)["messages"].([]any) {
		if mm := m.(map[string]any); mm["role"] == "tool" {
			out = append(out, mm)
		}
	}
	return out
}

func newAgent(t *testing.T, srv *llmtest.Server, dir string, mode Mode) (*Agent, *BashTool) {
	t.Helper()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	bash := &BashTool{W: w, Timeout: 60 * time.Second}
	t.Cleanup(bash.Close)
	return &Agent{
		Provider: &OpenAI{BaseURL: srv.URL(), Backoff: fast}, Model: "m", Mode: mode,
		Tools: []Tool{ReadTool{W: w}, WriteTool{w}, EditTool{w}, SearchTool{W: w}, bash},
	}, bash
}

// TestAgentFixesAFailingTest: the scripted model reads the failing test,
// edits the code, runs the tests; they pass, and the model saw it.
func TestAgentFixesAFailingTest(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	dir := project(t)
	srv := llmtest.New(t)
	srv.Push(
		call("c1", "read", map[string]any{"path": "add_test.go"}),
		call("c2", "edit", map[string]any{"path": "add.go", "edits": []any{map[string]any{"old": "return a - b", "new": "return a + b"}}}),
		call("c3", "bash", map[string]any{"command": "cd /tmp && cd - >/dev/null && go test ./... 2>&1 | tail -1"}),
		answer("Fixed: Add subtracted."),
	)
	a, _ := newAgent(t, srv, dir, ModeYolo)
	var events []string
	a.Emit = func(ev LoopEvent) {
		if ev.Type != "usage" && ev.Type != "tool_output" { // how many depends on timing
			events = append(events, ev.Type)
		}
	}
	msgs, err := a.Run(context.Background(), nil, "make the tests pass")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "add.go"))
	if !strings.Contains(string(b), "return a + b") {
		t.Fatalf("add.go not fixed:\n%s", b)
	}
	res := toolResults(t, srv)
	if len(res) != 3 || !strings.Contains(res[0]["content"].(string), "Add(2, 3) != 5") || !strings.HasPrefix(res[2]["content"].(string), "ok") {
		t.Fatalf("what the model saw: %v", res)
	}
	if last := msgs[len(msgs)-1]; last.Content != "Fixed: Add subtracted." {
		t.Fatalf("final %+v", last)
	}
	if strings.Join(events, ",") != "tool_call,tool_result,tool_call,edited,tool_result,tool_call,tool_result,text,done" {
		t.Errorf("events %v", events)
	}
}

func TestAgentEditErrorsGoBackToTheModel(t *testing.T) {
	dir := project(t)
	srv := llmtest.New(t)
	srv.Push(
		call("c1", "edit", map[string]any{"path": "add.go", "edits": []any{map[string]any{"old": "return a * b", "new": "return a + b"}}}),
		call("c2", "edit", map[string]any{"path": "notes/a.txt", "edits": []any{map[string]any{"old": "one", "new": "1"}}}),
		call("c3", "edit", map[string]any{"path": "add.go", "edits": []any{
			map[string]any{"old": "return a - b", "new": "return a + b"},
			map[string]any{"old": "not there at all", "new": "x"}}}),
		answer("ok"),
	)
	a, _ := newAgent(t, srv, dir, ModeYolo)
	if _, err := a.Run(context.Background(), nil, "edit"); err != nil {
		t.Fatal(err)
	}
	res := toolResults(t, srv)
	if c := res[0]["content"].(string); !strings.Contains(c, "Did you mean") || !strings.Contains(c, "return a - b") {
		t.Errorf("zero matches: %q", c)
	}
	if c := res[1]["content"].(string); !strings.Contains(c, "2 times") || !strings.Contains(c, "at line 3") {
		t.Errorf("two matches: %q", c)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "add.go")); !strings.Contains(string(b), "return a - b") {
		t.Errorf("a failed multi-edit changed the file:\n%s", b)
	}
}

func TestAgentRefusedApprovalLeavesTheFile(t *testing.T) {
	dir := project(t)
	srv := llmtest.New(t)
	srv.Push(
		call("c1", "write", map[string]any{"path": "add.go", "content": "package demo\n"}),
		call("c2", "bash", map[string]any{"command": "touch ran"}),
		answer("ok"),
	)
	a, _ := newAgent(t, srv, dir, ModeAsk)
	var asked []string
	a.Approve = func(ctx context.Context, act *Action) Decision {
		asked = append(asked, act.Summary)
		if act.Kind == "edit" && !strings.Contains(act.Diff, "-\treturn a - b") {
			t.Errorf("the diff shown: %q", act.Diff)
		}
		return Decision{Approve: false, Reason: "keep it"}
	}
	if _, err := a.Run(context.Background(), nil, "rewrite"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "add.go")); !strings.Contains(string(b), "func Add") {
		t.Fatal("a refused write changed the file")
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("a refused command ran")
	}
	res := toolResults(t, srv)
	if c := res[0]["content"].(string); !strings.Contains(c, "refused") || !strings.Contains(c, "keep it") {
		t.Errorf("the model was told %q", c)
	}
	if len(asked) != 2 {
		t.Errorf("asked %v", asked)
	}
}

func TestBashToolTimeoutKillsTheTree(t *testing.T) {
	w, err := OpenWorkspace(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := &BashTool{W: w}
	defer b.Close()
	run := func(cmd string, timeout int) string {
		act, err := b.Plan(context.Background(), json.RawMessage(`{"command":`+strconvQuote(cmd)+`,"timeout":`+strconvItoa(timeout)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := act.Do(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("mkdir sub && cd sub && export X=kept", 10)
	if out := run("pwd; echo $X; cat", 10); !strings.HasSuffix(strings.Fields(out)[0], "/sub") || !strings.Contains(out, "kept") {
		t.Fatalf("state did not carry over (or stdin was open): %q", out)
	}
	// A sleep time no other process has (other packages' tests run at the
	// same time), to count only ours.
	nap := strconvItoa(int(200000 + time.Now().UnixNano()%100000))
	start := time.Now()
	out := run("sleep "+nap+" & sleep "+nap, 1)
	if time.Since(start) > 5*time.Second || !strings.Contains(out, "timed out") {
		t.Fatalf("timeout: %v %q", time.Since(start), out)
	}
	if n, _ := exec.Command("pgrep", "-f", "^sleep "+nap+"$").Output(); len(strings.TrimSpace(string(n))) > 0 {
		t.Fatalf("sleeps survived the timeout: %s", n)
	}
	if out := run("pwd", 10); !strings.HasSuffix(strings.TrimSpace(out), "/sub") {
		t.Fatalf("the restarted shell is not where it was: %q", out)
	}
	big := run("seq 1 100000", 10)
	if !strings.Contains(big, "left out") || !strings.Contains(big, "100000") || len(big) > clipAt+500 {
		t.Fatalf("long output not clipped: %d bytes", len(big))
	}
	if out := run("false", 10); !strings.Contains(out, "[exit status 1]") {
		t.Fatalf("status: %q", out)
	}
}

func TestSearchHonoursGitignore(t *testing.T) {
	dir := project(t)
	if err := exec.Command("git", "-C", dir, "init", "-q").Run(); err != nil {
		t.Skip("no git")
	}
	w, _ := OpenWorkspace(dir)
	defer w.Close()
	act, err := SearchTool{W: w}.Plan(context.Background(), json.RawMessage(`{"pattern":"hidden|Add\\("}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := act.Do(context.Background())
	if strings.Contains(out, "secret.txt") || !strings.Contains(out, "add_test.go:6:") {
		t.Fatalf("search: %q", out)
	}
}

func TestWorkspaceConfinesPaths(t *testing.T) {
	dir := project(t)
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "link"))
	w, _ := OpenWorkspace(dir)
	defer w.Close()
	for _, p := range []string{"../x", outside, "link"} {
		if _, err := w.ReadFile(p); err == nil {
			t.Errorf("read %s outside the workspace", p)
		}
	}
	for _, p := range []string{"../x", outside} {
		if err := w.WriteFile(p, []byte("pwned")); err == nil {
			t.Errorf("wrote %s outside the workspace", p)
		}
	}
	// Writing to the symlink replaces the link itself, inside.
	w.WriteFile("link", []byte("inside"))
	if b, _ := os.ReadFile(outside); string(b) != "x" {
		t.Fatal("the file outside changed")
	}
}

// TestAgentCompactsWhenTooLong: a too-long answer makes the agent
// summarise, and the request after it carries the summary, the newest
// user message word for word, and less than before.
func TestAgentCompactsWhenTooLong(t *testing.T) {
	dir := project(t)
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Response{Status: 400, Body: `{"error":{"message":"maximum context length exceeded","code":"context_length_exceeded"}}`},
		answer("SUMMARY: the user wants Add fixed"),
		answer("done"),
	)
	a, _ := newAgent(t, srv, dir, ModeYolo)
	history := []Message{{Role: "user", Content: strings.Repeat("old words ", 2000)}, {Role: "assistant", Content: "noted"}}
	if _, err := a.Run(context.Background(), history, "now fix Add"); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := string(reqs[2].Body)
	if !strings.Contains(last, "SUMMARY: the user wants Add fixed") || !strings.Contains(last, "now fix Add") || len(reqs[2].Body) >= len(reqs[0].Body) {
		t.Fatalf("after compaction the request is %d bytes (before %d): %.300s", len(reqs[2].Body), len(reqs[0].Body), last)
	}
}

// TestSessionResumeDoesNotRerun: a step cut off after the model asked for
// a command is resumed with that command marked as not run.
func TestSessionResumeDoesNotRerun(t *testing.T) {
	dir := project(t)
	sessions := filepath.Join(t.TempDir(), "sessions") // host-only, as the project's agent state
	s, err := NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "go"}})
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c9", Name: "bash", Args: json.RawMessage(`{"command":"touch twice"}`)}}}})
	s.Close()
	s2, msgs, err := ResumeSession(sessions, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.ID != s.ID || len(msgs) != 3 || msgs[2].Role != "tool" || msgs[2].ToolCallID != "c9" || !strings.Contains(msgs[2].Content, "not run") {
		t.Fatalf("resumed %+v", msgs)
	}
	srv := llmtest.New(t)
	srv.Push(answer("resumed"))
	a, _ := newAgent(t, srv, dir, ModeYolo)
	a.Session = s2
	if _, err := a.Run(context.Background(), msgs, "continue"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "twice")); err == nil {
		t.Fatal("the interrupted command ran on resume")
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func strconvItoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestProjectTools(t *testing.T) {
	dir := project(t)
	tools := filepath.Join(dir, ".cove", "tools")
	os.MkdirAll(tools, 0o755)
	execfile.Write(filepath.Join(tools, "shout.sh"), []byte(`#!/bin/sh
if [ "$1" = --schema ]; then
  echo '{"description":"shout a word","schema":{"type":"object","properties":{"word":{"type":"string"}}}}'
  exit 0
fi
tr a-z A-Z
`), 0o755)
	execfile.Write(filepath.Join(tools, "broken"), []byte("#!/bin/sh\necho not json\n"), 0o755)
	os.WriteFile(filepath.Join(tools, "README"), []byte("not executable\n"), 0o644)
	loaded, broken := LoadProjectTools(context.Background(), dir, LocalRunner(dir))
	if len(loaded) != 1 || loaded[0].Spec().Name != "shout" || len(broken) != 1 || !strings.HasSuffix(broken[0].Path, "broken") {
		t.Fatalf("loaded %v, broken %+v", loaded, broken)
	}
	srv := llmtest.New(t)
	srv.Push(call("c1", "shout", map[string]any{"word": "hi"}), answer("ok"))
	a, _ := newAgent(t, srv, dir, ModeYolo)
	a.Tools = append(a.Tools, loaded...)
	if _, err := a.Run(context.Background(), nil, "shout"); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[0].JSON(t)
	found := false
	for _, tl := range body["tools"].([]any) {
		if tl.(map[string]any)["function"].(map[string]any)["name"] == "shout" {
			found = true
		}
	}
	if res := toolResults(t, srv); !found || len(res) != 1 || res[0]["content"] != `{"WORD":"HI"}` {
		t.Fatalf("offered %v; the tool answered %v", found, res)
	}
}

// stopTool ends the run's context while it runs, as Ctrl-C would.
type stopTool struct{ stop context.CancelFunc }

func (s stopTool) Spec() ToolSpec {
	return ToolSpec{Name: "stop", Schema: schema(`{"type":"object"}`)}
}

func (s stopTool) Plan(ctx context.Context, _ json.RawMessage) (*Action, error) {
	return &Action{Kind: "read", Summary: "stop", Do: func(context.Context) (string, error) {
		s.stop()
		return "ran", nil
	}}, nil
}

// TestRunStoppedMidStepAnswersEveryCall: stopped after the first of two
// calls, Run returns a conversation where the second is answered "not
// run", and the session log resumes to the same messages.
func TestRunStoppedMidStepAnswersEveryCall(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{
		map[string]any{"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "stop", "arguments": "{}"}},
		map[string]any{"index": 1, "id": "c2", "type": "function", "function": map[string]any{"name": "stop", "arguments": "{}"}},
	}})})
	sessions := t.TempDir()
	s, err := NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &Agent{Provider: &OpenAI{BaseURL: srv.URL()}, Model: "m", Mode: ModeYolo, Session: s, Tools: []Tool{stopTool{cancel}}}
	msgs, err := a.Run(ctx, nil, "go")
	if err == nil {
		t.Fatal("Run went on after its context ended")
	}
	s.Close()
	if n := len(msgs); n != 4 || msgs[2].Content != "ran" || msgs[3].ToolCallID != "c2" || !strings.Contains(msgs[3].Content, "not run") {
		t.Fatalf("conversation after the stop: %+v", msgs)
	}
	_, resumed, err := ResumeSession(sessions, s.ID)
	if err != nil || len(resumed) != 4 || resumed[3].ToolCallID != "c2" {
		t.Errorf("resumed %+v, %v", resumed, err)
	}
}

// TestCommandOutputStreamsAsItComes: a command's output reaches the
// events while it runs, not only in the result.
func TestCommandOutputStreamsAsItComes(t *testing.T) {
	srv := llmtest.New(t)
	a, _ := newAgent(t, srv, t.TempDir(), ModeYolo)
	type seen struct {
		ev LoopEvent
		at time.Duration
	}
	var (
		mu     sync.Mutex
		events []seen
	)
	start := time.Now()
	a.Emit = func(ev LoopEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, seen{ev, time.Since(start)})
	}
	srv.Push(call("c1", "bash", map[string]any{"command": "echo one; sleep 0.5; echo two"}), answer("ran it"))
	if _, err := a.Run(context.Background(), nil, "run it"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var outputs []seen
	var result time.Duration
	for _, s := range events {
		switch s.ev.Type {
		case "tool_output":
			if result != 0 {
				t.Fatalf("output after the result: %q", s.ev.Text)
			}
			outputs = append(outputs, s)
		case "tool_result":
			result = s.at
		}
	}
	if len(outputs) != 2 || outputs[0].ev.Text != "one\n" || outputs[1].ev.Text != "two\n" {
		t.Fatalf("tool_output events: %+v", outputs)
	}
	if result-outputs[0].at < 300*time.Millisecond {
		t.Errorf("the first line came %v before the result: it was not streamed while the command ran", result-outputs[0].at)
	}
}

// withUsage makes r report that its call took prompt tokens.
func withUsage(r llmtest.Response, prompt int) llmtest.Response {
	u, _ := json.Marshal(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": 20}})
	r.Events = append([]llmtest.SSE(nil), r.Events...)
	r.Events[len(r.Events)-2] = llmtest.SSE{Data: string(u)}
	return r
}

// TestAgentCompactsNearTheWindow: past 80% of the model's window, the
// conversation is summarised before the next call, earlier steps of the
// turn in progress included; the prompt and the latest step stay word for
// word, the next request fits the window, and a resumed session sees what
// the model saw.
func TestAgentCompactsNearTheWindow(t *testing.T) {
	dir := t.TempDir()
	srv := llmtest.New(t)
	srv.Push(
		withUsage(call("c1", "bash", map[string]any{"command": "echo FIRST-STEP-OUTPUT; seq 1 400"}), 400),
		withUsage(call("c2", "bash", map[string]any{"command": "echo LATEST-STEP-OUTPUT"}), 900), // past 800 of 1000
		answer("SUMMARY-XYZ: ran two commands"),
		answer("done"),
	)
	a, _ := newAgent(t, srv, dir, ModeYolo)
	a.Window = 1000
	sessions := filepath.Join(t.TempDir(), "sessions")
	session, err := NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	a.Session = session
	var compactions int
	a.Emit = func(ev LoopEvent) {
		if ev.Type == "compacted" {
			compactions++
		}
	}
	history := []Message{{Role: "user", Content: "OLD-REQUEST " + strings.Repeat("words ", 300)}, {Role: "assistant", Content: "OLD-ANSWER"}}
	msgs, err := a.Run(context.Background(), history, "PROMPT-WORD-FOR-WORD: run things")
	if err != nil {
		t.Fatal(err)
	}
	session.Close()
	reqs := srv.Requests()
	if len(reqs) != 4 || compactions != 1 {
		t.Fatalf("%d requests, %d compactions; want 4 (two steps, the summary, the answer) and 1", len(reqs), compactions)
	}
	summarised, next := string(reqs[2].Body), string(reqs[3].Body)
	for _, s := range []string{"OLD-REQUEST", "FIRST-STEP-OUTPUT"} {
		if !strings.Contains(summarised, s) {
			t.Errorf("the summary request lacks %s", s)
		}
	}
	if strings.Contains(summarised, "LATEST-STEP-OUTPUT") {
		t.Error("the latest step went into the summary")
	}
	for _, s := range []string{"SUMMARY-XYZ", "PROMPT-WORD-FOR-WORD: run things", "LATEST-STEP-OUTPUT", `"c2"`} {
		if !strings.Contains(next, s) {
			t.Errorf("the request after compaction lacks %s", s)
		}
	}
	for _, s := range []string{"OLD-REQUEST", "FIRST-STEP-OUTPUT", `"c1"`} {
		if strings.Contains(next, s) {
			t.Errorf("the request after compaction still has %s", s)
		}
	}
	var sent struct{ Messages []Message }
	json.Unmarshal(reqs[3].Body, &sent)
	if n := estimateTokens(sent.Messages) + len(a.System)/4; n > a.Window*8/10 {
		t.Errorf("the request after compaction is ~%d tokens, over 80%% of the %d window", n, a.Window)
	}
	// Resumed, the conversation is the one the model saw.
	s, resumed, err := ResumeSession(sessions, session.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if len(resumed) != len(msgs) || resumed[0].Content != msgs[0].Content || !strings.Contains(resumed[0].Content, "SUMMARY-XYZ") {
		t.Errorf("resumed %d messages (first %.60q), the run ended with %d (first %.60q)", len(resumed), resumed[0].Content, len(msgs), msgs[0].Content)
	}
}

// TestCommandOutputFloodIsBatchedAndCapped: a command that writes a lot
// streams it in a few batched events, at most streamLimit bytes of it;
// the result the model gets is clipped as always.
func TestCommandOutputFloodIsBatchedAndCapped(t *testing.T) {
	srv := llmtest.New(t)
	a, _ := newAgent(t, srv, t.TempDir(), ModeYolo)
	var (
		mu       sync.Mutex
		events   int
		streamed int
		result   string
	)
	a.Emit = func(ev LoopEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case "tool_output":
			events++
			streamed += len(ev.Text)
		case "tool_result":
			result = ev.Text
		}
	}
	srv.Push(call("c1", "bash", map[string]any{"command": "seq 1 200000"}), answer("done"))
	if _, err := a.Run(context.Background(), nil, "flood"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if streamed == 0 || streamed > streamLimit {
		t.Errorf("streamed %d bytes, want some and at most %d", streamed, streamLimit)
	}
	if events > 200 {
		t.Errorf("%d output events for one command: not batched", events)
	}
	if !strings.Contains(result, "left out") || len(result) > clipAt+500 {
		t.Errorf("the result is %d bytes, not clipped", len(result))
	}
}

// TestProjectToolsNotListedFromTheHost: a .cove/tools the workspace made a
// symlink to a host directory lists none of the host's programs.
func TestProjectToolsNotListedFromTheHost(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	execfile.Write(filepath.Join(host, "hostprog"), []byte("#!/bin/sh\necho '{\"schema\":{}}'\n"), 0o755)
	os.Mkdir(filepath.Join(dir, ".cove"), 0o755)
	os.Symlink(host, filepath.Join(dir, ".cove", "tools"))
	if loaded, broken := LoadProjectTools(context.Background(), dir, LocalRunner(dir)); len(loaded)+len(broken) > 0 {
		t.Errorf("tools listed from a host directory: %v %v", loaded, broken)
	}
}

// alwaysTool is a command that may be allowed for the session by key.
type alwaysTool struct{ ran *int }

func (s alwaysTool) Spec() ToolSpec {
	return ToolSpec{Name: "remote", Description: "a server's tool", Schema: schema(`{"type":"object"}`)}
}

func (s alwaysTool) Plan(ctx context.Context, _ json.RawMessage) (*Action, error) {
	return &Action{Kind: "command", Summary: "MCP srv: remote", Always: []string{"mcp:srv/remote", "mcp:srv"},
		Do: func(context.Context) (string, error) { *s.ran++; return "ran", nil }}, nil
}

// TestAlwaysAllowLastsTheSession: an approval that says "always" for one
// of the action's keys lets its like run without asking again; a key the
// action did not offer allows nothing.
func TestAlwaysAllowLastsTheSession(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(call("c1", "remote", map[string]any{}), call("c2", "remote", map[string]any{}), answer("done"),
		call("c3", "remote", map[string]any{}), answer("done"))
	ran := 0
	a := &Agent{Provider: &OpenAI{BaseURL: srv.URL(), Backoff: fast}, Model: "m", Mode: ModeAsk, Tools: []Tool{alwaysTool{&ran}}}
	asked := 0
	a.Approve = func(ctx context.Context, act *Action) Decision {
		asked++
		return Decision{Approve: true, Always: "mcp:srv"}
	}
	msgs, err := a.Run(context.Background(), nil, "go")
	if err != nil {
		t.Fatal(err)
	}
	if asked != 1 || ran != 2 {
		t.Fatalf("asked %d times, ran %d: want asked once, ran twice", asked, ran)
	}
	// A new session (the chat's /new, the panel's New) starts asking again.
	s, err := NewSession(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a.Session = s
	if _, err := a.Run(context.Background(), msgs, "again"); err != nil {
		t.Fatal(err)
	}
	if asked != 2 || ran != 3 {
		t.Errorf("in a new session: asked %d times in all, ran %d: want the new session's call asked", asked, ran)
	}
}
