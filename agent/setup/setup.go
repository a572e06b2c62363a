// Package setup is the agent's first run: it finds what can be used (keys
// in the environment, local model servers), asks for the provider, server,
// key and model, checks the model answers, and only then saves the
// choice to the user's config file. Run asks on a terminal; Panel is the
// same for the IDE's agent panel.
package setup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/agent"
	"golang.org/x/term"
)

// LocalServers are where local model servers listen by default: Ollama,
// LM Studio, llama.cpp's server, vLLM. Setup offers those that answer.
func LocalServers() []string {
	return []string{"http://127.0.0.1:11434/v1", "http://127.0.0.1:1234/v1", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8000/v1"}
}

// keyVars are the environment variables that hold keys setup can offer.
var keyVars = []struct{ name, provider, url string }{
	{"OPENAI_API_KEY", "openai", "https://api.openai.com/v1"},
	{"ANTHROPIC_API_KEY", "anthropic", "https://api.anthropic.com"},
	{"OPENROUTER_API_KEY", "openai", "https://openrouter.ai/api/v1"},
}

// Run says what it can already use (keys in the environment, local
// servers that answer on their usual ports), asks for the provider,
// server and key with those as defaults, lists the server's models to
// choose from, checks the choice with one small call to the model, and
// only then saves it all to path (mode 0600). A key typed as "$VAR" is
// saved as written and read from the environment when used. in is the
// answers; a key read from a terminal is not echoed. local are the local
// servers to look for (LocalServers).
func Run(ctx context.Context, in io.Reader, out io.Writer, getenv func(string) string, path string, local []string) error {
	p := &prompter{in: in, r: bufio.NewReader(in), out: out}
	old, found := setupDefaults(ctx, getenv, path, local)
	if len(found) > 0 {
		fmt.Fprintf(out, "Found: %s\n", strings.Join(found, ", "))
	}
	c, err := p.askServer(old)
	if err != nil {
		return err
	}
	// Check it works before it replaces anything.
	use, err := usable(c, getenv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	models, defModel, err := p.listModels(ctx, use, old.Model)
	if err != nil {
		return err
	}
	c.Model = p.ask("Model", defModel)
	if c.Model == old.Model {
		c.ContextWindow = old.ContextWindow
	}
	var note string
	c.ContextWindow, note = modelWindow(ctx, use, c.Model, models, c.ContextWindow)
	fmt.Fprintf(out, "checking %s at %s ... ", c.Model, c.BaseURL)
	if err := checkModel(ctx, c, getenv); err != nil {
		fmt.Fprintln(out, "failed")
		return err
	}
	fmt.Fprintln(out, "ok")
	if c.ContextWindow > 0 {
		fmt.Fprintf(out, "context window: %d tokens (the conversation is summarised past 80%%)\n", c.ContextWindow)
	}
	if note != "" {
		fmt.Fprintln(out, note)
	}
	if err := agent.SaveConfig(path, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "saved %s (mode 0600)\n", path)
	return nil
}

// prompter asks setup's questions on out and reads the answers, a line
// each, from in.
type prompter struct {
	in  io.Reader // to read a key from a terminal without echo
	r   *bufio.Reader
	out io.Writer
}

// ask asks q, offering def, which an empty answer takes.
func (p *prompter) ask(q, def string) string {
	if def != "" {
		fmt.Fprintf(p.out, "%s [%s]: ", q, def)
	} else {
		fmt.Fprintf(p.out, "%s: ", q)
	}
	line, _ := p.r.ReadString('\n')
	if line = strings.TrimSpace(line); line != "" {
		return line
	}
	return def
}

// askServer asks for the provider, the server's URL and the key, offering
// old's.
func (p *prompter) askServer(old agent.Config) (agent.Config, error) {
	var c agent.Config
	c.Provider = p.ask("Provider (openai: any OpenAI-compatible server; anthropic)", old.Provider)
	if c.Provider != "openai" && c.Provider != "anthropic" {
		return c, fmt.Errorf("provider %q: say openai or anthropic (nothing saved)", c.Provider)
	}
	defURL := old.BaseURL
	if defURL == "" && c.Provider == "openai" {
		defURL = "https://api.openai.com/v1"
	}
	if c.Provider == "anthropic" && defURL == "" {
		defURL = "https://api.anthropic.com"
	}
	c.BaseURL = p.ask("Base URL", defURL)
	key, err := p.askKey(old, c.BaseURL)
	c.APIKey = key
	return c, err
}

// askKey reads the key, unechoed from a terminal. An empty answer keeps
// old's key if it is a $VAR, or was saved for this same server (a key
// goes only to the server it was saved for).
func (p *prompter) askKey(old agent.Config, baseURL string) (string, error) {
	if old.APIKey != "" && strings.HasPrefix(old.APIKey, "$") {
		fmt.Fprintf(p.out, "API key (or $VAR to read it from the environment; Enter for %s): ", old.APIKey)
	} else {
		fmt.Fprint(p.out, "API key (or $VAR to read it from the environment; empty for none): ")
	}
	var key string
	if f, ok := p.in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(p.out)
		if err != nil {
			return "", fmt.Errorf("read the key: %w", err)
		}
		key = strings.TrimSpace(string(b))
	} else {
		line, _ := p.r.ReadString('\n')
		key = strings.TrimSpace(line)
	}
	if key == "" && (strings.HasPrefix(old.APIKey, "$") || strings.TrimRight(old.BaseURL, "/") == strings.TrimRight(baseURL, "/")) {
		key = old.APIKey
	}
	return key, nil
}

// listModels shows the server's models, to choose from, and returns them
// and the model to offer: def, else the server's only one. A server
// without the list (some proxies) just means asking for the name; a key
// the server refuses is an error.
func (p *prompter) listModels(ctx context.Context, use agent.Config, def string) ([]agent.Model, string, error) {
	models, err := use.ListModels(ctx)
	var apiErr *agent.APIError
	switch {
	case errors.As(err, &apiErr) && (apiErr.Status == 401 || apiErr.Status == 403):
		return nil, "", fmt.Errorf("%w (nothing saved)", err)
	case err == nil && len(models) > 0:
		fmt.Fprintf(p.out, "The server has %d models:\n", len(models))
		for i, m := range models {
			if i == 40 {
				fmt.Fprintf(p.out, "  … and %d more\n", len(models)-i)
				break
			}
			fmt.Fprintf(p.out, "  %s\n", m)
		}
		if def == "" && len(models) == 1 {
			def = models[0].ID
		}
	}
	return models, def, nil
}

// setupDefaults is what setup offers first: the saved config at path, or
// else what it finds (keys in the environment, local servers answering),
// and the names of what it found.
func setupDefaults(ctx context.Context, getenv func(string) string, path string, local []string) (agent.Config, []string) {
	// The file is read even if its mode is wrong, since it is about to be
	// rewritten 0600.
	old, _ := agent.ReadConfigFile(path)
	var found []string
	if old.Provider == "" {
		for _, k := range keyVars {
			if getenv(k.name) != "" {
				found = append(found, "$"+k.name)
				if old.APIKey == "" {
					old.Provider, old.BaseURL, old.APIKey = k.provider, k.url, "$"+k.name
				}
			}
		}
		if servers := probeServers(ctx, local); len(servers) > 0 {
			found = append(found, servers...)
			old.Provider, old.BaseURL, old.APIKey = "openai", servers[0], ""
		}
	}
	if old.Provider == "" {
		old.Provider = "openai"
	}
	return old, found
}

// modelWindow is model's context window: as the server's list says,
// else as Ollama runs it (which cuts longer prompts without a word), else
// known (what the config had). note says what the user may want to know.
func modelWindow(ctx context.Context, use agent.Config, model string, models []agent.Model, known int) (int, string) {
	for _, m := range models {
		if m.ID == model && m.Window > 0 {
			return m.Window, ""
		}
	}
	if use.Provider == "openai" {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if n, ok := agent.OllamaContext(ctx, nil, use.BaseURL, model); ok {
			note := ""
			if n < 16384 {
				note = fmt.Sprintf("note: Ollama runs %s with a %d-token context, little for an agent (its tools and system prompt take ~2k): raise it with OLLAMA_CONTEXT_LENGTH on the server or num_ctx in the model, then set \"context_window\" in the config", model, n)
			}
			return n, note
		}
	}
	return known, ""
}

// usable is c with a "$VAR" key read from the environment, to call the
// server with (c itself is saved as written).
func usable(c agent.Config, getenv func(string) string) (agent.Config, error) {
	if name, ok := strings.CutPrefix(c.APIKey, "$"); ok {
		if c.APIKey = getenv(name); c.APIKey == "" {
			return c, fmt.Errorf("$%s is not set here, so the key cannot be checked (nothing saved)", name)
		}
	}
	return c, nil
}

// checkModel makes one small call to c's model: setup saves nothing that
// does not answer.
func checkModel(ctx context.Context, c agent.Config, getenv func(string) string) error {
	use, err := usable(c, getenv)
	if err != nil {
		return err
	}
	p, err := use.NewProvider()
	if err != nil {
		return fmt.Errorf("%w (nothing saved)", err)
	}
	_, err = p.Stream(ctx, agent.Request{Model: c.Model, MaxTokens: 16,
		Messages: []agent.Message{{Role: "user", Content: "Reply with the word OK."}}}, func(agent.Event) {})
	if err != nil {
		return fmt.Errorf("the model did not answer: %w (nothing saved)", err)
	}
	return nil
}

// probeServers returns those of urls whose GET /models answers within a
// moment, in the order given.
func probeServers(ctx context.Context, urls []string) []string {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	ok := make([]bool, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := (&agent.OpenAI{BaseURL: u}).Models(ctx)
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	var found []string
	for i, u := range urls {
		if ok[i] {
			found = append(found, u)
		}
	}
	return found
}
