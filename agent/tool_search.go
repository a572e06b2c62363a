package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// SearchTool finds a regular expression in the project's files: in a git
// repository the files git knows or would add (so .gitignore counts),
// elsewhere every file but .git and node_modules.
type SearchTool struct{ W *Workspace }

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
		matches, more, err := Search(ctx, t.W, re, under, maxSearchResults)
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

// Match is one line that matched a search.
type Match struct {
	Path string `json:"path"` // relative to the project
	Line int    `json:"line"` // from 1
	Text string `json:"text"`
}

// Search finds re in the project's files under the relative path under
// (the files SearchTool describes), skipping binary ones; more says it
// stopped at limit matches.
func Search(ctx context.Context, w *Workspace, re *regexp.Regexp, under string, limit int) (matches []Match, more bool, err error) {
	files, err := SearchTool{W: w}.files(ctx, under)
	if err != nil {
		return nil, false, err
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return matches, false, err
		}
		b, err := w.ReadFile(f)
		if err != nil || bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // unreadable or binary
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for line := 1; sc.Scan(); line++ {
			if re.Match(sc.Bytes()) {
				if len(matches) == limit {
					return matches, true, nil
				}
				matches = append(matches, Match{Path: f, Line: line, Text: sc.Text()})
			}
		}
	}
	return matches, false, nil
}

// ProjectFiles lists the project's files under the relative path under,
// as search sees them: in a git repository those git knows or would add
// (so .gitignore counts), elsewhere every file but .git and node_modules.
func ProjectFiles(ctx context.Context, w *Workspace, under string) ([]string, error) {
	return SearchTool{W: w}.files(ctx, under)
}

func (t SearchTool) files(ctx context.Context, under string) ([]string, error) {
	// safe.directory: listing is harmless, and a root launcher on a
	// user's repository would be refused otherwise (and ignore .gitignore).
	cmd := exec.CommandContext(ctx, "git", "-c", "safe.directory=*", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", under)
	cmd.Dir = t.W.Root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
		return files, nil
	}
	var files []string
	err := fs.WalkDir(t.W.FS(), under, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	return files, err
}
