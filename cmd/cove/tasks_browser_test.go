package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/task"
	"github.com/cove-sh/cove/workspace"
	"github.com/cove-sh/cove/workspace/kube"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestBrowserTasks: real Chromium, the real launcher, two tasks made by
// cove agent --task with scripted models (ide/web/test/tasks.mjs): the
// IDE's Tasks view lists both, running, with their commits; a click on
// one shows its diff against its base in the merge view (the base's line
// on the left, the task's on the right), and its agent's conversation
// (the prompt, the edit it called); its own IDE opens in a new window,
// its terminal in its workspace; the two tasks' diffs compare
// side by side; New task refuses a taken name, then makes a third task
// from the page, whose prompt (shell syntax, never run as such) its
// agent gets as it is: the row shows it running, its commit and its
// tests passed, and its diff; Merge, confirmed, puts the first task's
// change in the project's file on disk; the second, its workspace
// stopped, is listed so, and Discard, confirmed, leaves no tree or
// record of it. As root, and rootless (covetest, with subordinate ids).
func TestBrowserTasks(t *testing.T) {
	t.Parallel()
	needRoot(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, testregistry.Addr(t), hostGitImage(t))
	eachNetUser(t, "cove-tasks-browser-", func(t *testing.T, u netUser, project string) {
		browserTasks(t, node, ref, u, project, nil)
	})
}

// TestBrowserTasksOnACluster is TestBrowserTasks with the launcher and
// the tasks on the test cluster (--kube, the user's own flattened
// kubeconfig), as root and rootless: each task a Pod; the merge applied
// in the project's Pod comes home; a task's own IDE is its Pod's, not a
// local workspace made of the task's tree.
// (In one of three runs the merge left the project as it was: the
// cluster had dropped the diff on its way, which is now checked.)
func TestBrowserTasksOnACluster(t *testing.T) {
	t.Parallel()
	needRoot(t)
	kc := testKubeconfig(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, testregistry.Addr(t), hostGitImage(t))
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	must(t, err)
	eachNetUser(t, "cove-tasks-kube-browser-", func(t *testing.T, u netUser, project string) {
		cfg, err := clientcmd.LoadFromFile(kc)
		must(t, err)
		must(t, clientcmdapi.FlattenConfig(cfg))
		own := filepath.Join(u.root, "kubeconfig")
		must(t, clientcmd.WriteToFile(*cfg, own))
		if fi, err := os.Stat(u.root); err == nil {
			st := fi.Sys().(*syscall.Stat_t)
			must(t, os.Chown(own, int(st.Uid), int(st.Gid)))
		}
		m := &task.Manager{Project: project, Data: filepath.Join(u.root, "data")}
		t.Cleanup(func() { // what a failing run left on the cluster
			for _, d := range []string{project, m.Tree("t1"), m.Tree("t2"), m.Tree("t3")} {
				k.Remove(context.Background(), workspace.Name(d))
			}
		})
		browserTasks(t, node, ref, u, project, []string{"--kube", "--kubeconfig", own})
		// t1's own IDE (opened from the page) was its Pod's: its launcher
		// is listed on the cluster, and no local workspace was made of
		// its tree.
		r := u.cove(t, "", "ps", "-a")
		var row string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, workspace.Name(m.Tree("t1"))+" ") {
				row = l
			}
		}
		if !strings.Contains(row, "default on https://") {
			t.Errorf("t1's own IDE is not its Pod's (cove ps -a):\n%s", r.stdout)
		}
	})
}

// browserTasks is TestBrowserTasks with cove run by u, with the flags
// where (--kube…) for every command that finds workspaces.
func browserTasks(t *testing.T, node, ref string, u netUser, project string, where []string) {
	os.WriteFile(filepath.Join(project, "values.sh"), []byte("# the values\nvalue=wrong\n"), 0o644)
	os.WriteFile(filepath.Join(project, "test.sh"), []byte(". ./values.sh\n[ \"$value\" != wrong ] || { echo \"value is wrong\"; exit 1; }\n"), 0o644)
	hostGit(t, project, "init", "-q", "-b", "main")
	hostGit(t, project, "add", "-A")
	hostGit(t, project, "commit", "-q", "-m", "a wrong value")
	// The project is the user's (covetest's, rootless), as its directory is.
	giveToProjectOwner(project)

	edit := func(fix string) llmtest.Response {
		b, _ := json.Marshal(map[string]any{"path": "values.sh", "edits": []any{map[string]any{"old": "value=wrong", "new": fix}}})
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "e", "type": "function", "function": map[string]any{"name": "edit", "arguments": string(b)}}}})}
	}
	done := llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Done."})}
	model := func(srv *llmtest.Server) []string {
		return []string{"COVE_BASE_URL=" + srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test"}
	}

	// The launcher's model is the one New task's agent calls: it edits,
	// runs the project's tests (they pass), and is done.
	third := llmtest.New(t)
	b, _ := json.Marshal(map[string]any{"command": "sh test.sh"})
	third.Push(edit("value=third"),
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "b", "type": "function", "function": map[string]any{"name": "bash", "arguments": string(b)}}}})},
		done)
	launcher := u
	launcher.env = model(third)
	url, upLog := upAs(t, launcher, append(append([]string{}, where...), "--image", ref, project)...)

	fixes := map[string]string{"t1": "value=right", "t2": "value=other"}
	var wg sync.WaitGroup
	for name, fix := range fixes {
		srv := llmtest.New(t)
		srv.Push(edit(fix), done)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := u.command("", append(append([]string{"agent", "--yes"}, where...), "--image", ref, "--task", name, "-p", "make the value "+fix, project)...)
			cmd.Env = append(cmd.Env, model(srv)...)
			cmd.Stdin = strings.NewReader("")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("task %s: %v\n%s", name, err, out)
			}
		}()
	}
	wg.Wait()
	m := &task.Manager{Project: project, Data: filepath.Join(u.root, "data")}
	t.Cleanup(func() {
		for _, name := range []string{"t1", "t2", "t3"} {
			u.cove(t, "", append(append([]string{"task", "discard"}, where...), name, project)...)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	// cove tasks lists them as the IDE does (the rows are one function's).
	var listed []struct {
		Name, Status, Tests string
		Commits             int
	}
	r := u.cove(t, "", append(append([]string{"tasks", "--json"}, where...), project)...)
	if json.Unmarshal([]byte(r.stdout), &listed); len(listed) != 2 || listed[0].Status != "running" || listed[1].Commits != 1 || listed[0].Tests != "-" {
		t.Errorf("cove tasks --json: %+v\n%s", listed, r.stderr)
	}

	// New task's prompt is shell syntax that, run by a shell on this
	// machine, would make pwned: it is the agent's prompt, as it is.
	pwned := filepath.Join(u.root, "pwned")
	prompt := fmt.Sprintf("make the value value=third; $(touch %s) `touch %s` ' \" -p --yes", pwned, pwned)
	cmd := exec.Command(node, "../../ide/web/test/tasks.mjs", url, prompt)
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for sc := bufio.NewScanner(stdout); sc.Scan(); {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "cove-test: t3") {
			t.Log(sc.Text())
		}
		if sc.Text() == "cove-test: stop t2" {
			if r := u.cove(t, "", append(append([]string{"stop"}, where...), workspace.Name(m.Tree("t2")))...); r.code != 0 {
				t.Errorf("cove stop t2's workspace: %+v", r)
			}
		}
	}
	if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
		log, _ := os.ReadFile(m.Log("t3"))
		t.Fatalf("tasks.mjs: %v\n%s\n%s\nlauncher: %s\nt3's agent: %s", err, strings.Join(lines, "\n"), errb.String(), upLog, log)
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
	// t3, made in the IDE: its record has the prompt byte for byte, its
	// agent got it so, and nothing ran it.
	if r, err := m.Get("t3"); err != nil || r.Prompt != prompt {
		t.Errorf("task t3 made in the IDE: %+v %v; want the prompt %q", r, err, prompt)
	}
	if rs := third.Requests(); len(rs) != 3 || !strings.Contains(string(rs[0].Body), "touch "+pwned) {
		t.Errorf("t3's agent asked its model %d times", len(rs))
	}
	if _, err := os.Lstat(pwned); err == nil {
		t.Errorf("New task's prompt was run by a shell: %s exists", pwned)
	}
	r = u.cove(t, "", append(append([]string{"tasks", "--json"}, where...), project)...)
	if json.Unmarshal([]byte(r.stdout), &listed); len(listed) != 2 || listed[1].Name != "t3" || listed[1].Tests != "passed" || listed[1].Commits != 1 {
		t.Errorf("cove tasks --json after the IDE's New task: %+v\n%s", listed, r.stderr)
	}
}
