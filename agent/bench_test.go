package agent

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
)

// BenchmarkAgentStep measures what a step costs beyond the model's own
// time: a scripted server answers at once with a tool call (a read), and
// the loop dispatches it, records it in the session, numbers its events
// in an EventLog (the IDE panel's fan-out) and asks again. Each iteration
// is one prompt of two model calls (the tool call, then the answer): two
// steps. It reports the median per step (ms-per-step-p50) besides ns/op,
// and the heap in use.
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
	session, err := NewSession(b.TempDir() + "/sessions")
	if err != nil {
		b.Fatal(err)
	}
	defer session.Close()
	events := NewEventLog(1 << 16)
	a := &Agent{Provider: &OpenAI{BaseURL: srv.URL()}, Model: "m", Mode: ModeYolo,
		Tools: []Tool{ReadTool{W: w}}, Session: session, Emit: func(ev LoopEvent) { events.Add(ev) }}
	perStep := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		srv.Push(callResp, answer("done"))
		start := time.Now()
		msgs, err := a.Run(context.Background(), nil, "read a.txt")
		if err != nil {
			b.Fatal(err)
		}
		perStep = append(perStep, time.Since(start)/2)
		if got := msgs[2].Content; !strings.Contains(got, "hello") { // the read's result
			b.Fatalf("the tool's result: %q", got)
		}
	}
	b.StopTimer()
	slices.Sort(perStep)
	b.ReportMetric(float64(perStep[len(perStep)/2].Microseconds())/1000, "ms-per-step-p50")
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MB")
}
