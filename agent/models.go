package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ModelLister is a provider that can say which models it serves.
type ModelLister interface {
	Models(ctx context.Context) ([]Model, error)
}

// Model is one the server serves.
type Model struct {
	ID string
	// Window is its context window in tokens, where the server says (vLLM,
	// OpenRouter, Groq, Mistral, LM Studio, Together do; OpenAI and
	// Anthropic do not); 0 if not.
	Window int
}

func (m Model) String() string {
	if m.Window > 0 {
		return fmt.Sprintf("%s (%dk context)", m.ID, m.Window/1000)
	}
	return m.ID
}

// Models lists the server's models (GET /models, which OpenAI, vLLM,
// llama.cpp, Ollama and LM Studio all answer).
func (p *OpenAI) Models(ctx context.Context) ([]Model, error) {
	header := map[string]string{}
	if p.APIKey != "" {
		header["Authorization"] = "Bearer " + p.APIKey
	}
	return listModels(ctx, p.Client, "openai", strings.TrimSuffix(p.BaseURL, "/")+"/models", header)
}

// Models lists the models the key may use (GET /v1/models).
func (p *Anthropic) Models(ctx context.Context) ([]Model, error) {
	base := p.BaseURL
	if base == "" {
		base = "https://api.anthropic.com"
	}
	return listModels(ctx, p.Client, "anthropic", strings.TrimSuffix(base, "/")+"/v1/models?limit=1000",
		map[string]string{"anthropic-version": "2023-06-01", "x-api-key": p.APIKey})
}

// listModels reads the {"data":[{"id":…}]} answer both APIs give, and the
// context window where a server adds it, under one of the names in use.
func listModels(ctx context.Context, client *http.Client, provider, url string, header map[string]string) ([]Model, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := do(client, provider, req, header)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID               string `json:"id"`
			MaxModelLen      int    `json:"max_model_len"`      // vLLM
			ContextLength    int    `json:"context_length"`     // OpenRouter, Together
			ContextWindow    int    `json:"context_window"`     // Groq
			MaxContextLength int    `json:"max_context_length"` // Mistral, LM Studio
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: list models: %w", provider, err)
	}
	var models []Model
	for _, m := range list.Data {
		models = append(models, Model{ID: m.ID, Window: max(m.MaxModelLen, m.ContextLength, m.ContextWindow, m.MaxContextLength)})
	}
	sort.Slice(models, func(i, j int) bool { return models[i].ID < models[j].ID })
	return models, nil
}

// ollamaDefaultContext is the context Ollama gives a model whose
// parameters set none (OLLAMA_CONTEXT_LENGTH, on the server, can raise it;
// cove cannot see that).
const ollamaDefaultContext = 4096

// ResolveWindow is c's model's context window: as configured, else, for
// an Ollama server (which cuts long prompts without a word; asked only
// when it is on this machine or its usual port, so that a remote API
// costs no extra request), the context Ollama runs the model with. 0 is
// unknown.
func (c Config) ResolveWindow(ctx context.Context) int {
	if w := c.Window(); w > 0 || c.Provider == "anthropic" {
		return w
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return 0
	}
	if host := u.Hostname(); host != "127.0.0.1" && host != "localhost" && host != "::1" && u.Port() != "11434" {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	n, _ := OllamaContext(ctx, nil, c.BaseURL, c.Model)
	return n
}

// OllamaContext says, for an OpenAI-compatible base URL that is Ollama's,
// the context the server runs model with: its num_ctx parameter, else
// Ollama's default. Ollama cuts a longer prompt from the front without a
// word (the system prompt and the tools go first), so the agent must
// compact before it. ok is false for a server that is not Ollama.
func OllamaContext(ctx context.Context, client *http.Client, baseURL, model string) (n int, ok bool) {
	root := strings.TrimSuffix(strings.TrimSuffix(baseURL, "/"), "/v1")
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, root+"/api/version", nil)
	resp, err := do(client, "ollama", get, nil)
	if err != nil {
		return 0, false
	}
	var v struct{ Version string }
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || v.Version == "" {
		return 0, false
	}
	body, _ := json.Marshal(map[string]string{"model": model})
	show, _ := http.NewRequestWithContext(ctx, http.MethodPost, root+"/api/show", bytes.NewReader(body))
	if resp, err = do(client, "ollama", show, map[string]string{"Content-Type": "application/json"}); err != nil {
		return ollamaDefaultContext, true
	}
	defer resp.Body.Close()
	var info struct{ Parameters string }
	json.NewDecoder(resp.Body).Decode(&info)
	for _, line := range strings.Split(info.Parameters, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "num_ctx" {
			if n, err := strconv.Atoi(f[1]); err == nil && n > 0 {
				return n, true
			}
		}
	}
	return ollamaDefaultContext, true
}
