// Package devcontainer reads the parts of a project's devcontainer.json
// (https://containers.dev) that cove honours: the image, environment
// variables, the post-create command and the ports to forward.
package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/tailscale/hujson"
)

// Config is what cove takes from devcontainer.json.
type Config struct {
	Path         string            `json:"-"` // where it was read from
	Image        string            `json:"image"`
	ContainerEnv map[string]string `json:"containerEnv"`
	RemoteEnv    map[string]string `json:"remoteEnv"`
	// PostCreateCommand runs once per workspace: a shell command line,
	// or an argv.
	PostCreateCommand json.RawMessage `json:"postCreateCommand"`
	// ForwardPorts are ports (3000) or "host:port" strings; AppPort is a
	// port, a "HOST:CONTAINER" string, or a list of either.
	ForwardPorts []any           `json:"forwardPorts"`
	AppPort      json.RawMessage `json:"appPort"`
	Build        json.RawMessage `json:"build"`
	DockerFile   string          `json:"dockerFile"`
}

// Load reads DIR/.devcontainer/devcontainer.json or DIR/.devcontainer.json
// (JSON with comments and trailing commas). No file is a nil Config.
func Load(dir string) (*Config, error) {
	// The workspace can write the project: read through the confined
	// project (no symlink out, no FIFO, at most 1 MiB).
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	for _, rel := range []string{filepath.Join(".devcontainer", "devcontainer.json"), ".devcontainer.json"} {
		p := filepath.Join(dir, rel)
		b, err := d.ReadFileLimit(rel, 1<<20)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		std, err := hujson.Standardize(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		c := &Config{Path: p}
		if err := json.Unmarshal(std, c); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if c.Image == "" && (len(c.Build) > 0 || c.DockerFile != "") {
			return nil, fmt.Errorf("%s builds its image from a Dockerfile; cove runs images: build and push it, and set \"image\" (or use cove --image)", p)
		}
		return c, nil
	}
	return nil, nil
}

// Env is containerEnv and remoteEnv as K=V, remoteEnv winning.
func (c *Config) Env() []string {
	if c == nil {
		return nil
	}
	m := map[string]string{}
	for k, v := range c.ContainerEnv {
		m[k] = v
	}
	for k, v := range c.RemoteEnv {
		m[k] = v
	}
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// PostCreate is the post-create command as an argv (a string runs
// through sh -c), or nil.
func (c *Config) PostCreate() ([]string, error) {
	if c == nil || len(c.PostCreateCommand) == 0 || string(c.PostCreateCommand) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(c.PostCreateCommand, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{"/bin/sh", "-c", s}, nil
	}
	var argv []string
	if err := json.Unmarshal(c.PostCreateCommand, &argv); err != nil {
		return nil, fmt.Errorf("%s: postCreateCommand: want a string or an array of strings", c.Path)
	}
	return argv, nil
}

// PortSpecs are the ports to forward from the host's 127.0.0.1, in cove
// run's -p syntax (HOSTPORT:CONTAINERPORT): forwardPorts' numbers and
// "localhost:N", and appPort. Notes say what was left out: a forwardPorts
// "service:port" names another container of a compose setup, which cove
// does not run.
func (c *Config) PortSpecs() (specs, notes []string, err error) {
	if c == nil {
		return nil, nil, nil
	}
	for _, v := range c.ForwardPorts {
		switch v := v.(type) {
		case float64:
			if v != float64(int(v)) {
				return nil, nil, fmt.Errorf("%s: forwardPorts: %v is not a port", c.Path, v)
			}
			specs = append(specs, fmt.Sprintf("%d:%d", int(v), int(v)))
		case string:
			host, port, ok := strings.Cut(v, ":")
			if _, err := strconv.Atoi(port); !ok || err != nil {
				return nil, nil, fmt.Errorf("%s: forwardPorts: %q: want a port or \"host:port\"", c.Path, v)
			}
			if host != "localhost" && host != "127.0.0.1" {
				notes = append(notes, fmt.Sprintf("forwardPorts %q names another container; cove forwards only the workspace's own ports", v))
				continue
			}
			specs = append(specs, port+":"+port)
		default:
			return nil, nil, fmt.Errorf("%s: forwardPorts: %v: want a port or \"host:port\"", c.Path, v)
		}
	}
	if len(c.AppPort) == 0 || string(c.AppPort) == "null" {
		return specs, notes, nil
	}
	var list []any
	if json.Unmarshal(c.AppPort, &list) != nil {
		var one any
		if err := json.Unmarshal(c.AppPort, &one); err != nil {
			return nil, nil, fmt.Errorf("%s: appPort: %w", c.Path, err)
		}
		list = []any{one}
	}
	for _, v := range list {
		switch v := v.(type) {
		case float64:
			specs = append(specs, fmt.Sprintf("%d:%d", int(v), int(v)))
		case string:
			if !strings.Contains(v, ":") {
				v += ":" + v
			}
			specs = append(specs, v)
		default:
			return nil, nil, fmt.Errorf("%s: appPort: %v: want a port or \"HOST:CONTAINER\"", c.Path, v)
		}
	}
	return specs, notes, nil
}
