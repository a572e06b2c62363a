package mdterm

import (
	"errors"
	"strings"
	"testing"
)

// TestLines renders whole lines, one Write each: the exact bytes.
func TestLines(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"# Title", "\x1b[1;4mTitle\x1b[0m"},
		{"## Sub *it* ##", "\x1b[1mSub \x1b[0;1;3mit\x1b[0m"},
		{"#hashtag", "#hashtag"},
		{"Some **bold** and *it* and `co*de*` end", "Some \x1b[1mbold\x1b[0m and \x1b[3mit\x1b[0m and \x1b[36mco*de*\x1b[0m end"},
		{"__b__ _i_ snake_case_name x_y_z", "\x1b[1mb\x1b[0m \x1b[3mi\x1b[0m snake_case_name x_y_z"},
		{"**bold *and italic***", "\x1b[1mbold \x1b[0;1;3mand italic\x1b[0m"},
		{"***both***", "\x1b[1;3mboth\x1b[0m"},
		{"a * b * c, unclosed **bold", "a * b * c, unclosed **bold"},
		{"~~gone~~ ~kept~", "\x1b[9mgone\x1b[0m ~kept~"},
		{`\*not\* ` + "`` a`b ``", "*not* \x1b[36ma`b\x1b[0m"},
		{"see [the docs](https://x.io/a_(b) \"t\") now", "see \x1b[4mthe docs\x1b[0m (\x1b[2mhttps://x.io/a_(b)\x1b[0m) now"},
		{"[https://go.dev](https://go.dev) <https://go.dev>", "\x1b[4mhttps://go.dev\x1b[0m \x1b[4mhttps://go.dev\x1b[0m"},
		{"[a](b", "[a](b"},
		{"- item **b**", "• item \x1b[1mb\x1b[0m"},
		{"  * nested", "  • nested"},
		{"1. first", "1. first"},
		{"> quoted *x*", "\x1b[2m│ quoted \x1b[0;2;3mx\x1b[0m"},
		{">> deep", "\x1b[2m│ │ deep\x1b[0m"},
		{"* * *", "\x1b[2m" + strings.Repeat("─", 40) + "\x1b[0m"},
		{"tab\there, esc\x1b[2J, del\x7f, c1\u009b\r", "tab\there, esc␛[2J, del␡, c1\uFFFD"},
	} {
		var b strings.Builder
		m := New(&b, func() int { return 80 })
		m.Write([]byte(tc.in + "\n"))
		if got := b.String(); got != tc.want+"\n" {
			t.Errorf("%q\n got %q\nwant %q", tc.in, got, tc.want+"\n")
		}
	}
}

// step is one Write and what it must add to the terminal.
type step struct{ write, want string }

func stream(t *testing.T, width int, steps []step, flush string) {
	t.Helper()
	var b strings.Builder
	m := New(&b, func() int { return width })
	for i, s := range steps {
		before := b.Len()
		if _, err := m.Write([]byte(s.write)); err != nil {
			t.Fatal(err)
		}
		if got := b.String()[before:]; got != s.want {
			t.Errorf("write %d (%q) showed %q, want %q", i, s.write, got, s.want)
		}
	}
	before := b.Len()
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := b.String()[before:]; got != flush {
		t.Errorf("flush showed %q, want %q", got, flush)
	}
}

// TestStreamSplitMidToken: a partial line shows as it came, and is
// redrawn styled when it ends (by a newline or Flush).
func TestStreamSplitMidToken(t *testing.T) {
	stream(t, 80, []step{
		{"Some **bo", "Some **bo"},
		{"ld** te", "ld** te"},
		{"xt\nand `co", "\r\x1b[KSome \x1b[1mbold\x1b[0m text\nand `co"},
		{"de` here", "de` here"},
	}, "\r\x1b[Kand \x1b[36mcode\x1b[0m here")
}

// TestStreamFenceAcrossDeltas: the fence opens and closes in lines that
// came in pieces; nothing inside it is styled inline.
func TestStreamFenceAcrossDeltas(t *testing.T) {
	stream(t, 80, []step{
		{"Run:\n``", "Run:\n``"},
		{"`go\nfmt.Println(\"*x*\")\n``", "\r\x1b[K\x1b[2m```go\x1b[0m\n\x1b[36mfmt.Println(\"*x*\")\x1b[0m\n``"},
		{"`\n**ok**\n", "\r\x1b[K\x1b[2m```\x1b[0m\n\x1b[1mok\x1b[0m\n"},
	}, "")
}

// TestStreamFlushClosesFence: an answer that stops inside a code block
// does not leave the next one in it.
func TestStreamFlushClosesFence(t *testing.T) {
	var b strings.Builder
	m := New(&b, func() int { return 80 })
	m.Write([]byte("~~~~\n**x**"))
	m.Flush()
	b.WriteString("\n")
	m.Write([]byte("**y**\n"))
	want := "\x1b[2m~~~~\x1b[0m\n**x**\r\x1b[K\x1b[36m**x**\x1b[0m\n\x1b[1my\x1b[0m\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// TestStreamNoRedraw: a partial line that may have wrapped (wide
// characters count two columns), or on a terminal of unknown width, is
// finished as it is, unstyled; the next line is styled again. A line
// with nothing styled in what is shown is not redrawn either.
func TestStreamNoRedraw(t *testing.T) {
	stream(t, 10, []step{
		{"**01234567", "**01234567"},
		{"89**\n**y**\n", "89**\n\x1b[1my\x1b[0m\n"},
		{"0123456789", "0123456789"}, // a plain start is kept, what comes after it styled
		{" **x**\n", " \x1b[1mx\x1b[0m\n"},
		{"日本*語*日", "日本*語*日"}, // 10 columns
		{"\n", "\n"},
		{"日本*語*", "日本*語*"}, // 8
		{"\nPlain te", "\r\x1b[K日本\x1b[3m語\x1b[0m\nPlain te"},
		{"xt, **b", "xt, **b"},
	}, "")
	stream(t, 0, []step{{"**a", "**a"}, {"**\n", "**\n"}}, "")
	stream(t, 80, []step{{"Plain", "Plain"}, {" *it*", " *it*"}, {" is\n", "\r\x1b[KPlain \x1b[3mit\x1b[0m is\n"}, {"Done", "Done"}}, "")
}

// TestStreamSplitRune: a character split between writes is shown once
// whole.
func TestStreamSplitRune(t *testing.T) {
	stream(t, 80, []step{
		{"caf\xc3", "caf"},
		{"\xa9 *ok", "é *ok"},
		{"*\x1b", "*␛"},
	}, "\r\x1b[Kcafé \x1b[3mok\x1b[0m␛")
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }

func TestWriteError(t *testing.T) {
	m := New(failWriter{}, func() int { return 80 })
	if _, err := m.Write([]byte("x\n")); err == nil || err.Error() != "gone" {
		t.Errorf("Write: %v", err)
	}
	if err := m.Flush(); err == nil {
		t.Error("Flush after a failed write: no error")
	}
}
