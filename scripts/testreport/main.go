// Command testreport reads `go test -json` on its standard input and says
// what happened in a way a person reads: each package's result line, the
// whole output of every test that failed, every skip with its reason, and
// a closing "N passed, N failed, N skipped" line. Skips are checked against
// a list of expected ones (-expect FILE: lines "PACKAGE TEST REASON", TEST a
// regular expression matched against the whole name): with -strict (CI),
// a skip not on the list fails the run, so a test that quietly stopped
// running is seen, as bubblewrap's visible skips are. The slowest tests
// (top-level, passed or failed) come next: where a run's time goes. Last,
// before the count, each failed test's own message, a few lines of it:
// a reader (or a tool) that keeps only a run's tail still sees why.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type expectation struct {
	pkg    string
	test   *regexp.Regexp
	reason string
}

func main() {
	expectFile := flag.String("expect", "", "file of expected skips: PACKAGE TEST-REGEXP REASON per line")
	strict := flag.Bool("strict", false, "fail when a test skips that the list does not expect")
	flag.Parse()
	expected, err := readExpected(*expectFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(2)
	}
	r := report(os.Stdin, os.Stdout, expected)
	if r.failed > 0 || r.pkgFailed > 0 || r.events == 0 || (*strict && len(r.unexpected) > 0) {
		os.Exit(1)
	}
}

func readExpected(file string) ([]expectation, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []expectation
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want PACKAGE TEST-REGEXP REASON", file, i+1)
		}
		re, err := regexp.Compile("^(" + f[1] + ")$")
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, i+1, err)
		}
		out = append(out, expectation{pkg: f[0], test: re, reason: strings.Join(f[2:], " ")})
	}
	return out, nil
}

type result struct {
	events, passed, failed, skipped, pkgFailed int
	unexpected                                 []string
	slowest                                    []timing
	causes                                     []string // "PACKAGE TEST: message", a failed test's first lines
}

// timing is a top-level test's time.
type timing struct {
	name    string // PACKAGE TEST, the package without the module's path
	elapsed float64
}

// slowestShown is how many of the slowest tests the report names.
const slowestShown = 12

func report(in io.Reader, out io.Writer, expected []expectation) result {
	var r result
	outputs := map[string]*strings.Builder{} // a running test's output, kept until it ends
	type skip struct{ pkg, test, why string }
	var skips []skip
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// go build's errors and other plain lines come through as they are.
			fmt.Fprintln(out, sc.Text())
			continue
		}
		r.events++
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				// A package's own lines: its result, a panic, a build error.
				if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS\n") && !strings.HasPrefix(e.Output, "FAIL\n") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			if b.Len() < 1<<20 {
				b.WriteString(e.Output)
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				if e.Action == "fail" {
					r.pkgFailed++
				}
				continue
			}
			text := ""
			if b := outputs[key]; b != nil {
				text = b.String()
			}
			delete(outputs, key)
			if e.Action != "skip" && !strings.Contains(e.Test, "/") {
				r.slowest = append(r.slowest, timing{e.Package[strings.LastIndex(e.Package, "/")+1:] + " " + e.Test, e.Elapsed})
			}
			switch e.Action {
			case "pass":
				r.passed++
			case "fail":
				r.failed++
				fmt.Fprint(out, text)
				if c := failureMessage(text); c != "" {
					r.causes = append(r.causes, fmt.Sprintf("%s %s: %s", e.Package[strings.LastIndex(e.Package, "/")+1:], e.Test, c))
				}
			case "skip":
				r.skipped++
				skips = append(skips, skip{e.Package, e.Test, skipReason(text)})
			}
		}
	}
	sort.Slice(skips, func(i, j int) bool { return skips[i].pkg+skips[i].test < skips[j].pkg+skips[j].test })
	if len(skips) > 0 {
		fmt.Fprintf(out, "\nskipped (%d):\n", len(skips))
	}
	for _, s := range skips {
		mark := "unexpected"
		for _, x := range expected {
			if (x.pkg == s.pkg || strings.HasSuffix(s.pkg, "/"+x.pkg)) && x.test.MatchString(s.test) {
				mark = "expected: " + x.reason
				break
			}
		}
		if mark == "unexpected" {
			r.unexpected = append(r.unexpected, s.pkg+" "+s.test)
		}
		fmt.Fprintf(out, "  %s %s: %s [%s]\n", s.pkg, s.test, s.why, mark)
	}
	if len(r.unexpected) > 0 {
		fmt.Fprintf(out, "\n%d skips not on the expected list (scripts/expected-skips): each hides a test that did not run\n", len(r.unexpected))
	}
	if r.events == 0 {
		fmt.Fprintln(out, "testreport: no test events: did go test run?")
	}
	sort.SliceStable(r.slowest, func(i, j int) bool { return r.slowest[i].elapsed > r.slowest[j].elapsed })
	r.slowest = r.slowest[:min(len(r.slowest), slowestShown)]
	if len(r.slowest) > 0 {
		fmt.Fprintf(out, "\nslowest tests:")
		for _, s := range r.slowest {
			fmt.Fprintf(out, " %s %.0fs;", s.name, s.elapsed)
		}
		fmt.Fprintln(out)
	}
	if len(r.causes) > 0 {
		fmt.Fprintf(out, "\nwhy they failed (the first lines of each; the whole output is above):\n")
		for i, c := range r.causes {
			if i == causesShown {
				fmt.Fprintf(out, "  … and %d more\n", len(r.causes)-i)
				break
			}
			fmt.Fprintf(out, "  %s\n", c)
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", r.passed, r.failed, r.skipped)
	return r
}

// causesShown is how many failed tests' messages the closing part names.
const causesShown = 6

// failureMessage is the start of what a failed test reported: its first
// "file_test.go:LINE: " line and the few after it, cut to a length a
// summary can carry. A parent failing only because a subtest did says
// nothing of its own and gives "".
func failureMessage(output string) string {
	lines := strings.Split(output, "\n")
	for i, line := range lines {
		if !testMessage.MatchString(line) {
			continue
		}
		var kept []string
		for _, l := range lines[i:min(len(lines), i+messageLines)] {
			if l = strings.TrimSpace(l); l != "" {
				kept = append(kept, l)
			}
		}
		msg := strings.Join(kept, "\n    ")
		if len(msg) > messageBytes {
			msg = strings.ToValidUTF8(msg[:messageBytes], "") + "…" // not half a character
		}
		return msg
	}
	return ""
}

// testMessage is how testing prints t.Error's and t.Fatal's first line.
var testMessage = regexp.MustCompile(`^\s+\w+\.go:\d+: `)

const (
	messageLines = 8
	messageBytes = 900
)

// skipReason is the line a skipped test logged last before "--- SKIP".
func skipReason(output string) string {
	why := ""
	for _, line := range strings.Split(output, "\n") {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		why = l
	}
	if len(why) > 200 {
		why = why[:200] + "…"
	}
	return why
}
