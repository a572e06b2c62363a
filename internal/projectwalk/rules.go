package projectwalk

import (
	"bytes"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// MaxRulesSize caps a .gitignore or exclude file: larger ones are not
// read (a real one is a few KiB; 1 MiB leaves room for generated ones).
const MaxRulesSize = 1 << 20

// parseRules turns an ignore file held in the directory domain into
// patterns, in file order (later wins). It reads lines as git does: a
// UTF-8 BOM and CRs before a line's end are dropped, blank lines and
// lines starting with # are not rules.
func parseRules(b []byte, domain []string) []gitignore.Pattern {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	var ps []gitignore.Pattern
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.HasPrefix(line, "#") || strings.TrimRight(line, " ") == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(gitGlob(line), domain))
	}
	return ps
}

// gitGlob rewrites the parts of git's pattern syntax that go-git's
// matcher (filepath.Match underneath) reads otherwise:
//   - "a/**" matches what is inside a, not a itself (go-git matches a
//     too, which would hide a directory a later !a/keep re-includes): it
//     becomes "a/**/*";
//   - "**" that is not a whole path component is "*" to git (go-git's
//     matcher never matches a component holding it);
//   - "[!…]" negates a class in git; filepath.Match spells it "[^…]".
func gitGlob(p string) string {
	neg := strings.HasPrefix(p, "!")
	p = strings.TrimPrefix(p, "!")
	comps := strings.Split(p, "/")
	for i, c := range comps {
		if c != "**" {
			for strings.Contains(c, "**") {
				c = strings.ReplaceAll(c, "**", "*")
			}
			comps[i] = negatedClasses(c)
		}
	}
	if n := len(comps); n > 1 && comps[n-1] == "**" {
		comps = append(comps, "*")
	}
	p = strings.Join(comps, "/")
	if neg {
		p = "!" + p
	}
	return p
}

// negatedClasses writes an unescaped "[!" as "[^".
func negatedClasses(c string) string {
	if !strings.Contains(c, "[!") {
		return c
	}
	b := []byte(c)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '\\':
			i++ // an escaped character stays as it is
		case b[i] == '[' && i+1 < len(b) && b[i+1] == '!':
			b[i+1] = '^'
		}
	}
	return string(b)
}
