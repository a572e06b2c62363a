package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
)

// fakeOllama answers as Ollama does about itself (its version, a model's
// parameters), and passes the OpenAI-compatible API on to llm. (agent/setup's
// tests have the same: a test helper is not worth a package of its own.)
func fakeOllama(t *testing.T, llm *llmtest.Server, parameters string) *httptest.Server {
	target, _ := url.Parse(llm.URL())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"0.9.6"}`) })
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(map[string]string{"parameters": parameters})
		w.Write(b)
	})
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestContextWindowAsksOllama: with no window configured, a local Ollama
// is asked for the one it runs the model with; a remote API is not asked.
func TestContextWindowAsksOllama(t *testing.T) {
	ollama := fakeOllama(t, llmtest.New(t), "num_ctx 8192")
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
