package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cove-sh/cove/internal/trustrecord"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectfs"
)

// Config is the agent's provider settings. Layers, later winning: the
// defaults, ~/.config/cove/config.json, the project's .cove/config.json,
// the environment (COVE_*, then OPENAI_* and ANTHROPIC_API_KEY), flags.
// A key may be written "$VAR": it is read from the environment when used
// and never stored expanded.
//
// The project's layer is the workspace's to write, so it may choose only
// what sends nothing anywhere (the model, the context window) unless the
// user trusted that very content on the host (cove agent --trust); and a
// key saved in the user's file goes only to the base URL saved with it.
type Config struct {
	Provider string `json:"provider,omitempty"` // openai or anthropic
	BaseURL  string `json:"base_url,omitempty"`
	APIKey   string `json:"api_key,omitempty"`
	Model    string `json:"model,omitempty"`
	// ContextWindow is the model's context window in tokens, for
	// compacting before the server refuses a request.
	ContextWindow int `json:"context_window,omitempty"`

	// Ignored names what the project's config asked for and did not get,
	// for the user to hear about; empty when nothing was.
	Ignored []string `json:"-"`
}

// untrusted keeps of a project's layer what cannot send anything
// anywhere, and names the rest.
func (c Config) untrusted() (Config, []string) {
	var ignored []string
	for name, set := range map[string]bool{"provider": c.Provider != "", "base_url": c.BaseURL != "", "api_key": c.APIKey != ""} {
		if set {
			ignored = append(ignored, name)
		}
	}
	slices.Sort(ignored)
	return Config{Model: c.Model, ContextWindow: c.ContextWindow}, ignored
}

// sameURL says whether two base URLs name one server ("" is the
// provider's default).
func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
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
	return filepath.Join(dirs.ConfigDir(home), "config.json")
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

// ProjectConfigPath is a project's own config file, relative to it.
const ProjectConfigPath = ".cove/config.json"

// ReadProjectConfig reads the project's layer through the confined
// project (no symlink out of it, no FIFO, bounded), and its raw bytes,
// which trust is bound to; a missing file is an empty layer.
func ReadProjectConfig(dir string) (Config, []byte, error) {
	var c Config
	d, err := projectfs.Open(dir)
	if err != nil {
		return c, nil, err
	}
	defer d.Close()
	b, err := d.ReadFileLimit(ProjectConfigPath, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil, nil
	}
	if err != nil {
		return c, nil, fmt.Errorf("%s: %w", filepath.Join(dir, ProjectConfigPath), err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, nil, fmt.Errorf("%s: %w", filepath.Join(dir, ProjectConfigPath), err)
	}
	return c, b, nil
}

// LoadConfig resolves the layers for the project in dir; getenv reads the
// environment (os.Getenv, or a test's map), flags wins over all. What the
// project's layer asked for and was not given is in Ignored.
func LoadConfig(home, dir string, getenv func(string) string, flags Config) (c Config, err error) {
	c = Config{Provider: "openai"}
	saved, err := ReadConfigFile(UserConfigPath(home))
	if err != nil {
		return c, err
	}
	c = c.merge(saved)
	project, raw, err := ReadProjectConfig(dir)
	if err != nil {
		return c, err
	}
	var ignored []string
	if !Trusted(home, dir, raw) {
		project, ignored = project.untrusted()
	}
	defer func() { c.Ignored = ignored }()
	c = c.merge(project)
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
	// The saved key goes where it was saved for, and nowhere else.
	if saved.APIKey != "" && c.APIKey == saved.APIKey && (!sameURL(c.BaseURL, saved.BaseURL) || c.Provider != saved.Provider && saved.Provider != "") {
		where := saved.BaseURL
		if where == "" {
			where = "the provider's default URL"
		}
		return c, fmt.Errorf("the key saved in %s is for %s, not %s: give the key for that server in $COVE_API_KEY, or run cove agent --setup",
			UserConfigPath(home), where, c.BaseURL)
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

// ErrNoModel is NewProvider's error when no model is configured.
var ErrNoModel = errors.New("no model")

// NewProvider makes the provider client the config describes.
func (c Config) NewProvider() (Provider, error) {
	if c.Model == "" {
		return nil, fmt.Errorf("%w: set COVE_MODEL, give -m, or add \"model\" to ~/.config/cove/config.json", ErrNoModel)
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

// The user trusts a project's config on the host (cove agent --trust):
// the record lives in the user's own config directory, beside their
// config, keyed by the project's path and bound to the config's content,
// so a change the workspace makes afterwards is untrusted again.

// trustPath is the record of trusted project configs.
func trustPath(home string) string {
	return filepath.Join(dirs.ConfigDir(home), "trusted.json")
}

// Trusted says whether the user trusted the project config raw of dir.
func Trusted(home, dir string, raw []byte) bool {
	return raw != nil && trustrecord.File{Path: trustPath(home)}.Get(dir) == trustrecord.Hash(raw)
}

// Trust records that the user trusts dir's project config as it is now,
// and returns it; a project without one has nothing to trust.
func Trust(home, dir string) (Config, error) {
	c, raw, err := ReadProjectConfig(dir)
	if err != nil {
		return c, err
	}
	if raw == nil {
		return c, fmt.Errorf("%s has no %s to trust", dir, ProjectConfigPath)
	}
	return c, trustrecord.File{Path: trustPath(home)}.Set(dir, trustrecord.Hash(raw))
}

// IgnoredNote says what the project's config asked for and did not get,
// for the user ("" when nothing was ignored): the terminal and the IDE
// panel both tell it, since a setting that silently does nothing would
// look like a bug in the project.
func (c Config) IgnoredNote() string {
	if len(c.Ignored) == 0 {
		return ""
	}
	return fmt.Sprintf("the project's %s sets %s, which a project may not choose (the workspace can write it); ignored. "+
		"If you wrote it, read it and run cove agent --trust", ProjectConfigPath, strings.Join(c.Ignored, ", "))
}

// KeyKind describes an API key without showing it ("none", "from $VAR",
// "written in the file"), so that what is trusted can be said on a
// terminal that others may see.
func KeyKind(key string) string {
	switch {
	case key == "":
		return "none"
	case strings.HasPrefix(key, "$"):
		return "from $" + strings.TrimPrefix(key, "$")
	}
	return "written in the file"
}
