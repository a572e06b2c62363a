package agent_test

import (
	"context"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
)

// TestResolveWindowAsksOllama: with no window configured, a local Ollama
// is asked for the one it runs the model with; a remote API is not asked.
func TestResolveWindowAsksOllama(t *testing.T) {
	ollama := llmtest.Ollama(t, llmtest.New(t), "num_ctx 8192")
	ctx := context.Background()
	if n := (agent.Config{BaseURL: ollama.URL + "/v1", Model: "qwen3"}).ResolveWindow(ctx); n != 8192 {
		t.Errorf("a local Ollama: %d, want its num_ctx 8192", n)
	}
	if n := (agent.Config{BaseURL: ollama.URL + "/v1", Model: "qwen3", ContextWindow: 65536}).ResolveWindow(ctx); n != 65536 {
		t.Errorf("a configured window: %d", n)
	}
	if n := (agent.Config{BaseURL: "https://api.openai.invalid/v1", Model: "m"}).ResolveWindow(ctx); n != 0 {
		t.Errorf("a remote API: %d", n)
	}
}
