package task

import (
	"encoding/json"
	"testing"

	"github.com/cove-sh/cove/agent"
)

func TestRunsTests(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		command        string
		runs, decisive bool
	}{
		{"go test ./...", true, true},
		{"cd sub && go test -run TestX -count=1 ./pkg/", true, true},
		{"CGO_ENABLED=0 go test ./...", true, true},
		{"timeout 300 go test ./...", true, true},
		{"go test ./... && echo all good", true, true},
		{"go build ./... && go test ./...\n", true, true},
		{"go test ./... 2>&1", true, true},
		{"go test ./... &> /tmp/out", true, true},
		{"go test ./... 2>&1 | tail -20", true, false},
		{"go test ./... |& tail", true, false},
		{"go test ./... || true", true, false},
		{"go test ./...; echo $?", true, false},
		{"go test ./...\necho done", true, false},
		{"go test ./... &", true, false},
		{"go test ./... && echo ok; true", true, false},
		{"go test ./... | tail; go test ./pkg", true, true},
		{"go test && echo ok | tee log", true, true},
		{"pytest -q", true, true},
		{"python -m pytest tests/", true, true},
		{"python3.12 -m unittest discover", true, true},
		{"python -m pip install -e .", false, false},
		{"uv run pytest", true, true},
		{"poetry run python -m pytest", true, true},
		{"npm test", true, true},
		{"npm run test:unit", true, true},
		{"npm run build", false, false},
		{"yarn test --watch=false", true, true},
		{"pnpm test", true, true},
		{"npx vitest run", true, true},
		{"cargo test --all", true, true},
		{"cargo build", false, false},
		{"make test", true, true},
		{"make -C src check", true, true},
		{"make", false, false},
		{"mvn -q test", true, true},
		{"./gradlew test", true, true},
		{"gradle build", false, false},
		{"bundle exec rspec", true, true},
		{"./run-tests.sh", true, true},
		{"scripts/test.sh -v", true, true},
		{"sh test1.sh", true, true},
		{"bash -e ./scripts/run_tests.sh", true, true},
		{"sh -c 'go build'", false, false},
		{"bash build.sh", false, false},
		{"./testdata", false, false},
		{"./test_api.sh", true, true},
		{"test -f go.mod && echo yes", false, false},
		{"[ -f go.mod ]", false, false},
		{"echo 'go test ./...'", false, false},
		{"echo go test", false, false},
		{"git commit -m 'make test pass'", false, false},
		{"grep -rn 'pytest' .", false, false},
		{"# go test\nls", false, false},
		{"cat <<EOF\nEOF", false, false},
		{"", false, false},
		{"go test ./... \\\n  -run TestX", true, true},
		{"go vet ./... &&\n  go test ./...", true, true},
		{"go test 'unterminated", true, true},
		{"echo \"unterminated; go test", false, false},
		{"true \\", false, false},
	} {
		runs, decisive := RunsTests(c.command)
		if runs != c.runs || decisive != c.decisive {
			t.Errorf("RunsTests(%q) = %v, %v; want %v, %v", c.command, runs, decisive, c.runs, c.decisive)
		}
	}
}

func TestTestStatus(t *testing.T) {
	t.Parallel()
	exit := func(n int) *int { return &n }
	call := func(id, tool, command string) agent.Message {
		b, _ := json.Marshal(map[string]string{"command": command, "path": "x"})
		return agent.Message{Role: "assistant", ToolCalls: []agent.ToolCall{{ID: id, Name: tool, Args: b}}}
	}
	result := func(id string, e *int, isErr bool) agent.Message {
		return agent.Message{Role: "tool", ToolCallID: id, Content: "output", Exit: e, IsError: isErr}
	}
	for _, c := range []struct {
		name string
		msgs []agent.Message
		want string
	}{
		{"none", nil, "-"},
		{"no tests", []agent.Message{call("1", "bash", "ls"), result("1", exit(0), false)}, "-"},
		{"passed", []agent.Message{call("1", "bash", "go test ./..."), result("1", exit(0), false)}, "passed"},
		{"failed", []agent.Message{call("1", "bash", "go test ./..."), result("1", exit(1), false)}, "failed"},
		{"timed out", []agent.Message{call("1", "bash", "go test ./..."), result("1", exit(-1), false)}, "failed"},
		{"the last run counts", []agent.Message{
			call("1", "bash", "go test ./..."), result("1", exit(1), false),
			call("2", "edit", ""), result("2", nil, false),
			call("3", "bash", "go test ./..."), result("3", exit(0), false),
			call("4", "bash", "git status"), result("4", exit(0), false),
		}, "passed"},
		{"a refused run does not count", []agent.Message{
			call("1", "bash", "go test ./..."), result("1", exit(0), false),
			call("2", "bash", "go test ./..."), result("2", nil, true),
		}, "passed"},
		{"no recorded status does not count", []agent.Message{
			call("1", "bash", "go test ./..."), result("1", exit(2), false),
			call("2", "bash", "go test ./..."), result("2", nil, false),
		}, "failed"},
		{"piped: not the tests' status", []agent.Message{
			call("1", "bash", "go test ./..."), result("1", exit(0), false),
			call("2", "bash", "go test ./... | tail"), result("2", exit(0), false),
		}, "-"},
		{"another tool's command", []agent.Message{call("1", "mcp_run", "go test"), result("1", exit(1), false)}, "-"},
		{"the result before the call is not its", []agent.Message{result("1", exit(1), false)}, "-"},
	} {
		if got := TestStatus(c.msgs); got != c.want {
			t.Errorf("%s: TestStatus = %q, want %q", c.name, got, c.want)
		}
	}

	// Over sessions, the latest first: one that ran no tests leaves the
	// status of the one before; one whose run was not decisive says so.
	passed := []agent.Message{call("1", "bash", "go test ./..."), result("1", exit(0), false)}
	failed := []agent.Message{call("1", "bash", "make test"), result("1", exit(2), false)}
	asked := []agent.Message{call("1", "bash", "git log"), result("1", exit(0), false)}
	piped := []agent.Message{call("1", "bash", "go test ./... | tail"), result("1", exit(0), false)}
	for _, c := range []struct {
		name     string
		sessions [][]agent.Message
		want     string
	}{
		{"none", nil, "-"},
		{"a later session ran none", [][]agent.Message{asked, nil, failed, passed}, "failed"},
		{"the latest run counts", [][]agent.Message{passed, failed}, "passed"},
		{"the latest run was piped", [][]agent.Message{piped, passed}, "-"},
		{"none ran tests", [][]agent.Message{asked, asked}, "-"},
	} {
		if got := TestStatusOf(c.sessions...); got != c.want {
			t.Errorf("%s: TestStatusOf = %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzRunsTests: any command, however cut, is read without a panic (an
// agent's commands are the model's, and the model reads the workspace).
func FuzzRunsTests(f *testing.F) {
	for _, s := range []string{"go test ./... | tail", "a 'b", "\"", "\\", "x &", "&&", "|& go test", "2>&1 go test"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { RunsTests(s) })
}
