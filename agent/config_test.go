package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigLayers(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".config", "cove"), 0o700)
	os.WriteFile(filepath.Join(home, ".config", "cove", "config.json"), []byte(`{"base_url":"http://home/v1","model":"home-model","api_key":"$MY_KEY"}`), 0o600)
	os.MkdirAll(filepath.Join(dir, ".cove"), 0o755)
	os.WriteFile(filepath.Join(dir, ".cove", "config.json"), []byte(`{"model":"project-model"}`), 0o644)
	env := map[string]string{"MY_KEY": "sk-from-env"}
	get := func(k string) string { return env[k] }
	c, err := LoadConfig(home, dir, get, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL != "http://home/v1" || c.Model != "project-model" || c.APIKey != "sk-from-env" || c.Provider != "openai" {
		t.Fatalf("%+v", c)
	}
	env["COVE_MODEL"] = "env-model"
	if c, _ := LoadConfig(home, dir, get, Config{}); c.Model != "env-model" {
		t.Fatalf("env should win over files: %+v", c)
	}
	if c, _ := LoadConfig(home, dir, get, Config{Model: "flag-model"}); c.Model != "flag-model" {
		t.Fatalf("flags should win: %+v", c)
	}
	delete(env, "MY_KEY")
	if _, err := LoadConfig(home, dir, get, Config{}); err == nil {
		t.Fatal("an unset $VAR key was accepted")
	}
	// Only an Anthropic key: the provider is Anthropic.
	c, err = LoadConfig(t.TempDir(), t.TempDir(), func(k string) string {
		return map[string]string{"ANTHROPIC_API_KEY": "ak", "COVE_MODEL": "claude"}[k]
	}, Config{})
	if err != nil || c.Provider != "anthropic" || c.APIKey != "ak" {
		t.Fatalf("%+v %v", c, err)
	}
	if p, err := c.NewProvider(); err != nil || p.(*Anthropic).APIKey != "ak" {
		t.Fatalf("%v %v", p, err)
	}
}

// TestConfigKeyReadableByOthers: a literal key in a file others can read
// is refused with the fix named; the same file 0600, or with "$VAR",
// loads.
func TestConfigKeyReadableByOthers(t *testing.T) {
	home := t.TempDir()
	path := UserConfigPath(home)
	if err := SaveConfig(path, Config{Model: "m", APIKey: "sk-literal"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("SaveConfig wrote mode %#o", fi.Mode().Perm())
	}
	env := func(string) string { return "" }
	if c, err := LoadConfig(home, t.TempDir(), env, Config{}); err != nil || c.APIKey != "sk-literal" {
		t.Fatalf("0600: %+v %v", c, err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadConfig(home, t.TempDir(), env, Config{}); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0644 with a key: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"model":"m","api_key":"$K"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadConfig(home, t.TempDir(), func(k string) string { return map[string]string{"K": "v"}[k] }, Config{}); err != nil || c.APIKey != "v" {
		t.Fatalf("0644 with $K: %+v %v", c, err)
	}
}
