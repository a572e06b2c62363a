package main

import (
	"context"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
)

// TestContextWindowAsksOllama: with no window configured, a local Ollama
// is asked for the one it runs the model with; a remote API is not asked.
func TestContextWindowAsksOllama(t *testing.T) {
	ollama := llmtest.Ollama(t, llmtest.New(t), "num_ctx 8192")
	ctx := context.Background()
	if n := contextWindow(ctx, agent.Config{BaseURL: ollama.URL + "/v1", Model: "qwen3"}); n != 8192 {
		t.Errorf("a local Ollama: %d, want its num_ctx 8192", n)
	}
	if n := contextWindow(ctx, agent.Config{BaseURL: ollama.URL + "/v1", Model: "qwen3", ContextWindow: 65536}); n != 65536 {
		t.Errorf("a configured window: %d", n)
	}
	if n := contextWindow(ctx, agent.Config{BaseURL: "https://api.openai.invalid/v1", Model: "m"}); n != 0 {
		t.Errorf("a remote API: %d", n)
	}
}
