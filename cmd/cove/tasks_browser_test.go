package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/task"
	"github.com/cove-sh/cove/workspace"
)

// TestBrowserTasks: real Chromium, the real launcher, two tasks made by
// cove agent --task with scripted models (ide/web/test/tasks.mjs): the
// IDE's Tasks view lists both, running, with their commits; a click on
// one shows its diff against its base in the merge view (the base's line
// on the left, the task's on the right), and its agent's conversation
// (the prompt, the edit it called); its own IDE opens in a new window,
// its terminal in its workspace; the two tasks' diffs compare
// side by side; Merge, confirmed, puts the task's change in the
// project's file on disk; the other, its workspace stopped, is listed
// so, and Discard, confirmed, leaves no tree or record of it.
func TestBrowserTasks(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, testregistry.Addr(t), hostGitImage(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "values.sh"), []byte("# the values\nvalue=wrong\n"), 0o644)
	hostGit(t, project, "init", "-q", "-b", "main")
	hostGit(t, project, "add", "-A")
	hostGit(t, project, "commit", "-q", "-m", "a wrong value")
	root := t.TempDir()
	_, url := startUp(t, root, ref, project)

	fixes := map[string]string{"t1": "value=right", "t2": "value=other"}
	var wg sync.WaitGroup
	for name, fix := range fixes {
		srv := llmtest.New(t)
		b, _ := json.Marshal(map[string]any{"path": "values.sh", "edits": []any{map[string]any{"old": "value=wrong", "new": fix}}})
		srv.Push(
			llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "id": "e", "type": "function", "function": map[string]any{"name": "edit", "arguments": string(b)}}}})},
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Done."})},
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd, out, errb := coveProc(root, "agent", "--yes", "--image", ref, "--task", name, "-p", "make the value "+fix, project)
			cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
			cmd.Stdin = strings.NewReader("")
			if err := cmd.Run(); err != nil {
				t.Errorf("task %s: %v %s\n%s", name, err, out, errb)
			}
		}()
	}
	wg.Wait()
	m := &task.Manager{Project: project, Data: filepath.Join(root, "data")}
	t.Cleanup(func() {
		for name := range fixes {
			runProc(t, root, "", "task", "discard", name, project)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// cove tasks lists them as the IDE does (the rows are one function's).
	var listed []struct {
		Name, Status string
		Commits      int
	}
	r := runProc(t, root, "", "tasks", "--json", project)
	if json.Unmarshal([]byte(r.stdout), &listed); len(listed) != 2 || listed[0].Status != "running" || listed[1].Commits != 1 {
		t.Errorf("cove tasks --json: %+v\n%s", listed, r.stderr)
	}

	cmd := exec.Command(node, "../../ide/web/test/tasks.mjs", url)
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		lines = append(lines, sc.Text())
		if sc.Text() == "cove-test: stop t2" {
			if r := runProc(t, root, "", "stop", workspace.Name(m.Tree("t2"))); r.code != 0 {
				t.Errorf("cove stop t2's workspace: %+v", r)
			}
		}
	}
	if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
		t.Fatalf("tasks.mjs: %v\n%s\n%s\nlauncher: %s", err, strings.Join(lines, "\n"), errb.String(), upErr(t))
	}
	if got, _ := os.ReadFile(filepath.Join(project, "values.sh")); string(got) != "# the values\nvalue=right\n" {
		t.Errorf("the project's values.sh after merging t1 in the IDE: %q", got)
	}
	if _, err := os.Stat(m.Tree("t2")); err == nil {
		t.Errorf("task t2's tree is left after its discard in the IDE")
	}
	if _, err := m.Get("t2"); err == nil {
		t.Errorf("task t2's record is left after its discard in the IDE")
	}
	if _, err := m.Get("t1"); err != nil {
		t.Errorf("task t1, merged, not discarded: %v", err)
	}
}
