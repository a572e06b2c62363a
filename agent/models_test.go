package agent

import (
	"context"
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
	if err != nil || len(ids) != 2 || ids[0] != "claude-a" || ids[1] != "claude-b" {
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
