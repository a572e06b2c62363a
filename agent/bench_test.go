package agent

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/cove-sh/cove/internal/llmtest"
)

// BenchmarkAgentStep measures what a step costs beyond the model's own
// time: a scripted server answers at once with a tool call (a read), and
// the loop dispatches it, records it in the session and asks again. Each
// iteration is one step (two model calls: the tool call, then the answer,
// counted as one step each, so ns/op / 2 is per step).
func BenchmarkAgentStep(b *testing.B) {
	dir := b.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	w.WriteFile("a.txt", []byte("hello\n"))
	srv := llmtest.New(b)
	args, _ := json.Marshal(map[string]string{"path": "a.txt"})
	idx := 0
	callResp := llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
		"index": idx, "id": "c1", "type": "function", "function": map[string]any{"name": "read", "arguments": string(args)}}}})}
	session, err := NewSession(dir + "/.cove/sessions")
	if err != nil {
		b.Fatal(err)
	}
	defer session.Close()
	a := &Agent{Provider: &OpenAI{BaseURL: srv.URL()}, Model: "m", Mode: ModeYolo,
		Tools: []Tool{ReadTool{w}}, Session: session, Emit: func(LoopEvent) {}}
	b.ResetTimer()
	for range b.N {
		srv.Push(callResp, answer("done"))
		if _, err := a.Run(context.Background(), nil, "read a.txt"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MB")
}
