package task

import (
	"encoding/json"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cove-sh/cove/agent"
)

// The tests' status of a task, as TestStatus gives it.
const (
	TestsPassed  = "passed"
	TestsFailed  = "failed"
	TestsUnknown = "-" // no test run, or one whose status is not the tests'
)

// TestStatus is the status of the last test suite the agent ran in msgs
// (its session): the last bash command that ran one (go test, pytest,
// npm test, cargo test, make test…), passed when its exit status, as the
// agent recorded it from the shell, is 0, failed when not. It is "-"
// when no command ran tests, or when that command's status is not the
// tests' (piped on, or followed by ; or ||). A call that did not run
// (refused, or its shell gone) does not count.
func TestStatus(msgs []agent.Message) string {
	status, _ := lastTestRun(msgs)
	return status
}

// TestStatusOf is TestStatus over several sessions of the agent, the
// latest first: the status of the last test suite any of them ran (a
// later session that ran none, a question asked, leaves it as it was).
func TestStatusOf(sessions ...[]agent.Message) string {
	for _, msgs := range sessions {
		if status, ran := lastTestRun(msgs); ran {
			return status
		}
	}
	return TestsUnknown
}

// lastTestRun is TestStatus, and whether any command in msgs ran tests.
func lastTestRun(msgs []agent.Message) (status string, ran bool) {
	exits := map[string]*int{}
	for _, m := range msgs {
		if m.Role == "tool" && !m.IsError && m.Exit != nil {
			exits[m.ToolCallID] = m.Exit
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		calls := msgs[i].ToolCalls
		for j := len(calls) - 1; j >= 0; j-- {
			c := calls[j]
			exit, ran := exits[c.ID]
			if c.Name != "bash" || !ran {
				continue
			}
			var args struct{ Command string }
			if json.Unmarshal(c.Args, &args) != nil {
				continue
			}
			runs, decisive := RunsTests(args.Command)
			switch {
			case !runs:
				continue
			case !decisive:
				return TestsUnknown, true
			case *exit == 0:
				return TestsPassed, true
			default:
				return TestsFailed, true
			}
		}
	}
	return TestsUnknown, false
}

// RunsTests says whether the shell command runs a test suite, and if so
// whether its exit status is the tests' (decisive): the last simple
// command of it that runs tests ends the list, or is followed by && (which
// goes on only when they passed) and then nothing that runs whatever came
// before (; || &). A pipe right after the tests makes the status the
// next command's.
func RunsTests(command string) (runs, decisive bool) {
	segs, ops := splitCommand(command)
	last := -1
	for i, s := range segs {
		if testCommand(s) {
			last = i
		}
	}
	if last < 0 {
		return false, false
	}
	for i, op := range ops[last:] {
		if op != "" && op != "&&" && (op != "|" || i == 0) {
			return true, false
		}
	}
	return true, true
}

// splitCommand cuts a shell command into its simple commands' words and
// the operator after each ("" after the last, unless it is &): quotes and
// backslashes are honoured, redirections such as 2>&1 and &> are words,
// a newline is a ;. It is a reading for a report, not a shell: a
// subshell or a function is one word list like any.
func splitCommand(s string) (segs [][]string, ops []string) {
	var words []string
	var word strings.Builder
	inWord := false
	flushWord := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	flush := func(op string) {
		flushWord()
		if len(words) == 0 {
			return // "a &&\n b": the first operator holds
		}
		segs, ops, words = append(segs, words), append(ops, op), nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				word.WriteByte(s[i])
				inWord = true
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				end = len(s) - i - 1
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				word.WriteByte(s[i])
			}
		case c == '#' && !inWord:
			for i+1 < len(s) && s[i+1] != '\n' {
				i++
			}
		case c == ' ' || c == '\t':
			flushWord()
		case c == '\n' || c == ';':
			flush(";")
		case c == '&' && i+1 < len(s) && s[i+1] == '&':
			flush("&&")
			i++
		case c == '|' && i+1 < len(s) && s[i+1] == '|':
			flush("||")
			i++
		case c == '|':
			flush("|")
			if i+1 < len(s) && s[i+1] == '&' {
				i++
			}
		case c == '&' && (i+1 < len(s) && s[i+1] == '>' || i > 0 && (s[i-1] == '>' || s[i-1] == '<')):
			word.WriteByte(c) // &> file, 2>&1: a redirection
			inWord = true
		case c == '&':
			flush("&")
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flush("")
	if n := len(ops); n > 0 && ops[n-1] != "&" {
		ops[n-1] = "" // a trailing ; or a dangling operator
	}
	return segs, ops
}

// Compiled on first use, as cove's other patterns: a package-level
// regexp is compiled by every cove process before its main, a start's too.
var (
	assignment = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`) })
	// testScript is a project's own test script: test.sh, run-tests.sh…
	testScript = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(run[-_]?)?(unit[-_]?)?tests?([-_][a-z0-9]+|[0-9]+)*(\.sh)?$`)
	})
	python = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^python[0-9.]*$`) })
)

// wrappers run the command after them (and their own flags).
var wrappers = []string{"sudo", "env", "time", "nice", "timeout", "xvfb-run", "command", "exec", "stdbuf", "nohup"}

// testCommand says whether a simple command's words run a test suite.
func testCommand(words []string) bool {
	// Leading variable assignments and wrappers (with their flags and,
	// for timeout, its duration) are not the command.
	for len(words) > 0 {
		w := words[0]
		switch {
		case assignment().MatchString(w), strings.HasPrefix(w, "-") && len(words) > 1:
			words = words[1:]
		case slices.Contains(wrappers, w):
			words = words[1:]
			if w == "timeout" && len(words) > 1 && !strings.HasPrefix(words[0], "-") {
				words = words[1:]
			}
		default:
			goto done
		}
	}
done:
	if len(words) == 0 {
		return false
	}
	cmd, args := path.Base(words[0]), words[1:]
	sub := func(names ...string) bool { return len(args) > 0 && slices.Contains(names, args[0]) }
	has := func(names ...string) bool { // a target or task among the words
		for _, a := range args {
			if slices.Contains(names, a) {
				return true
			}
		}
		return false
	}
	switch cmd {
	case "go":
		return sub("test")
	case "pytest", "py.test", "tox", "nox", "jest", "vitest", "mocha", "ava", "tap", "rspec", "phpunit", "ctest", "bats", "karma", "nosetests", "trial":
		return true
	case "npm", "yarn", "pnpm", "bun":
		return sub("test", "t", "tst") || sub("run", "run-script") && len(args) > 1 && strings.HasPrefix(args[1], "test")
	case "npx", "pnpx", "bunx", "uv", "poetry", "pipenv", "pdm", "hatch", "bundle", "rye":
		// npx jest, uv run pytest, bundle exec rspec: the command after.
		if len(args) > 0 && (args[0] == "run" || args[0] == "exec") {
			args = args[1:]
		}
		return len(args) > 0 && testCommand(args) || cmd == "hatch" && sub("test")
	case "cargo":
		return sub("test", "nextest", "t")
	case "make", "gmake", "ninja", "just", "task", "rake", "mage":
		return has("test", "tests", "check", "unittest", "test-all", "spec")
	case "mvn", "mvnw", "gradle", "gradlew":
		return has("test", "verify", "check", "integrationTest", "connectedCheck")
	case "dotnet", "swift", "deno", "mix", "stack", "cabal", "dune", "lein", "sbt", "flutter", "dart", "zig", "elixir":
		return has("test")
	}
	if cmd == "sh" || cmd == "bash" || cmd == "dash" || cmd == "zsh" {
		// sh test.sh, bash -e scripts/run-tests.sh: a test script.
		for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-c" {
			args = args[1:]
		}
		return len(args) > 0 && testScript().MatchString(path.Base(args[0])) && path.Base(args[0]) != "test"
	}
	if python().MatchString(cmd) {
		for i, a := range args {
			if a == "-m" && i+1 < len(args) {
				return slices.Contains([]string{"pytest", "unittest", "nose", "nose2", "tox", "nox"}, args[i+1])
			}
		}
		return len(args) > 0 && (path.Base(args[0]) == "runtests.py" || strings.HasPrefix(path.Base(args[0]), "test") && strings.HasSuffix(args[0], ".py"))
	}
	return testScript().MatchString(cmd) && cmd != "test" // test(1) is [ ]
}
