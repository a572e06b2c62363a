package setup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cove-sh/cove/agent"
)

// Panel is the agent panel's first run (it implements ide.AgentSetup),
// the browser's side of cove agent --setup, on the user's config file:
//
//	server → {"type":"setup","text":WHY,"config":{provider,base_url,api_key:"$VAR" or "",model},"found":[…],"saved_key":bool}
//
// NewPanel gives the usual one; its methods are safe to call concurrently
// (each reads the file anew).
type Panel struct {
	path   string   // the user's config file
	local  []string // local model servers to look for
	getenv func(string) string
}

type setupMsg struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	Config   agent.Config  `json:"config"`
	Found    []string      `json:"found,omitempty"`
	SavedKey bool          `json:"saved_key,omitempty"` // a key is saved: an empty one keeps it
	Models   []agent.Model `json:"models,omitempty"`
}

// Offer is the form's first content (ide.AgentSetup): the saved config
// or what is found, a key written out in the file left out.
func (s Panel) Offer(ctx context.Context, why error) any {
	c, found := setupDefaults(ctx, s.getenv, s.path, s.local)
	text := why.Error()
	if errors.Is(why, agent.ErrNoModel) {
		text = "No model is set up yet: choose a provider and a model." // the CLI's -m means nothing here
	}
	m := setupMsg{Type: "setup", Text: text, Config: c, Found: found}
	if c.APIKey != "" && !strings.HasPrefix(c.APIKey, "$") {
		m.Config.APIKey, m.SavedKey = "", true
	}
	return m
}

// fill takes the saved key when the form left the key empty.
func (s Panel) fill(c agent.Config) agent.Config {
	if c.APIKey == "" {
		// A saved key only for the server it was saved for.
		if old, err := agent.ReadConfigFile(s.path); err == nil && old.Provider == c.Provider &&
			strings.TrimRight(old.BaseURL, "/") == strings.TrimRight(c.BaseURL, "/") {
			c.APIKey = old.APIKey
		}
	}
	return c
}

// Models lists what the server c names serves (ide.AgentSetup), with
// the saved key when the form left the key empty.
func (s Panel) Models(ctx context.Context, c agent.Config) ([]agent.Model, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	use, err := usable(s.fill(c), s.getenv)
	if err != nil {
		return nil, err
	}
	return use.ListModels(ctx)
}

// Save (ide.AgentSetup) checks c's model with one small
// call, then saves c (0600), with its context window where Ollama tells
// it; note is for the user.
func (s Panel) Save(ctx context.Context, c agent.Config) (note, path string, err error) {
	c = s.fill(c)
	if c.Provider != "openai" && c.Provider != "anthropic" {
		return "", "", fmt.Errorf("provider %q: openai (any OpenAI-compatible server) or anthropic", c.Provider)
	}
	if c.Model == "" {
		return "", "", fmt.Errorf("choose a model")
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := checkModel(ctx, c, s.getenv); err != nil {
		return "", "", err
	}
	if use, err := usable(c, s.getenv); err == nil {
		c.ContextWindow, note = modelWindow(ctx, use, c.Model, nil, c.ContextWindow)
	}
	return note, s.path, agent.SaveConfig(s.path, c)
}

// NewPanel is the panel's setup on the user's config file
// (~/.config/cove/config.json), with the usual local servers and this
// process's environment.
func NewPanel() Panel {
	home, _ := os.UserHomeDir()
	return Panel{path: agent.UserConfigPath(home), local: LocalServers(), getenv: os.Getenv}
}
