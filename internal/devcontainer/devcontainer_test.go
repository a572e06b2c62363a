package devcontainer

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	if c, err := Load(dir); c != nil || err != nil {
		t.Fatalf("no file: %v %v", c, err)
	}
	os.Mkdir(filepath.Join(dir, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(dir, ".devcontainer", "devcontainer.json"), []byte(`{
		// comments and trailing commas, as VS Code writes them
		"image": "debian:bookworm",
		"containerEnv": {"A": "1", "B": "2"},
		"remoteEnv": {"B": "3"},
		"postCreateCommand": "make deps",
		"forwardPorts": [3000,],
	}`), 0o644)
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := c.Env()
	sort.Strings(env)
	if c.Image != "debian:bookworm" || strings.Join(env, " ") != "A=1 B=3" || len(c.ForwardPorts) != 1 {
		t.Fatalf("%+v %v", c, env)
	}
	if argv, _ := c.PostCreate(); strings.Join(argv, " ") != "/bin/sh -c make deps" {
		t.Fatalf("post create %q", argv)
	}
	os.WriteFile(filepath.Join(dir, ".devcontainer", "devcontainer.json"), []byte(`{"build": {"dockerfile": "Dockerfile"}}`), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "Dockerfile") {
		t.Fatalf("a build config: %v", err)
	}
}

// TestLoadConfinedToTheProject: a devcontainer.json that is a FIFO does
// not hang cove up, and one symlinked to a host file is not read.
func TestLoadConfinedToTheProject(t *testing.T) {
	dir, host := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(host, "secret.json"), []byte(`{"image": "from-the-host"}`), 0o644)
	os.Mkdir(filepath.Join(dir, ".devcontainer"), 0o755)
	os.Symlink(filepath.Join(host, "secret.json"), filepath.Join(dir, ".devcontainer", "devcontainer.json"))
	if c, err := Load(dir); err == nil && c != nil && c.Image == "from-the-host" {
		t.Error("read a host file through a symlink")
	}
	other := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(other, ".devcontainer.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(other); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO loaded as a config")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a FIFO as .devcontainer.json hangs")
	}
}

func TestPortSpecs(t *testing.T) {
	cases := []struct {
		json, want, notes string
	}{
		{`{"forwardPorts": [3000, "localhost:5432"]}`, "3000:3000 5432:5432", ""},
		{`{"forwardPorts": ["db:5432"], "appPort": 8080}`, "8080:8080", "another container"},
		{`{"appPort": ["8000:80", 9000]}`, "8000:80 9000:9000", ""},
		{`{"appPort": "127.0.0.1:8000:80"}`, "127.0.0.1:8000:80", ""},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ".devcontainer.json"), []byte(tc.json), 0o644)
		c, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		specs, notes, err := c.PortSpecs()
		if err != nil || strings.Join(specs, " ") != tc.want || !strings.Contains(strings.Join(notes, " "), tc.notes) {
			t.Errorf("%s: PortSpecs = %q %q %v, want %q", tc.json, specs, notes, err, tc.want)
		}
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".devcontainer.json"), []byte(`{"forwardPorts": [{"port": 1}]}`), 0o644)
	if c, _ := Load(dir); c != nil {
		if _, _, err := c.PortSpecs(); err == nil {
			t.Error("forwardPorts with an object: want an error")
		}
	}
}
