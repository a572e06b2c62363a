package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cove-sh/cove/internal/atomicfile"
)

// Config is the agent's provider settings. Layers, later winning: the
// defaults, ~/.config/cove/config.json, the project's .cove/config.json,
// the environment (COVE_*, then OPENAI_* and ANTHROPIC_API_KEY), flags.
// A key may be written "$VAR": it is read from the environment when used
// and never stored expanded.
type Config struct {
	Provider string `json:"provider,omitempty"` // openai or anthropic
	BaseURL  string `json:"base_url,omitempty"`
	APIKey   string `json:"api_key,omitempty"`
	Model    string `json:"model,omitempty"`
	// ContextWindow is the model's context window in tokens, for
	// compacting before the server refuses a request.
	ContextWindow int `json:"context_window,omitempty"`
}

// merge lays o over c.
func (c Config) merge(o Config) Config {
	if o.Provider != "" {
		c.Provider = o.Provider
	}
	if o.BaseURL != "" {
		c.BaseURL = o.BaseURL
	}
	if o.APIKey != "" {
		c.APIKey = o.APIKey
	}
	if o.Model != "" {
		c.Model = o.Model
	}
	if o.ContextWindow > 0 {
		c.ContextWindow = o.ContextWindow
	}
	return c
}

// Window is the model's context window: as configured, else 200,000
// tokens for Anthropic's models (all of today's), else 0, not known
// (OpenAI-compatible servers differ, and say so when a request is too
// long).
func (c Config) Window() int {
	if c.ContextWindow > 0 {
		return c.ContextWindow
	}
	if c.Provider == "anthropic" {
		return 200_000
	}
	return 0
}

// ReadConfigFile reads one layer; a missing file is an empty one.
func ReadConfigFile(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	// Like ssh with a private key: a key others can read is refused, so
	// that the leak is fixed rather than used.
	if c.APIKey != "" && !strings.HasPrefix(c.APIKey, "$") {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return c, fmt.Errorf("%s holds an API key and others can read it (mode %#o): chmod 600 %s, or write the key as \"$VAR\"", path, fi.Mode().Perm(), path)
		}
	}
	return c, nil
}

// UserConfigPath is the user's config file under home.
func UserConfigPath(home string) string {
	return filepath.Join(home, ".config", "cove", "config.json")
}

// SaveConfig writes c to path, readable by the owner only (it may hold a
// key), replacing the file whole so that a crash leaves the old one.
func SaveConfig(path string, c Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save config: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("save config %s: %w", path, err)
	}
	return nil
}

// LoadConfig resolves the layers for the project in dir; getenv reads the
// environment (os.Getenv, or a test's map), flags wins over all.
func LoadConfig(home, dir string, getenv func(string) string, flags Config) (Config, error) {
	c := Config{Provider: "openai"}
	for _, p := range []string{UserConfigPath(home), filepath.Join(dir, ".cove", "config.json")} {
		if p == "" {
			continue
		}
		layer, err := ReadConfigFile(p)
		if err != nil {
			return c, err
		}
		c = c.merge(layer)
	}
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	env := Config{Provider: first("COVE_PROVIDER"), BaseURL: first("COVE_BASE_URL"), APIKey: first("COVE_API_KEY"), Model: first("COVE_MODEL")}
	if w := first("COVE_CONTEXT_WINDOW"); w != "" {
		n, err := strconv.Atoi(w)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("COVE_CONTEXT_WINDOW=%q: want a number of tokens", w)
		}
		env.ContextWindow = n
	}
	if env.Provider == "" && c.APIKey == "" && env.APIKey == "" && first("OPENAI_API_KEY") == "" && first("ANTHROPIC_API_KEY") != "" {
		env.Provider = "anthropic"
	}
	c = c.merge(env).merge(flags)
	if c.Provider == "openai" {
		c = Config{BaseURL: first("OPENAI_BASE_URL"), APIKey: first("OPENAI_API_KEY")}.merge(c)
	}
	if c.Provider == "anthropic" && c.APIKey == "" {
		c.APIKey = first("ANTHROPIC_API_KEY")
	}
	// "$VAR" keys are read now, and only kept in memory.
	if name, ok := strings.CutPrefix(c.APIKey, "$"); ok {
		c.APIKey = getenv(name)
		if c.APIKey == "" {
			return c, fmt.Errorf("the API key is $%s, which is not set", name)
		}
	}
	return c, nil
}

// NewProvider makes the provider client the config describes.
func (c Config) NewProvider() (Provider, error) {
	if c.Model == "" {
		return nil, errors.New("no model: set COVE_MODEL, give -m, or add \"model\" to ~/.config/cove/config.json")
	}
	return c.client()
}

// ListModels asks the configured server which models it serves; it
// needs no model chosen yet.
func (c Config) ListModels(ctx context.Context) ([]Model, error) {
	p, err := c.client()
	if err != nil {
		return nil, err
	}
	return p.(ModelLister).Models(ctx)
}

// client makes the provider client, model or not.
func (c Config) client() (Provider, error) {
	switch c.Provider {
	case "openai", "":
		base := c.BaseURL
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		return &OpenAI{BaseURL: base, APIKey: c.APIKey}, nil
	case "anthropic":
		return &Anthropic{BaseURL: c.BaseURL, APIKey: c.APIKey}, nil
	}
	return nil, fmt.Errorf("provider %q: use openai or anthropic", c.Provider)
}
