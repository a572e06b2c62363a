package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// ModelLister is a provider that can say which models it serves.
type ModelLister interface {
	Models(ctx context.Context) ([]string, error)
}

// Models lists the server's models (GET /models, which OpenAI, vLLM,
// llama.cpp, Ollama and LM Studio all answer).
func (p *OpenAI) Models(ctx context.Context) ([]string, error) {
	header := map[string]string{}
	if p.APIKey != "" {
		header["Authorization"] = "Bearer " + p.APIKey
	}
	return listModels(ctx, p.Client, "openai", strings.TrimSuffix(p.BaseURL, "/")+"/models", header)
}

// Models lists the models the key may use (GET /v1/models).
func (p *Anthropic) Models(ctx context.Context) ([]string, error) {
	base := p.BaseURL
	if base == "" {
		base = "https://api.anthropic.com"
	}
	return listModels(ctx, p.Client, "anthropic", strings.TrimSuffix(base, "/")+"/v1/models?limit=1000",
		map[string]string{"anthropic-version": "2023-06-01", "x-api-key": p.APIKey})
}

// listModels reads the {"data":[{"id":…}]} answer both APIs give.
func listModels(ctx context.Context, client *http.Client, provider, url string, header map[string]string) ([]string, error) {
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
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("%s: list models: %w", provider, err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids)
	return ids, nil
}
