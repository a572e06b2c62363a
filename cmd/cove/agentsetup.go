package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cove-sh/cove/agent"
	"golang.org/x/term"
)

// setupAgent asks for the provider, model and key, checks them with one
// small call to the model, and only then saves them to path (mode 0600).
// A key typed as "$VAR" is saved as written and read from the
// environment when used. in is the answers; a key read from a terminal
// is not echoed.
func setupAgent(ctx context.Context, in io.Reader, out io.Writer, getenv func(string) string, path string) error {
	r := bufio.NewReader(in)
	// Enter keeps what is there; the file is read even if its mode is
	// wrong, since it is about to be rewritten 0600.
	old, _ := agent.ReadConfigFile(path)
	if old.Provider == "" {
		old.Provider = "openai"
	}
	ask := func(q, def string) string {
		if def != "" {
			fmt.Fprintf(out, "%s [%s]: ", q, def)
		} else {
			fmt.Fprintf(out, "%s: ", q)
		}
		line, _ := r.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
		return def
	}
	var c agent.Config
	c.Provider = ask("Provider (openai: any OpenAI-compatible server; anthropic)", old.Provider)
	if c.Provider != "openai" && c.Provider != "anthropic" {
		return fmt.Errorf("provider %q: say openai or anthropic (nothing saved)", c.Provider)
	}
	defURL := old.BaseURL
	if defURL == "" && c.Provider == "openai" {
		defURL = "https://api.openai.com/v1"
	}
	if c.Provider == "anthropic" && defURL == "" {
		defURL = "https://api.anthropic.com"
	}
	c.BaseURL = ask("Base URL", defURL)
	c.Model = ask("Model", old.Model)
	fmt.Fprint(out, "API key (or $VAR to read it from the environment; empty for none): ")
	var key string
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(out)
		if err != nil {
			return fmt.Errorf("read the key: %w", err)
		}
		key = strings.TrimSpace(string(b))
	} else {
		line, _ := r.ReadString('\n')
		key = strings.TrimSpace(line)
	}
	if key == "" {
		key = old.APIKey
	}
	c.APIKey = key

	// Check it works before it replaces anything.
	use := c
	if name, ok := strings.CutPrefix(key, "$"); ok {
		if use.APIKey = getenv(name); use.APIKey == "" {
			return fmt.Errorf("$%s is not set here, so the key cannot be checked (nothing saved)", name)
		}
	}
	p, err := use.NewProvider()
	if err != nil {
		return fmt.Errorf("%w (nothing saved)", err)
	}
	fmt.Fprintf(out, "checking %s at %s ... ", c.Model, c.BaseURL)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	_, err = p.Stream(ctx, agent.Request{Model: c.Model, MaxTokens: 16,
		Messages: []agent.Message{{Role: "user", Content: "Reply with the word OK."}}}, func(agent.Event) {})
	if err != nil {
		fmt.Fprintln(out, "failed")
		return fmt.Errorf("the model did not answer: %w (nothing saved)", err)
	}
	fmt.Fprintln(out, "ok")
	if err := agent.SaveConfig(path, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "saved %s (mode 0600)\n", path)
	return nil
}
