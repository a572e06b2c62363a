package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
)

// Runner runs a program of the project with stdin and returns its
// output: on this machine by default; cove agent runs it in the workspace.
type Runner func(ctx context.Context, path string, args []string, stdin []byte) ([]byte, error)

// LocalRunner runs the program here, in the project directory (for
// tests: a project's tools are the workspace's, and cove runs them there).
func LocalRunner(dir string) Runner {
	return func(ctx context.Context, path string, args []string, stdin []byte) ([]byte, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, path), args...)
		cmd.Dir = dir
		return RunCapped(cmd, stdin)
	}
}

const (
	// MaxToolOutput is the most of a project tool's output RunCapped
	// keeps: the workspace writes the tool, and what it prints is read on
	// this side, where it must not run the launcher out of memory.
	MaxToolOutput = 1 << 20
	// maxToolStderr is the most of its stderr kept, for the error.
	maxToolStderr = 4 << 10
)

// RunCapped runs cmd with stdin and returns what it printed, at most
// MaxToolOutput bytes of it (the rest is read and dropped, and said), and
// for a failure an error with the start of its stderr.
func RunCapped(cmd *exec.Cmd, stdin []byte) ([]byte, error) {
	cmd.Stdin = bytes.NewReader(stdin)
	out, errb := &cappedBuffer{max: MaxToolOutput}, &cappedBuffer{max: maxToolStderr}
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	b := out.b.Bytes()
	if out.cut {
		b = append(b, fmt.Sprintf("\n[output cut at %d bytes]", MaxToolOutput)...)
	}
	if err != nil {
		return b, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.b.String()))
	}
	return b, nil
}

// cappedBuffer keeps the first max bytes written to it and drops the
// rest, which it says in cut.
type cappedBuffer struct {
	b   bytes.Buffer
	max int
	cut bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - c.b.Len()
	if room < len(p) {
		c.cut = true
	}
	if room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// ProjectTool is an executable in the project's .cove/tools/: run with
// --schema it prints {"description": …, "schema": {…}}; run with the
// call's JSON arguments on stdin it does the work and prints the result.
type ProjectTool struct {
	Path    string // relative to the project
	spec    ToolSpec
	run     Runner
	Timeout time.Duration
}

var _ Tool = (*ProjectTool)(nil)

// Spec implements Tool.
func (t *ProjectTool) Spec() ToolSpec { return t.spec }

// Plan implements Tool: a project tool is a command, approved as one.
func (t *ProjectTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	return &Action{Kind: "command", Summary: fmt.Sprintf("run tool %s %s", t.spec.Name, raw), Do: func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithTimeout(ctx, t.Timeout)
		defer cancel()
		out, err := t.run(ctx, t.Path, nil, raw)
		return string(out), err
	}}, nil
}

// BrokenTool is a project tool that did not load, and why.
type BrokenTool struct {
	Path string
	Err  error
}

// LoadProjectTools loads the tools in DIR/.cove/tools/, asking each for
// its schema through run. A tool that fails to answer is returned as
// broken, with its error, and left out.
func LoadProjectTools(ctx context.Context, dir string, run Runner) ([]Tool, []BrokenTool) {
	// Listed through the confined project: a .cove or tools symlinked to
	// a host directory lists nothing of the host's.
	d, err := projectfs.Open(dir)
	if err != nil {
		return nil, nil
	}
	entries, err := fs.ReadDir(d.FS(), ".cove/tools")
	d.Close()
	if err != nil {
		return nil, nil
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var tools []Tool
	var broken []BrokenTool
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.Mode()&0o111 == 0 {
			continue
		}
		rel := filepath.Join(".cove", "tools", e.Name())
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := run(sctx, rel, []string{"--schema"}, nil)
		cancel()
		var desc struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
		}
		if err == nil {
			err = json.Unmarshal(out, &desc)
		}
		if err == nil && (len(desc.Schema) == 0 || !json.Valid(desc.Schema)) {
			err = fmt.Errorf("--schema printed no %q", "schema")
		}
		if err != nil {
			broken = append(broken, BrokenTool{Path: rel, Err: err})
			continue
		}
		name := strings.TrimSuffix(e.Name(), filepath.Ext(e.Name()))
		tools = append(tools, &ProjectTool{Path: rel, run: run, Timeout: 120 * time.Second,
			spec: ToolSpec{Name: name, Description: desc.Description, Schema: desc.Schema}})
	}
	return tools, broken
}
