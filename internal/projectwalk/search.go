package projectwalk

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"strings"
)

// Match is one line that matched a search.
type Match struct {
	Path string `json:"path"` // relative to the project
	Line int    `json:"line"` // from 1
	Text string `json:"text"`
}

// maxLine is the longest line search reads; a file with a longer one is
// searched up to it.
const maxLine = 1 << 20

// Search finds re in the regular files Files lists under the relative
// path under, line by line, skipping binary ones, those over MaxFileSize
// and those that cannot be read; more says it stopped at limit matches.
func (t *Tree) Search(ctx context.Context, re *regexp.Regexp, under string, limit int) (matches []Match, more bool, err error) {
	files, err := t.walk(ctx, under)
	if err != nil {
		return nil, false, err
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return matches, false, err
		}
		if !f.regular {
			continue
		}
		b, err := readBounded(t.root, strings.Split(f.path, "/"), MaxFileSize)
		if err != nil || Binary(b) {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), maxLine)
		for line := 1; sc.Scan(); line++ {
			if re.Match(sc.Bytes()) {
				if len(matches) == limit {
					return matches, true, nil
				}
				matches = append(matches, Match{Path: f.path, Line: line, Text: sc.Text()})
			}
		}
	}
	return matches, false, nil
}
