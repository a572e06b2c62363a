package setup

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
)

// TestSetupKeepsAKeyForItsServer: Enter at the key keeps the saved key
// for the server it was saved for, never sends it to another server; the
// saved model is offered; a provider cove does not speak is refused
// before anything is asked of a server.
func TestSetupKeepsAKeyForItsServer(t *testing.T) {
	a, b := llmtest.New(t), llmtest.New(t)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := agent.SaveConfig(path, agent.Config{Provider: "openai", BaseURL: a.URL(), APIKey: "sk-saved", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	getenv := func(string) string { return "" }
	ok := []llmtest.Response{{Status: 404, Body: `{"error":{"message":"no list"}}`},
		{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})}}
	var out strings.Builder

	a.Push(ok...)
	if err := Run(context.Background(), strings.NewReader("\n\n\n\n"), &out, getenv, path, nil); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	reqs := a.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer sk-saved" || reqs[len(reqs)-1].JSON(t)["model"] != "m" {
		t.Errorf("the same server got %q for model %v, want the saved key and model", got, reqs[len(reqs)-1].JSON(t)["model"])
	}

	b.Push(ok...)
	if err := Run(context.Background(), strings.NewReader("\n"+b.URL()+"\n\n\n"), &out, getenv, path, nil); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	for _, r := range b.Requests() {
		if got := r.Header.Get("Authorization"); got != "" {
			t.Errorf("another server got the saved key: %q", got)
		}
	}
	if c, _ := agent.ReadConfigFile(path); c.APIKey != "" || c.BaseURL != b.URL() {
		t.Errorf("saved %+v, want no key for the new server", c)
	}

	before := len(b.Requests())
	if err := Run(context.Background(), strings.NewReader("claude\n"), &out, getenv, path, nil); err == nil ||
		!strings.Contains(err.Error(), `provider "claude": say openai or anthropic`) || len(b.Requests()) != before {
		t.Errorf("provider claude: %v", err)
	}
}
