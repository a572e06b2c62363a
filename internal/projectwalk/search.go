package projectwalk

import (
	"bufio"
	"bytes"
	"context"
	"regexp"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Match is one line that matched a search, and where its first match is
// in it. Col and Len count UTF-16 code units, as a browser's strings do,
// so that the IDE selects exactly the match.
type Match struct {
	Path string `json:"path"` // relative to the project
	Line int    `json:"line"` // from 1
	Text string `json:"text"`
	Col  int    `json:"col"` // from 0
	Len  int    `json:"len"`
}

// maxLine is the longest line search reads; a file with a longer one is
// searched up to it.
const maxLine = 1 << 20

// Search finds re in the regular files Files lists under the relative
// path under, line by line, skipping binary ones, those over MaxFileSize
// and those that cannot be read; more says it stopped at limit matches.
func (t *Tree) Search(ctx context.Context, re *regexp.Regexp, under string, limit int) (matches []Match, more bool, err error) {
	files, err := t.walk(ctx, under, false, nil)
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
			if at := re.FindIndex(sc.Bytes()); at != nil {
				if len(matches) == limit {
					return matches, true, nil
				}
				b := sc.Bytes()
				matches = append(matches, Match{Path: f.path, Line: line, Text: string(b),
					Col: utf16Len(b[:at[0]]), Len: utf16Len(b[at[0]:at[1]])})
			}
		}
	}
	return matches, false, nil
}

// utf16Len is how many UTF-16 code units b's text is (invalid bytes count
// one each, as the browser's decoder makes each a U+FFFD).
func utf16Len(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		n += max(1, utf16.RuneLen(r))
	}
	return n
}
