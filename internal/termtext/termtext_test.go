package termtext

import (
	"bytes"
	"strings"
	"testing"
)

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\n":                    "plain\ttext\n",
		"\x1b]52;c;ZXZpbA==\x07":           "␛]52;c;ZXZpbA==␇",
		"\x1b[2J\x1b[Hfake prompt$ ":       "␛[2J␛[Hfake prompt$ ",
		"progress 10%\rprogress 20%\n":     "progress 10%progress 20%\n",
		"\x9b31m c1 \xff":                  "\ufffd31m c1 \ufffd",
		"héllo ✓":                          "héllo ✓",
		"\x1b]0;window title\x1b\\ ok\x7f": "␛]0;window title␛\\ ok␡",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWriterKeepsCharactersWhole: a character cut between two writes is
// shown whole, and no escape byte reaches the terminal.
func TestWriterKeepsCharactersWhole(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	in := []byte("✓ done \x1b]52;c;Y2xpcA==\x07 é")
	for i := range in {
		if n, err := w.Write(in[i : i+1]); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := out.String(); got != "✓ done ␛]52;c;Y2xpcA==␇ é" || strings.ContainsRune(got, 0x1b) {
		t.Errorf("%q", got)
	}
}
