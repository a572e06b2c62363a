package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// ReadTool reads a file with line numbers, optionally a range of lines: a
// file of the project, or a command's output the bash tool saved
// (cove-out:NAME, read from Out, the host-only directory it saves in).
type ReadTool struct {
	W   *Workspace
	Out string // the bash tool's Out; "" reads no saved output
}

// savedOutputPrefix marks a path the read tool takes from the saved
// output, not the project: a name in a host-only directory the workspace
// cannot write, so it can neither plant nor redirect what is read there.
const savedOutputPrefix = "cove-out:"

// savedOutputName is what the names of saved output look like.
var savedOutputName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+-[0-9]+\.txt$`) })

// savedOutputMax bounds what is read of saved output.
const savedOutputMax = 64 << 20

func (t ReadTool) read(p string) ([]byte, error) {
	name, ok := strings.CutPrefix(p, savedOutputPrefix)
	if !ok {
		return t.W.ReadFile(p)
	}
	if !savedOutputName().MatchString(name) || t.Out == "" {
		return nil, fmt.Errorf("%s: no such saved output", p)
	}
	f, err := openState(filepath.Join(t.Out, name), os.O_RDONLY)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, savedOutputMax))
}

var _ Tool = ReadTool{}

// Spec implements Tool.
func (t ReadTool) Spec() ToolSpec {
	return ToolSpec{Name: "read", Description: "Read a file of the project, or a command's saved output (cove-out:NAME, as the bash tool names it), with line numbers. Use offset and limit (lines) for big files.",
		Schema: schema(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","description":"first line, 1-based"},"limit":{"type":"integer"}},"required":["path"]}`)}
}

// Plan implements Tool.
func (t ReadTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	var a struct {
		Path          string
		Offset, Limit int
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	b, err := t.read(a.Path)
	if err != nil {
		return nil, err
	}
	return &Action{Kind: "read", Summary: "read " + a.Path, Do: func(context.Context) (string, error) {
		lines := strings.Split(string(b), "\n")
		if len(lines) > 0 && lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		start := max(a.Offset, 1)
		end := len(lines)
		if a.Limit > 0 && start-1+a.Limit < end {
			end = start - 1 + a.Limit
		}
		var out strings.Builder
		for i := start - 1; i < end; i++ {
			fmt.Fprintf(&out, "%6d\t%s\n", i+1, lines[i])
		}
		if end < len(lines) {
			fmt.Fprintf(&out, "(%d more lines: read with offset %d)\n", len(lines)-end, end+1)
		}
		return out.String(), nil
	}}, nil
}

// WriteTool creates or replaces a file.
type WriteTool struct{ W *Workspace }

var _ Tool = WriteTool{}

// Spec implements Tool.
func (t WriteTool) Spec() ToolSpec {
	return ToolSpec{Name: "write", Description: "Create a file, or replace all of it.",
		Schema: schema(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`)}
}

// Plan implements Tool.
func (t WriteTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	var a struct{ Path, Content string }
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	old, err := t.W.ReadFile(a.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &Action{Kind: "edit", Summary: "write " + a.Path, Diff: unifiedDiff(a.Path, string(old), a.Content),
		Path: a.Path, Before: string(old), After: a.Content,
		Do: func(context.Context) (string, error) {
			if err := t.W.WriteFile(a.Path, []byte(a.Content)); err != nil {
				return "", err
			}
			return fmt.Sprintf("wrote %s (%d bytes)", a.Path, len(a.Content)), nil
		}}, nil
}

// EditTool replaces exact, unique text; several edits to one file apply
// together or not at all.
type EditTool struct{ W *Workspace }

var _ Tool = EditTool{}

// Spec implements Tool.
func (t EditTool) Spec() ToolSpec {
	return ToolSpec{Name: "edit", Description: "Replace text in a file. Each old text must appear exactly once; copy it with its indentation. All edits apply, or none.",
		Schema: schema(`{"type":"object","properties":{"path":{"type":"string"},"edits":{"type":"array","items":{"type":"object","properties":{"old":{"type":"string"},"new":{"type":"string"}},"required":["old","new"]}}},"required":["path","edits"]}`)}
}

// Plan implements Tool.
func (t EditTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	var a struct {
		Path  string
		Edits []struct{ Old, New string }
	}
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if len(a.Edits) == 0 {
		return nil, errors.New("no edits given")
	}
	b, err := t.W.ReadFile(a.Path)
	if err != nil {
		return nil, err
	}
	old := string(b)
	text := old
	for i, e := range a.Edits {
		which := ""
		if len(a.Edits) > 1 {
			which = fmt.Sprintf("edit %d: ", i+1)
		}
		if e.Old == "" {
			return nil, fmt.Errorf("%sthe old text is empty", which)
		}
		switch n := strings.Count(text, e.Old); {
		case n == 1:
			text = strings.Replace(text, e.Old, e.New, 1)
		case n == 0 && e.New != "" && strings.Contains(text, e.New):
			return nil, fmt.Errorf("%sthe old text is not in %s, but the new text already is: the edit seems done", which, a.Path)
		case n == 0:
			return nil, fmt.Errorf("%sthe old text is not in %s. %s", which, a.Path, nearest(text, e.Old))
		default:
			return nil, fmt.Errorf("%sthe old text is in %s %d times; include more lines to make it unique:\n%s", which, a.Path, n, occurrences(text, e.Old))
		}
	}
	return &Action{Kind: "edit", Summary: "edit " + a.Path, Diff: unifiedDiff(a.Path, old, text),
		Path: a.Path, Before: old, After: text,
		Do: func(context.Context) (string, error) {
			// The file may have changed since the plan: apply to what was read.
			now, err := t.W.ReadFile(a.Path)
			if err != nil {
				return "", err
			}
			if string(now) != old {
				return "", fmt.Errorf("%s changed while the edit waited for approval; read it again", a.Path)
			}
			if err := t.W.WriteFile(a.Path, []byte(text)); err != nil {
				return "", err
			}
			return fmt.Sprintf("edited %s", a.Path), nil
		}}, nil
}

// nearest finds the lines most like the first line of want, for a "did
// you mean" answer.
func nearest(text, want string) string {
	first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(want), "\n", 2)[0])
	lines := strings.Split(text, "\n")
	best, bestScore := -1, 0
	for i, l := range lines {
		if s := similarity(strings.TrimSpace(l), first); s > bestScore {
			best, bestScore = i, s
		}
	}
	if best < 0 || bestScore*2 < len(first) {
		return "Nothing like it is there either: read the file again."
	}
	lo, hi := max(best-2, 0), min(best+3, len(lines))
	var out strings.Builder
	out.WriteString("Did you mean (lines ")
	fmt.Fprintf(&out, "%d-%d):\n", lo+1, hi)
	for i := lo; i < hi; i++ {
		fmt.Fprintf(&out, "%6d\t%s\n", i+1, lines[i])
	}
	return out.String()
}

// similarity is the length of the longest common subsequence.
func similarity(a, b string) int {
	if len(a) > 400 || len(b) > 400 {
		a, b = a[:min(len(a), 400)], b[:min(len(b), 400)]
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			if a[i-1] == b[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// occurrences shows each place old appears, with a line of context.
func occurrences(text, old string) string {
	var out strings.Builder
	lines := strings.Split(text, "\n")
	offset := 0
	for n := 0; n < 5; n++ {
		i := strings.Index(text[offset:], old)
		if i < 0 {
			break
		}
		line := strings.Count(text[:offset+i], "\n")
		lo, hi := max(line-1, 0), min(line+strings.Count(old, "\n")+2, len(lines))
		fmt.Fprintf(&out, "at line %d:\n", line+1)
		for j := lo; j < hi; j++ {
			fmt.Fprintf(&out, "%6d\t%s\n", j+1, lines[j])
		}
		offset += i + len(old)
	}
	return out.String()
}
