package setup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/llmtest"
)

// TestSetupChecksBeforeSaving runs the setup questions against a scripted
// server: a refused key saves nothing and keeps the old file byte for
// byte; an accepted one is saved 0600 and loads back; "$VAR" is saved as
// written, not expanded.
func TestSetupChecksBeforeSaving(t *testing.T) {
	srv := llmtest.New(t)
	path := filepath.Join(t.TempDir(), "cove", "config.json")
	getenv := func(k string) string {
		if k == "MY_KEY" {
			return "sk-from-env"
		}
		return ""
	}
	answers := func(key string) *strings.Reader {
		return strings.NewReader("openai\n" + srv.URL() + "\n" + key + "\ntest-model\n")
	}
	var out strings.Builder

	srv.Push(llmtest.Response{Status: 401, Body: `{"error":{"message":"Incorrect API key provided"}}`})
	err := Run(context.Background(), answers("sk-wrong"), &out, getenv, path, nil)
	if err == nil || !strings.Contains(err.Error(), "API key was refused") || !strings.Contains(err.Error(), "nothing saved") {
		t.Fatalf("a refused key: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused key left a config: %v", err)
	}

	srv.Push(llmtest.Response{Body: `{"object":"list","data":[{"id":"test-model","max_model_len":32768},{"id":"another-model"}]}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})})
	if err := Run(context.Background(), answers("sk-right"), &out, getenv, path, nil); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "The server has 2 models:\n  another-model\n  test-model (32k context)\n") {
		t.Errorf("the models were not listed:\n%s", out.String())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved config: %v %v", fi, err)
	}
	// The window the server gave for the model is kept, for compaction.
	if c, err := agent.ReadConfigFile(path); err != nil || c.APIKey != "sk-right" || c.Model != "test-model" || c.BaseURL != srv.URL() || c.ContextWindow != 32768 {
		t.Fatalf("saved %+v, %v", c, err)
	}
	reqs := srv.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer sk-right" || reqs[len(reqs)-2].Path != "/models" {
		t.Errorf("the check sent %q; the list was asked at %s", got, reqs[len(reqs)-2].Path)
	}

	// A wrong key now must not touch the good file.
	before, _ := os.ReadFile(path)
	srv.Push(llmtest.Response{Status: 401, Body: `{"error":{"message":"no"}}`})
	Run(context.Background(), answers("sk-wrong"), &out, getenv, path, nil)
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a failed setup changed the file:\n%s", after)
	}

	// A server without the list is asked for the name.
	srv.Push(llmtest.Response{Status: 404, Body: `{"error":{"message":"not found"}}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})})
	if err := Run(context.Background(), answers("$MY_KEY"), &out, getenv, path, nil); err != nil {
		t.Fatal(err)
	}
	if c, _ := agent.ReadConfigFile(path); c.APIKey != "$MY_KEY" {
		t.Errorf("saved key %q, want it as written", c.APIKey)
	}
	reqs = srv.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer sk-from-env" {
		t.Errorf("the check sent %q", got)
	}
}

// TestSetupFindsWhatIsThere: a local server answering /models and a key in
// the environment are listed; the server becomes the default, and with
// only Enter pressed its one model is checked and saved, with no key.
func TestSetupFindsWhatIsThere(t *testing.T) {
	local := llmtest.New(t)
	local.Push(
		llmtest.Response{Body: `{"data":[{"id":"qwen3"}]}`}, // the probe
		llmtest.Response{Body: `{"data":[{"id":"qwen3"}]}`}, // the list
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})},
	)
	getenv := func(k string) string {
		if k == "ANTHROPIC_API_KEY" {
			return "sk-ant"
		}
		return ""
	}
	path := filepath.Join(t.TempDir(), "config.json")
	var out strings.Builder
	closed := "http://127.0.0.1:1/v1" // nothing listens there
	if err := Run(context.Background(), strings.NewReader("\n\n\n\n"), &out, getenv, path, []string{closed, local.URL()}); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "Found: $ANTHROPIC_API_KEY, "+local.URL()+"\n") {
		t.Errorf("what was found:\n%s", out.String())
	}
	c, err := agent.ReadConfigFile(path)
	if err != nil || c.Provider != "openai" || c.BaseURL != local.URL() || c.Model != "qwen3" || c.APIKey != "" {
		t.Errorf("saved %+v, %v\n%s", c, err, out.String())
	}
}

// TestSetupTellsOllamasContext: Ollama cuts long prompts without a word,
// so setup saves the context it runs the model with, and says when that
// is small for an agent.
func TestSetupTellsOllamasContext(t *testing.T) {
	llm := llmtest.New(t)
	llm.Push(llmtest.Response{Body: `{"object":"list","data":[{"id":"qwen3"}]}`},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "OK"})})
	ollama := llmtest.Ollama(t, llm, "temperature 0.7")
	path := filepath.Join(t.TempDir(), "config.json")
	var out strings.Builder
	in := strings.NewReader("openai\n" + ollama.URL + "/v1\n\nqwen3\n")
	if err := Run(context.Background(), in, &out, func(string) string { return "" }, path, nil); err != nil {
		t.Fatalf("setup: %v\n%s", err, out.String())
	}
	if c, err := agent.ReadConfigFile(path); err != nil || c.ContextWindow != 4096 {
		t.Errorf("saved %+v (%v)", c, err)
	}
	if !strings.Contains(out.String(), "Ollama runs qwen3 with a 4096-token context") {
		t.Errorf("no word of the small context:\n%s", out.String())
	}
}
