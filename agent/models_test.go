package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cove-sh/cove/internal/llmtest"
)

// TestAnthropicModels: the list is asked at /v1/models with the key and
// version headers, and comes back sorted; a refused key is an APIError
// that names the fix.
func TestAnthropicModels(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Body: `{"data":[{"id":"claude-b","type":"model"},{"id":"claude-a","type":"model"}],"has_more":false}`},
		llmtest.Response{Status: 401, Body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`})
	p := &Anthropic{BaseURL: srv.URL(), APIKey: "sk-ant-test"}
	ids, err := p.Models(context.Background())
	if err != nil || len(ids) != 2 || ids[0].ID != "claude-a" || ids[1].ID != "claude-b" || ids[0].Window != 0 {
		t.Fatalf("models %v, %v", ids, err)
	}
	r := srv.Requests()[0]
	if r.Path != "/v1/models" || r.Header.Get("x-api-key") != "sk-ant-test" || r.Header.Get("anthropic-version") == "" {
		t.Errorf("request %s %v", r.Path, r.Header)
	}
	if _, err := p.Models(context.Background()); err == nil || !isAuthError(err) {
		t.Errorf("a refused key: %v", err)
	}
}

func isAuthError(err error) bool {
	e, ok := err.(*APIError)
	return ok && e.Status == 401
}

// TestModelWindows: the context window comes from whichever field the
// server uses for it.
func TestModelWindows(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Response{Body: `{"object":"list","data":[
		{"id":"vllm-model","max_model_len":32768},
		{"id":"router/model","context_length":131072},
		{"id":"groq-model","context_window":8192},
		{"id":"mistral-model","max_context_length":65536},
		{"id":"plain"}]}`})
	models, err := (&OpenAI{BaseURL: srv.URL()}).Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"vllm-model": 32768, "router/model": 131072, "groq-model": 8192, "mistral-model": 65536, "plain": 0}
	if len(models) != len(want) {
		t.Fatalf("models %v", models)
	}
	for _, m := range models {
		if w, ok := want[m.ID]; !ok || m.Window != w {
			t.Errorf("%s: window %d, want %d", m.ID, m.Window, w)
		}
	}
	if s := (Model{ID: "m", Window: 131072}).String(); s != "m (131k context)" {
		t.Errorf("String: %q", s)
	}
}

// TestOllamaContext: Ollama is told from its /api/version, and a model's
// context is its num_ctx parameter, else Ollama's default; another server
// is not Ollama.
func TestOllamaContext(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"0.9.6"}`) })
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		json.NewDecoder(r.Body).Decode(&req)
		if req.Model == "big" {
			io.WriteString(w, `{"parameters":"stop \"<|im_end|>\"\nnum_ctx 32768\ntemperature 0.7"}`)
			return
		}
		io.WriteString(w, `{"parameters":"temperature 0.7"}`)
	})
	ollama := httptest.NewServer(mux)
	defer ollama.Close()
	ctx := context.Background()
	if n, ok := OllamaContext(ctx, nil, ollama.URL+"/v1", "big"); !ok || n != 32768 {
		t.Errorf("big: %d %v", n, ok)
	}
	if n, ok := OllamaContext(ctx, nil, ollama.URL+"/v1/", "small"); !ok || n != ollamaDefaultContext {
		t.Errorf("small: %d %v", n, ok)
	}
	other := llmtest.New(t) // not found outside the APIs' own paths
	if _, ok := OllamaContext(ctx, nil, other.URL()+"/v1", "m"); ok {
		t.Error("a server that is not Ollama was taken for it")
	}
}
