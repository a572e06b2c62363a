package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/cove-sh/cove/internal/projectwalk"
)

// SearchTool finds a regular expression in the project's files, as
// projectwalk lists them: in a git project .gitignore counts (matched
// in-process: no git runs on the host), elsewhere every file but .git and
// node_modules. Binary files and those over projectwalk.MaxFileSize are
// skipped.
type SearchTool struct {
	W *Workspace
	// Walk holds what the host adds to the project's ignore rules (the
	// host user's global excludes); nil adds nothing.
	Walk *projectwalk.Options
}

var _ Tool = SearchTool{}

const maxSearchResults = 200

// Spec implements Tool.
func (t SearchTool) Spec() ToolSpec {
	return ToolSpec{Name: "search", Description: "Search the project's files for a regular expression (RE2); answers file:line: text.",
		Schema: schema(`{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string","description":"a directory or file to search in"}},"required":["pattern"]}`)}
}

// Plan implements Tool.
func (t SearchTool) Plan(ctx context.Context, raw json.RawMessage) (*Action, error) {
	var a struct{ Pattern, Path string }
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(a.Pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern: %v", err)
	}
	under := "."
	if a.Path != "" {
		if under, err = t.W.Rel(a.Path); err != nil {
			return nil, err
		}
	}
	return &Action{Kind: "read", Summary: "search " + a.Pattern, Do: func(ctx context.Context) (string, error) {
		tree, err := projectwalk.Open(t.W.Root, t.Walk)
		if err != nil {
			return "", err
		}
		defer tree.Close()
		matches, more, err := tree.Search(ctx, re, under, maxSearchResults)
		if err != nil {
			return "", err
		}
		if len(matches) == 0 {
			return "no matches", nil
		}
		var out strings.Builder
		for _, m := range matches {
			fmt.Fprintf(&out, "%s:%d: %s\n", m.Path, m.Line, strings.TrimSpace(m.Text))
		}
		if more {
			fmt.Fprintf(&out, "(more than %d matches: narrow the pattern or the path)\n", maxSearchResults)
		}
		return out.String(), nil
	}}, nil
}
