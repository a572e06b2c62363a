package main

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReportCountsAndFlagsSkips(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}`,
		`{"Action":"pass","Package":"p","Test":"TestA","Elapsed":3.2}`,
		`{"Action":"pass","Package":"p","Test":"TestA/sub","Elapsed":3.1}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:3: no chromium here\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:9: the kernel is too old\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Test":"TestD","Output":"=== CONT  TestD\n"}`,
		`{"Action":"output","Package":"p","Test":"TestD","Output":"    d_test.go:1: got 2, want 3\n"}`,
		`{"Action":"output","Package":"p","Test":"TestD","Output":"        the page said: no terminal\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestD","Elapsed":7}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
	}, "\n")
	var out strings.Builder
	r := report(strings.NewReader(in), &out, []expectation{{pkg: "p", test: regexp.MustCompile("^(TestB)$"), reason: "browser"}})
	if r.passed != 2 || r.failed != 1 || r.skipped != 2 || r.pkgFailed != 1 {
		t.Errorf("counts %+v", r)
	}
	if len(r.unexpected) != 1 || r.unexpected[0] != "p TestC" {
		t.Errorf("unexpected skips %v", r.unexpected)
	}
	// The cause comes again after the slowest tests, where a run's last
	// lines (all some readers keep) show it.
	if tail := out.String()[strings.Index(out.String(), "slowest tests"):]; !strings.Contains(tail, "p TestD: d_test.go:1: got 2, want 3\n    the page said: no terminal\n") {
		t.Errorf("the run's tail does not say why TestD failed:\n%s", tail)
	}
	for _, want := range []string{"got 2, want 3", "p TestB: b_test.go:3: no chromium here [expected: browser]", "p TestC: c_test.go:9: the kernel is too old [unexpected]", "2 passed, 1 failed, 2 skipped\n", "slowest tests: p TestD 7s; p TestA 3s;\n", "FAIL\tp\t0.1s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "=== RUN") {
		t.Errorf("a passing test's output was shown:\n%s", out.String())
	}
}

// TestFailureMessageIsCutWhole: a long message is cut to messageBytes
// and never inside a character (a page's text in another script).
func TestFailureMessageIsCutWhole(t *testing.T) {
	msg := failureMessage("    x_test.go:1: " + strings.Repeat("é", messageBytes) + "\n")
	if !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") || len(msg) > messageBytes+len("…") {
		t.Errorf("cut to %d bytes, valid UTF-8 %v: %q…", len(msg), utf8.ValidString(msg), msg[:40])
	}
}
