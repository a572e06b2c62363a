package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Action is what a tool call will do, prepared but not yet done, so that
// it can be shown and approved first.
type Action struct {
	Kind    string // "read" (never asked), "edit" or "command"
	Summary string // one line: "edit main.go", "run: go test ./..."
	Diff    string // for edits: a unified diff
	Do      func(ctx context.Context) (string, error)
}

// Tool is one of the agent's tools. Plan checks the arguments and prepares
// the action; an error there goes back to the model as the tool's answer.
type Tool interface {
	Spec() ToolSpec
	Plan(ctx context.Context, args json.RawMessage) (*Action, error)
}

// Workspace is the project the tools work on. Paths are confined to Root:
// os.Root refuses any path, symlinks included, that leads outside.
type Workspace struct {
	Root string
	root *os.Root
}

// OpenWorkspace opens dir for the tools. Close it when done.
func OpenWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Workspace{Root: abs, root: r}, nil
}

// Close releases the workspace.
func (w *Workspace) Close() error { return w.root.Close() }

// rel turns a path the model gave (relative, or absolute inside the
// workspace, as /workspace/x) into one relative to the root.
func (w *Workspace) rel(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("no path given")
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(w.Root, p)
		if err != nil || strings.HasPrefix(r, "..") {
			return "", fmt.Errorf("%s is outside the workspace (%s)", p, w.Root)
		}
		p = r
	}
	return filepath.Clean(p), nil
}

// ReadFile reads a file inside the workspace.
func (w *Workspace) ReadFile(p string) ([]byte, error) {
	r, err := w.rel(p)
	if err != nil {
		return nil, err
	}
	return w.root.ReadFile(r)
}

// WriteFile replaces a file inside the workspace atomically, keeping its
// permissions (0644 for a new one).
func (w *Workspace) WriteFile(p string, data []byte) error {
	r, err := w.rel(p)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi, err := w.root.Stat(r); err == nil {
		mode = fi.Mode().Perm()
	}
	if dir := filepath.Dir(r); dir != "." {
		if err := w.root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := filepath.Join(filepath.Dir(r), fmt.Sprintf(".%s.cove-%d", filepath.Base(r), os.Getpid()))
	if err := w.root.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := w.root.Chmod(tmp, mode); err != nil {
		w.root.Remove(tmp)
		return err
	}
	if err := w.root.Rename(tmp, r); err != nil {
		w.root.Remove(tmp)
		return err
	}
	return nil
}

func decodeArgs(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return fmt.Errorf("bad arguments: %v", err)
	}
	return nil
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }
