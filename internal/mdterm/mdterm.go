// Package mdterm renders markdown on a terminal while it streams in, as a
// model's answer does: a line is styled with ANSI escapes once it is
// complete, and until then the part that has come is shown as it is: when
// the line ends, what styling changes in it is redrawn in place (if the
// line still sits on one row). It knows headings, **bold**, *italic*, ~~strike~~, `code`, fenced
// code blocks, list bullets, block quotes, rules and links; the rest of
// the text is written as it came.
//
// Control characters in the text are shown as their Unicode pictures
// (ESC as ␛), so that the text cannot drive the terminal.
package mdterm

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Writer renders markdown written to it in pieces of any size (a piece
// may end inside a line, a token or a character) on a terminal. The text
// is assumed to start at the beginning of a row, and each Write after a
// Flush too. A Writer is not safe for concurrent use; it does not close
// the terminal.
type Writer struct {
	out   io.Writer
	width func() int
	line  []byte // the line being written, without its end
	shown int    // how much of line is on the screen, unstyled
	fence string // the open code fence ("```", "~~~~"), "" outside one
	err   error
}

// New returns a Writer that renders on out. width reports the terminal's
// columns (as x/term's GetSize does) when a line shown unstyled ends; if
// it reports 0 or less, that line is left as it is.
func New(out io.Writer, width func() int) *Writer {
	return &Writer{out: out, width: width}
}

// Write renders p: each line it completes is written styled, and the rest
// of the last one as it is, to be styled when the line ends. The error is
// the first one writing to the terminal.
func (m *Writer) Write(p []byte) (int, error) {
	if m.err != nil {
		return 0, m.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.line = append(m.line, p...)
			m.showRaw()
			break
		}
		m.line = append(m.line, p[:i]...)
		m.endLine("\n")
		p = p[i+1:]
	}
	if m.err != nil {
		return 0, m.err
	}
	return n, nil
}

// Flush ends the text: a last line without its end is written styled
// (the cursor stays after it), and an open code fence is closed. A Write
// after Flush starts a new text.
func (m *Writer) Flush() error {
	if len(m.line) > 0 {
		m.endLine("")
	}
	m.fence = ""
	return m.err
}

func (m *Writer) put(s string) {
	if m.err == nil && s != "" {
		_, m.err = io.WriteString(m.out, s)
	}
}

// showRaw writes what of the line is not on the screen yet, up to its
// last whole character.
func (m *Writer) showRaw() {
	end := len(m.line)
	for k := end - 1; k >= m.shown && k >= end-utf8.UTFMax; k-- {
		if utf8.RuneStart(m.line[k]) {
			if !utf8.FullRune(m.line[k:end]) {
				end = k
			}
			break
		}
	}
	if end > m.shown {
		m.put(visible(string(m.line[m.shown:end])))
		m.shown = end
	}
}

// endLine writes the line styled, then end: after its start if that is
// on the screen already and styling leaves it as it is, else over it if
// it can be cleared (it has not wrapped), else not styled.
func (m *Writer) endLine(end string) {
	styled := m.render(visible(string(m.line)))
	shown := visible(string(m.line[:m.shown]))
	switch {
	case m.shown == 0:
		m.put(styled)
	case strings.HasPrefix(styled, shown): // nothing styled in what is shown
		m.put(styled[len(shown):])
	case m.fits(shown):
		m.put("\r\x1b[K" + styled)
	default:
		m.put(visible(string(m.line[m.shown:])))
	}
	m.put(end)
	m.line, m.shown = m.line[:0], 0
}

// fits says whether shown, written from the start of a row, left the
// cursor on that row.
func (m *Writer) fits(shown string) bool {
	w := m.width()
	return w > 0 && columns(shown) < w
}

// columns is how many columns s takes, at least: anything from U+1100 on
// counts as wide, since a narrow guess could clear the wrong row.
func columns(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r == '\t':
			n += 8 - n%8
		case r < 0x1100:
			n++
		default:
			n += 2
		}
	}
	return n
}

// visible replaces control characters with their pictures (C1 ones and
// invalid bytes with U+FFFD); a carriage return is dropped.
func visible(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\r':
		case r == '\t':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		case isControl(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r) // an invalid byte comes as RuneError
		}
	}
	return b.String()
}

func isControl(r rune) bool { return r < 0x20 && r != '\t' || r >= 0x7f && r < 0xa0 }

var (
	fenceOpen = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$") })
	heading   = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	})
	bullet = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`) })
)

// render styles one line, a whole one, and keeps track of code fences.
func (m *Writer) render(line string) string {
	if m.fence != "" {
		if closesFence(line, m.fence) {
			m.fence = ""
			return styled(line, dim)
		}
		return styled(line, code)
	}
	if f := fenceOpen().FindStringSubmatch(line); f != nil && !(f[1][0] == '`' && strings.Contains(f[2], "`")) {
		m.fence = f[1]
		return styled(line, dim)
	}
	var in inline
	depth, quote := quoted(line)
	switch {
	case heading().MatchString(line):
		h := heading().FindStringSubmatch(line)
		st := bold
		if len(h[1]) == 1 {
			st |= underline
		}
		in.span(h[2], st)
	case isRule(line):
		in.write(strings.Repeat("─", 40), dim)
	case depth > 0:
		prefix := strings.Repeat("│ ", depth)
		if quote == "" {
			prefix = strings.TrimSuffix(prefix, " ")
		}
		in.write(prefix, dim)
		in.span(quote, dim)
	case bullet().MatchString(line):
		b := bullet().FindStringSubmatch(line)
		in.write(b[1]+"• ", 0)
		in.span(b[2], 0)
	default:
		in.span(line, 0)
	}
	return in.String()
}

// closesFence says whether line ends the block fence opened.
func closesFence(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// isRule says whether line is a thematic break: three or more of one of
// - * _, perhaps with spaces between.
func isRule(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || t == "" || !strings.ContainsRune("-*_", rune(t[0])) {
		return false
	}
	n := 0
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case t[0]:
			n++
		case ' ', '\t':
		default:
			return false
		}
	}
	return n >= 3
}

// quoted strips a block quote's markers: how deep it is, and its text.
func quoted(line string) (int, string) {
	n := 0
	for {
		t := strings.TrimLeft(line, " ")
		if len(line)-len(t) > 3 || !strings.HasPrefix(t, ">") {
			return n, line
		}
		n++
		line = strings.TrimPrefix(t[1:], " ")
	}
}

// style is a set of ANSI text attributes.
type style uint8

const (
	bold style = 1 << iota
	dim
	italic
	underline
	strike
	code
)

var sgrCodes = []struct {
	s    style
	code string
}{{bold, "1"}, {dim, "2"}, {italic, "3"}, {underline, "4"}, {strike, "9"}, {code, "36"}}

// sgr is the escape that goes from style from to style to.
func sgr(from, to style) string {
	if from == to {
		return ""
	}
	if to == 0 {
		return "\x1b[0m"
	}
	var b strings.Builder
	b.WriteString("\x1b[")
	if from != 0 {
		b.WriteString("0;")
	}
	sep := ""
	for _, c := range sgrCodes {
		if to&c.s != 0 {
			b.WriteString(sep + c.code)
			sep = ";"
		}
	}
	b.WriteByte('m')
	return b.String()
}

func styled(s string, st style) string {
	if s == "" {
		return ""
	}
	return sgr(0, st) + s + sgr(st, 0)
}

// inline renders the spans of one line.
type inline struct {
	b   strings.Builder
	cur style // as written to b
}

func (in *inline) write(s string, st style) {
	if s == "" {
		return
	}
	in.b.WriteString(sgr(in.cur, st))
	in.cur = st
	in.b.WriteString(s)
}

// String ends the line's styles and returns it.
func (in *inline) String() string {
	in.b.WriteString(sgr(in.cur, 0))
	in.cur = 0
	return in.b.String()
}

// span renders s in style st, and the spans in it in theirs.
func (in *inline) span(s string, st style) {
	plain := 0 // where text not written yet starts
	for i := 0; i < len(s); {
		var (
			inner, url string
			add        style
			next       int
			ok         bool
		)
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) && isPunct(s[i+1]) {
				in.write(s[plain:i], st)
				in.write(s[i+1:i+2], st)
				i += 2
				plain = i
				continue
			}
		case '`':
			n := run(s, i, '`')
			if j := closingTicks(s, i+n, n); j >= 0 {
				in.write(s[plain:i], st)
				in.write(codeText(s[i+n:j]), st|code)
				i = j + n
				plain = i
			} else {
				i += n // literal
			}
			continue
		case '*', '_', '~':
			if inner, next, add, ok = emphasis(s, i); ok {
				in.write(s[plain:i], st)
				in.span(inner, st|add)
				i, plain = next, next
			} else {
				i += run(s, i, c) // the whole run is literal
			}
			continue
		case '[', '!':
			if inner, url, next, ok = link(s, i); ok {
				in.write(s[plain:i], st)
				if inner == "" || inner == url {
					in.write(url, st|underline)
				} else {
					in.span(inner, st|underline)
					in.write(" (", st)
					in.write(url, st|dim)
					in.write(")", st)
				}
				i, plain = next, next
				continue
			}
		case '<':
			if url, next, ok = autolink(s, i); ok {
				in.write(s[plain:i], st)
				in.write(url, st|underline)
				i, plain = next, next
				continue
			}
		}
		i++
	}
	in.write(s[plain:], st)
}

// run is the length of the run of c at s[i:].
func run(s string, i int, c byte) int {
	n := 0
	for i+n < len(s) && s[i+n] == c {
		n++
	}
	return n
}

// closingTicks finds the run of exactly n backticks that closes a code
// span whose text starts at from; -1 if there is none.
func closingTicks(s string, from, n int) int {
	for k := from; k < len(s); {
		if s[k] != '`' {
			k++
			continue
		}
		m := run(s, k, '`')
		if m == n {
			return k
		}
		k += m
	}
	return -1
}

// codeText is a code span's text: one space each side is padding when
// both are there, so that a span can start or end with a backtick.
func codeText(s string) string {
	if len(s) >= 2 && s[0] == ' ' && s[len(s)-1] == ' ' && strings.Trim(s, " ") != "" {
		return s[1 : len(s)-1]
	}
	return s
}

// skipSpan steps over an escape or a code span at s[k], which emphasis
// and link text do not look into; it returns k unchanged if there is
// none.
func skipSpan(s string, k int) int {
	switch s[k] {
	case '\\':
		return min(k+2, len(s))
	case '`':
		n := run(s, k, '`')
		if j := closingTicks(s, k+n, n); j >= 0 {
			return j + n
		}
		return k + n
	}
	return k
}

// emphasis matches the emphasis that opens at s[i] (*, **, ***, _, __,
// ___ or ~~): its text, where it ends, and its style. The opener must be
// followed by a non-space and the closer preceded by one; _ does not work
// inside words. A closing *** may close ** or * and an inner * or **.
func emphasis(s string, i int) (inner string, next int, st style, ok bool) {
	c := s[i]
	n := run(s, i, c)
	switch {
	case c == '~' && n == 2:
		st = strike
	case c == '~':
		return "", 0, 0, false
	case n == 1:
		st = italic
	case n == 2:
		st = bold
	case n == 3:
		st = bold | italic
	default:
		return "", 0, 0, false
	}
	start := i + n
	if start >= len(s) || isSpace(s[start]) || c == '_' && i > 0 && isWord(s[i-1]) {
		return "", 0, 0, false
	}
	for k := start; k < len(s); {
		if j := skipSpan(s, k); j != k {
			k = j
			continue
		}
		if s[k] != c {
			k++
			continue
		}
		m := run(s, k, c)
		end := k + m
		if k > start && !isSpace(s[k-1]) && (m == n || m == 3 && c != '~') &&
			!(c == '_' && end < len(s) && isWord(s[end])) {
			return s[start : end-n], end, st, true
		}
		k = end
	}
	return "", 0, 0, false
}

// link matches [text](url) or ![alt](url) at s[i]: the text, the URL
// (without a title), and where it ends.
func link(s string, i int) (text, url string, next int, ok bool) {
	j := i
	if s[j] == '!' {
		if j+1 >= len(s) || s[j+1] != '[' {
			return "", "", 0, false
		}
		j++
	}
	depth := 0
	for k := j + 1; k < len(s); k++ {
		if e := skipSpan(s, k); e != k {
			k = e - 1
			continue
		}
		switch s[k] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
				continue
			}
			if k+1 >= len(s) || s[k+1] != '(' {
				return "", "", 0, false
			}
			open := 0
			for e := k + 2; e < len(s); e++ {
				switch s[e] {
				case '(':
					open++
				case ')':
					if open > 0 {
						open--
						continue
					}
					dest := strings.Fields(s[k+2 : e])
					if len(dest) == 0 {
						return "", "", 0, false
					}
					url = strings.TrimSuffix(strings.TrimPrefix(dest[0], "<"), ">")
					return s[j+1 : k], url, e + 1, true
				}
			}
			return "", "", 0, false
		}
	}
	return "", "", 0, false
}

var autolinkRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^<((?:https?://|mailto:)[^\s<>]+)>`) })

// autolink matches <https://…> or <mailto:…> at s[i].
func autolink(s string, i int) (url string, next int, ok bool) {
	m := autolinkRE().FindStringSubmatch(s[i:])
	if m == nil {
		return "", 0, false
	}
	return m[1], i + len(m[0]), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// isWord says whether c is part of a word (letters and digits, any byte
// of a non-ASCII character).
func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func isPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !isWord(c)
}
