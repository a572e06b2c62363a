package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/task"
	"github.com/cove-sh/cove/workspace"
)

// gitImages is the Debian image with git, made once per test binary and
// pushed to the test registry, from which each test's own store pulls it.
var gitImages struct {
	once sync.Once
	ref  string
	err  error
}

// gitImage is the test registry's Debian image with git: the Debian tree
// with git that scripts/test.sh debootstraps and caches
// (/var/cache/cove-test/debian-bookworm-git, or COVE_TEST_DEBIAN_GIT),
// else built here from the Debian tree by cove build and apt-get (slow:
// ~160 s of a loaded CI). It skips (fails in CI) with neither tree.
func gitImage(t *testing.T) string {
	t.Helper()
	addr := testregistry.Addr(t)
	tree := os.Getenv("COVE_TEST_DEBIAN_GIT")
	if tree == "" {
		tree = "/var/cache/cove-test/debian-bookworm-git"
	}
	if _, err := os.Stat(filepath.Join(tree, "usr/bin/git")); err == nil {
		gitImages.once.Do(func() { gitImages.ref, gitImages.err = pushTree(tree, addr, "test/git:1") })
		if gitImages.err != nil {
			t.Fatal(gitImages.err)
		}
		return gitImages.ref
	}
	deb := debianRef(t, addr)
	if deb == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Debian tree for the git image (scripts/test.sh debootstraps /var/cache/cove-test/debian-bookworm-git)")
		}
		t.Skip("no Debian tree (debootstrap --variant=minbase --include=git bookworm /var/cache/cove-test/debian-bookworm-git)")
	}
	gitImages.once.Do(func() {
		root, err := os.MkdirTemp("", "cove-gitimage-")
		if err != nil {
			gitImages.err = err
			return
		}
		defer os.RemoveAll(root)
		os.WriteFile(filepath.Join(root, "Dockerfile"), []byte("FROM "+deb+"\nRUN apt-get update -q && apt-get install -y -q --no-install-recommends git && rm -rf /var/lib/apt/lists/*\n"), 0o644)
		ref := addr + "/test/git:1"
		// apt on a busy machine takes longer than runProc's 2 minutes.
		cmd, _, errb := coveProc(filepath.Join(root, "cove"), "build", "-q", "--push", "-t", ref, root)
		timer := time.AfterFunc(8*time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		if err := cmd.Run(); err != nil {
			gitImages.err = fmt.Errorf("cove build --push of the git image: %v\n%s", err, errb)
			return
		}
		gitImages.ref = ref
	})
	if gitImages.err != nil {
		t.Fatal(gitImages.err)
	}
	return gitImages.ref
}

// hostGit runs git on the test's own project (the test's setup, not
// cove's: cove never runs git here).
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestTasksWorkApartAndMerge: four agents (scripted models) work at once
// on four tasks of one project, each fixing a different failing test by
// an edit to the one file they all change: each task's test passes in its
// own workspace while the others' still fail there, the project's own
// tree is untouched, merging two leaves exactly their changes in the
// project, and discarding two leaves no workspace, tree or branch of
// them. As root, and rootless (covetest, with subordinate ids).
//
// cove's root is on XFS (a loop device): the tasks' files are clones of
// one checkout of their base, kept while a task is on it. The other task
// tests run on this machine's ext4, where each tree gets the base's
// archive.
func TestTasksWorkApartAndMerge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here to make the test's project")
	}
	bothWaysOnXFS(t, tasksScenario)
}

// xfsMount mounts a new XFS file system (reflink on, 2 GiB sparse, on a loop
// device) at dir, unmounted when the test is done.
func xfsMount(t *testing.T, dir string) {
	t.Helper()
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no mkfs.xfs: scripts/test.sh installs xfsprogs")
		}
		t.Skip("no mkfs.xfs (Debian's xfsprogs) here")
	}
	img := filepath.Join(t.TempDir(), "xfs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 2<<30); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v %s", dir, err, out)
	}
	t.Cleanup(func() {
		if exec.Command("umount", dir).Run() != nil {
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

// bothWaysOnXFS is bothWays with cove's root and the project on an XFS
// file system of their own.
func bothWaysOnXFS(t *testing.T, scenario func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd)) {
	bothWaysIn(t, func(t *testing.T) string {
		fs := filepath.Join(rootlessBase(t, "cove-tasks-xfs-"), "xfs")
		xfsMount(t, fs)
		os.Chmod(fs, 0o755)
		return fs
	}, scenario)
}

// failingTest is test i of the tasks' project: it passes once values.sh
// says value<i>=right.
func failingTest(i int) string {
	return fmt.Sprintf(". ./values.sh\n[ \"$value%d\" = right ] || { echo \"test %d: value%d is $value%d\"; exit 1; }\necho ok %d\n", i, i, i, i, i)
}

// runner runs cove commands made by cove to their end (8 minutes at most).
func runner(t *testing.T, cove func(args ...string) *exec.Cmd) func(args ...string) result {
	return func(args ...string) result {
		t.Helper()
		cmd := cove(args...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		timer := time.AfterFunc(8*time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
}

// bothWays runs scenario as root and rootless (covetest, with
// subordinate ids), each with its own cove root and project.
func bothWays(t *testing.T, scenario func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd)) {
	bothWaysIn(t, func(t *testing.T) string { return rootlessBase(t, "cove-tasks-") }, scenario)
}

// bothWaysIn is bothWays with cove's root and the project in the
// directory dir makes (for the test, removed after it).
func bothWaysIn(t *testing.T, dir func(t *testing.T) string, scenario func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd)) {
	for _, rootless := range []bool{false, true} {
		t.Run(map[bool]string{false: "root", true: "rootless"}[rootless], func(t *testing.T) {
			var ru rootlessUser
			if rootless {
				ru = needRangedUser(t)
			}
			base := dir(t)
			root, project := filepath.Join(base, "root"), filepath.Join(base, "project")
			for _, d := range []string{root, project} {
				os.Mkdir(d, 0o700)
				if rootless {
					os.Chown(d, ru.uid, ru.gid)
				}
			}
			scenario(t, root, project, func(args ...string) *exec.Cmd {
				cmd, _, _ := coveProc(root, args...)
				if rootless {
					asTestUser(cmd, ru.u, ru.uid, ru.gid)
				}
				return cmd
			})
		})
	}
}

// gitProject makes project a git repository of files (names to
// contents) in one commit, owned as project is, and returns the commit.
func gitProject(t *testing.T, project string, files map[string]string) string {
	for name, content := range files {
		os.WriteFile(filepath.Join(project, name), []byte(content), 0o644)
	}
	hostGit(t, project, "init", "-q", "-b", "main")
	hostGit(t, project, "add", "-A")
	hostGit(t, project, "commit", "-q", "-m", "failing tests")
	giveToProjectOwner(project)
	return strings.TrimSpace(hostGit(t, project, "rev-parse", "HEAD"))
}

// toolCall is a scripted model's answer calling the tool name with args.
func toolCall(id, name string, args any) llmtest.Response {
	b, _ := json.Marshal(args)
	return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
		"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
}

// agentWith runs cove agent ARGS, cove made by cove, with the scripted
// model srv and no input, and returns what it printed and said.
func agentWith(cove func(args ...string) *exec.Cmd, srv *llmtest.Server, args ...string) (out, said string, err error) {
	cmd := cove(append([]string{"agent"}, args...)...)
	var o, e strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(""), &o, &e
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
	err = cmd.Run()
	return o.String(), e.String(), err
}

// tasksScenario is TestTasksWorkApartAndMerge with cove run by cove.
func tasksScenario(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd) {
	run := runner(t, cove)
	img := gitImage(t)
	values := "# one value per test, apart so that two fixes merge\n"
	files := map[string]string{}
	for i := 1; i <= 4; i++ {
		values += fmt.Sprintf("value%d=wrong\n#\n#\n", i)
		files[fmt.Sprintf("test%d.sh", i)] = failingTest(i)
	}
	files["values.sh"] = values
	// What a checkout has besides files: a directory, a symlink, an
	// executable; each task's tree has them as git does (its status is
	// clean), made from the base's checkout kept once.
	os.MkdirAll(filepath.Join(project, "lib", "deep"), 0o755)
	files["lib/deep/notes.txt"] = "deep\n"
	os.Symlink("lib/deep/notes.txt", filepath.Join(project, "notes"))
	os.WriteFile(filepath.Join(project, "run.sh"), []byte("#!/bin/sh\necho run\n"), 0o755)
	base := gitProject(t, project, files)
	if r := run("up", "--detach", "--no-browser", "--image", img, project); r.code != 0 {
		t.Fatalf("cove up: %d\n%s", r.code, r.stderr)
	}
	t.Cleanup(func() { run("rm", "-f", project) })

	var wg sync.WaitGroup
	took := make([]time.Duration, 5)
	for i := 1; i <= 4; i++ {
		srv := llmtest.New(t)
		script := []llmtest.Response{
			toolCall("e", "edit", map[string]any{"path": "values.sh", "edits": []any{map[string]any{"old": fmt.Sprintf("value%d=wrong", i), "new": fmt.Sprintf("value%d=right", i)}}}),
			toolCall("b", "bash", map[string]any{"command": fmt.Sprintf("sh test%d.sh", i)}),
		}
		if i == 4 {
			// t4's agent runs another test last, which fails in its
			// tree: cove tasks says its tests failed.
			script = append(script, toolCall("c", "bash", map[string]any{"command": "sh test1.sh"}))
		}
		srv.Push(append(script, llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": fmt.Sprintf("Fixed test %d.", i)})})...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			cmd := cove("agent", "--yes", "--image", img, "--task", fmt.Sprintf("t%d", i), "-p", fmt.Sprintf("fix test %d", i), project)
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
			cmd.Stdin = strings.NewReader("")
			if err := cmd.Run(); err != nil || out.String() != fmt.Sprintf("Fixed test %d.\n", i) {
				t.Errorf("task t%d: %v, %q\n%s", i, err, out.String(), errb.String())
				return
			}
			took[i] = time.Since(start)
			// 7 files: test1-4.sh, values.sh, run.sh, lib/deep/notes.txt.
			if !strings.Contains(errb.String(), "(its files cloned from the base's checkout, 7 of 7 sharing their data)") {
				t.Errorf("task t%d: its files were not cloned from the base's checkout: %q", i, errb.String())
			}
			if rs := srv.Requests(); len(rs) != len(script)+1 || !strings.Contains(strings.Join(rs[2].ToolResults(t), "\n"), fmt.Sprintf("ok %d", i)) {
				t.Errorf("task t%d: its test did not pass in its workspace: %d requests\n%s", i, len(rs), errb.String())
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("four tasks at once, each to its answer: %v %v %v %v", took[1], took[2], took[3], took[4])

	// Apart: each task's test passes in its workspace, the others' fail there.
	m := &task.Manager{Project: project, Data: filepath.Join(root, "data")}
	for i := 1; i <= 4; i++ {
		tree := m.Tree(fmt.Sprintf("t%d", i))
		name := workspace.Name(tree)
		for j := 1; j <= 4; j++ {
			r := run("exec", name, "sh", "-c", fmt.Sprintf("cd /workspace && sh test%d.sh", j))
			if (r.code == 0) != (i == j) {
				t.Errorf("in task t%d's workspace, test %d exits %d: %s", i, j, r.code, r.stdout)
			}
		}
		if du, err := exec.Command("du", "-sk", tree).Output(); err == nil {
			t.Logf("task t%d's tree: %s KiB", i, strings.Fields(string(du))[0])
		}
		if r := run("exec", name, "sh", "-c", "cd /workspace && git -c safe.directory='*' status --porcelain && readlink notes && ./run.sh && cat lib/deep/notes.txt"); r.code != 0 || r.stdout != "lib/deep/notes.txt\nrun\ndeep\n" {
			t.Errorf("task t%d's tree after its commit (git status, the symlink, the executable, the nested file): %d %q %s", i, r.code, r.stdout, r.stderr)
		}
	}
	// Their files came from one checkout of the base, kept while a task
	// is on it.
	baseDir := m.BaseDir(base)
	if b, err := os.ReadFile(filepath.Join(baseDir, "values.sh")); err != nil || string(b) != values {
		t.Errorf("the base's checkout %s: values.sh %q, %v", baseDir, b, err)
	}
	// The tasks share the project's history, not a copy of it: their
	// repositories read the project's objects (alternates), and a ref in
	// the project keeps each task's base from its gc. The project's
	// objects repacked (gc) under them, the tasks still read them.
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("t%d", i)
		gitDir := filepath.Join(m.Tree(n), ".git")
		if b, err := os.ReadFile(filepath.Join(gitDir, "objects", "info", "alternates")); err != nil || string(b) != workspace.OriginObjects+"\n" {
			t.Errorf("task %s's objects/info/alternates: %q, %v", n, b, err)
		}
		if packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.pack")); len(packs) > 0 {
			t.Errorf("task %s has a copy of the project's history: %v", n, packs)
		}
		// Its own objects are its commit's: the commit, its tree and
		// values.sh as changed; no copy of a file it left alone.
		if loose, _ := filepath.Glob(filepath.Join(gitDir, "objects", "??", "*")); len(loose) != 3 {
			t.Errorf("task %s's own objects: %d, want its commit, tree and values.sh: %v", n, len(loose), loose)
		}
		if ref := strings.TrimSpace(hostGit(t, project, "rev-parse", "refs/cove/tasks/"+n)); ref != base {
			t.Errorf("the project's refs/cove/tasks/%s: %s, want the base %s", n, ref, base)
		}
	}
	if r := run("exec", workspace.Name(project), "sh", "-c", "cd /workspace && git -c safe.directory='*' gc -q --prune=now"); r.code != 0 {
		t.Fatalf("git gc in the project's workspace: %d %s%s", r.code, r.stdout, r.stderr)
	}
	// The project is untouched until a merge.
	if st := hostGit(t, project, "status", "--porcelain"); st != "" {
		t.Errorf("the project's tree changed before any merge: %s", st)
	}
	var listed []struct {
		Name, Status, Diff, Tests string
		Commits                   int
	}
	r := run("tasks", "--json", project)
	json.Unmarshal([]byte(r.stdout), &listed)
	if len(listed) != 4 {
		t.Errorf("cove tasks: %+v\n%s", listed, r.stderr)
	}
	for _, l := range listed {
		if l.Status != "running" || l.Commits != 1 || !strings.Contains(l.Diff, "1 file changed") {
			t.Errorf("cove tasks, after the project's gc: %+v\n%s", l, r.stderr)
		}
	}
	// The tests' status, from each agent's last test run: t4's ran
	// test1.sh last, which fails in its tree.
	for _, w := range listed {
		if want := map[bool]string{true: "failed", false: "passed"}[w.Name == "t4"]; w.Tests != want {
			t.Errorf("cove tasks --json: task %s's tests are %q, want %q", w.Name, w.Tests, want)
		}
	}
	if r := run("tasks", project); !regexp.MustCompile(`(?m)^TASK +STATUS +COMMITS +DIFF +TESTS +AGENT +PROMPT\n(t[1-3] .* passed +done +fix test [1-3]\n){3}t4 .* failed +done +fix test 4\n$`).MatchString(sortedTail(r.stdout)) {
		t.Errorf("cove tasks:\n%s", r.stdout)
	}

	// Keep two, discard two.
	for _, n := range []string{"t1", "t3"} {
		if r := run("task", "merge", n, project); r.code != 0 {
			t.Fatalf("cove task merge %s: %d\n%s", n, r.code, r.stderr)
		}
	}
	for _, n := range []string{"t2", "t4"} {
		if r := run("task", "discard", n, project); r.code != 0 {
			t.Fatalf("cove task discard %s: %d\n%s", n, r.code, r.stderr)
		}
	}
	got, _ := os.ReadFile(filepath.Join(project, "values.sh"))
	want := strings.NewReplacer("value1=wrong", "value1=right", "value3=wrong", "value3=right").Replace(values)
	if string(got) != want {
		t.Errorf("the project after merging t1 and t3:\n%s\nwant\n%s", got, want)
	}
	if diff := hostGit(t, project, "diff", "--stat", base, "HEAD", "--", "test1.sh", "test2.sh", "test3.sh", "test4.sh"); diff != "" {
		t.Errorf("the merges changed more than values.sh: %s", diff)
	}
	if b := hostGit(t, project, "branch", "--list", "cove/task/t2", "cove/task/t4"); b != "" {
		t.Errorf("a discarded task's branch is in the project: %s", b)
	}
	if refs := hostGit(t, project, "for-each-ref", "refs/cove/tasks/"); strings.Contains(refs, "t2") || strings.Contains(refs, "t4") || !strings.Contains(refs, "refs/cove/tasks/t1") {
		t.Errorf("the project's task refs after discarding t2 and t4: %s", refs)
	}
	var ps []struct{ Dir string }
	r = run("ps", "--all", "--json")
	json.Unmarshal([]byte(r.stdout), &ps)
	for _, w := range ps {
		if w.Dir == m.Tree("t2") || w.Dir == m.Tree("t4") {
			t.Errorf("a discarded task's workspace is left: %+v", w)
		}
	}
	for _, n := range []string{"t2", "t4"} {
		if _, err := os.Stat(m.Tree(n)); err == nil {
			t.Errorf("task %s's tree is left", n)
		}
		if _, err := m.Get(n); err == nil {
			t.Errorf("task %s's record is left", n)
		}
		if _, err := os.Stat(filepath.Join(root, "state", "projects", workspace.Name(m.Tree(n)))); !os.IsNotExist(err) {
			t.Errorf("task %s's agent sessions are left: %v", n, err)
		}
	}
	if _, err := os.Stat(baseDir); err != nil {
		t.Errorf("the base's checkout, with t1 and t3 still on it: %v", err)
	}
	for _, n := range []string{"t1", "t3"} {
		if r := run("task", "discard", n, project); r.code != 0 {
			t.Errorf("cove task discard %s: %d\n%s", n, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(baseDir); !os.IsNotExist(err) {
		t.Errorf("the base's checkout, its last task discarded: %v", err)
	}
}

// TestTaskSurvivesItsAgentKilled: the cove agent running a task is killed
// (SIGKILL, its whole process group) in the middle of the agent's work,
// after its first edit: the task is still listed, its tree keeps the
// edit, and cove agent --task again goes on in the same tree and
// workspace, commits both runs' work on the task's branch, and the merge
// brings it into the project. As root and rootless.
func TestTaskSurvivesItsAgentKilled(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here to make the test's project")
	}
	bothWays(t, func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd) {
		run := runner(t, cove)
		img := gitImage(t)
		gitProject(t, project, map[string]string{"values.sh": "value1=wrong\n", "test1.sh": failingTest(1)})
		if r := run("up", "--detach", "--no-browser", "--image", img, project); r.code != 0 {
			t.Fatalf("cove up: %d\n%s", r.code, r.stderr)
		}
		t.Cleanup(func() { run("task", "discard", "t1", project); run("rm", "-f", project) })

		srv := llmtest.New(t)
		srv.Push(
			toolCall("e", "edit", map[string]any{"path": "values.sh", "edits": []any{map[string]any{"old": "value1=wrong", "new": "value1=right"}}}),
			llmtest.Response{Hang: true},
		)
		agent := func(prompt, url string) *exec.Cmd {
			cmd := cove("agent", "--yes", "--image", img, "--task", "t1", "-p", prompt, project)
			cmd.Env = append(cmd.Env, "COVE_BASE_URL="+url, "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
			cmd.Stdin = strings.NewReader("")
			return cmd
		}
		first := agent("fix test 1", srv.URL())
		if first.SysProcAttr == nil {
			first.SysProcAttr = &syscall.SysProcAttr{}
		}
		first.SysProcAttr.Setpgid = true
		var errb strings.Builder
		first.Stderr = &errb
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(6 * time.Minute); len(srv.Requests()) < 2; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
				first.Wait()
				t.Fatalf("the task's agent never made its edit:\n%s", errb.String())
			}
		}
		type agentRow struct{ Name, Agent string }
		agentOf := func() (string, string) {
			var listed []agentRow
			r := run("tasks", "--json", project)
			json.Unmarshal([]byte(r.stdout), &listed)
			table := run("tasks", project).stdout
			if len(listed) != 1 || listed[0].Name != "t1" {
				t.Errorf("cove tasks: %q %s", r.stdout, r.stderr)
				return "", table
			}
			return listed[0].Agent, table
		}
		// Any cove says the agent works, and then that it is gone.
		if a, table := agentOf(); a != "working" || !regexp.MustCompile(`\nt1 +running +0 +- +working +fix test 1\n`).MatchString(table) {
			t.Errorf("cove tasks while its agent works: %q\n%s", a, table)
		}
		syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
		first.Wait()
		if a, table := agentOf(); !strings.HasPrefix(a, "failed: its cove ended before the agent was done") || !strings.Contains(table, " gone ") {
			t.Errorf("cove tasks after its agent was killed: %q\n%s", a, table)
		}

		m := &task.Manager{Project: project, Data: filepath.Join(root, "data")}
		if b, _ := os.ReadFile(filepath.Join(m.Tree("t1"), "values.sh")); string(b) != "value1=right\n" {
			t.Errorf("the task's tree after its agent was killed: values.sh %q", b)
		}

		again := llmtest.New(t)
		again.Push(
			toolCall("b", "bash", map[string]any{"command": "sh test1.sh"}),
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Test 1 passes."})},
		)
		second := agent("go on", again.URL())
		var out, errb2 strings.Builder
		second.Stdout, second.Stderr = &out, &errb2
		if err := second.Run(); err != nil || out.String() != "Test 1 passes.\n" {
			t.Fatalf("cove agent --task t1 again: %v %q\n%s", err, out.String(), errb2.String())
		}
		if rs := again.Requests(); len(rs) != 2 || !strings.Contains(strings.Join(rs[1].ToolResults(t), "\n"), "ok 1") {
			t.Errorf("the task's test did not pass when its agent went on: %d requests", len(rs))
		}
		if a, table := agentOf(); a != "" || !regexp.MustCompile(` passed +done `).MatchString(table) {
			t.Errorf("cove tasks once its agent was done: %q\n%s", a, table)
		}
		// A later session that runs no tests (a question) leaves the
		// tests' status as the one before had it.
		third := llmtest.New(t)
		third.Push(llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "It sets value1."})})
		if err := agent("what did you change?", third.URL()).Run(); err != nil {
			t.Fatalf("cove agent --task t1, a question: %v", err)
		}
		if _, table := agentOf(); !regexp.MustCompile(` passed +done `).MatchString(table) {
			t.Errorf("cove tasks after a session that ran no tests:\n%s", table)
		}
		if r := run("task", "merge", "t1", project); r.code != 0 {
			t.Fatalf("cove task merge t1: %d\n%s", r.code, r.stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(project, "values.sh")); string(b) != "value1=right\n" {
			t.Errorf("the project after the merge: values.sh %q", b)
		}
	})
}

// sortedTail is a table with its rows after the header sorted.
func sortedTail(table string) string {
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\n") + "\n"
}

// TestTaskNewRefuses: the IDE's New task refuses, before anything runs
// or is written, a name that is not a task's (as the page or anyone with
// the token may send), a taken one with a message that says so, and a
// prompt that is empty, over ide.MaxTaskPrompt or not text.
func TestTaskNewRefuses(t *testing.T) {
	t.Parallel()
	m := &task.Manager{Project: t.TempDir(), Data: t.TempDir()}
	dir := filepath.Join(m.Data, "tasks", workspace.Name(m.Project))
	must(t, os.MkdirAll(dir, 0o700))
	must(t, os.WriteFile(filepath.Join(dir, "taken.json"), []byte(`{"name":"taken","created":"2026-01-01T00:00:00Z"}`), 0o600))
	p := &taskPanel{m: m}
	for _, c := range []struct{ name, prompt, want string }{
		{"", "p", "a task's name is"},
		{"Big", "p", "a task's name is"},
		{"../x", "p", "a task's name is"},
		{"-p", "p", "a task's name is"},
		{"a;touch x", "p", "a task's name is"},
		{"a b", "p", "a task's name is"},
		{"taken", "p", "task taken exists"},
		{"t", " \n", "the prompt is empty"},
		{"t", strings.Repeat("x", ide.MaxTaskPrompt+1), "at most 64 KiB"},
		{"t", "a\x00b", "not text"},
		{"t", "a\xffb", "not text"},
	} {
		if err := p.TaskNew(t.Context(), c.name, c.prompt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TaskNew(%.20q, %.20q) = %v, want %q", c.name, c.prompt, err, c.want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || len(p.agents) != 0 {
		t.Errorf("a refused New task left %d files, %d agents", len(ents), len(p.agents))
	}
}

// TestTaskPanelListsNewTasksAgents: the Tasks view lists a task New task
// is making (its agent working, no record yet) as starting, one whose
// agent failed before it made its task as failed with why, and forgets
// one whose agent was done and whose task is gone (discarded elsewhere);
// Discard forgets the failed one.
func TestTaskPanelListsNewTasksAgents(t *testing.T) {
	t.Parallel()
	m := &task.Manager{Project: t.TempDir(), Data: t.TempDir()}
	p := &taskPanel{m: m, agents: map[string]*taskAgent{
		"b-making": {prompt: "make it"},
		"a-failed": {prompt: "fail", done: true, failed: "cove: no model"},
		"gone":     {prompt: "done", done: true},
	}}
	rows, err := p.Tasks(t.Context())
	if err != nil || len(rows) != 2 {
		t.Fatalf("Tasks: %+v %v", rows, err)
	}
	if w := rows[0]; w.Name != "a-failed" || w.Status != "failed" || w.Agent != "failed: cove: no model" || w.Prompt != "fail" {
		t.Errorf("the failed one: %+v", w)
	}
	if w := rows[1]; w.Name != "b-making" || w.Status != "starting" || w.Agent != "working" || w.Tests != "-" || w.Branch != "cove/task/b-making" {
		t.Errorf("the one being made: %+v", w)
	}
	if _, ok := p.agents["gone"]; ok {
		t.Errorf("an agent whose task is gone is kept")
	}
	if err := p.TaskDiscard(t.Context(), "b-making"); err == nil || !strings.Contains(err.Error(), "still working") {
		t.Errorf("Discard of a task whose agent works: %v", err)
	}
	if err := p.TaskDiscard(t.Context(), "a-failed"); err != nil {
		t.Errorf("Discard of a failed New task: %v", err)
	}
	if rows, _ := p.Tasks(t.Context()); len(rows) != 1 {
		t.Errorf("after its Discard: %+v", rows)
	}
}

// TestTaskBuildsFromTheProject: a task's workspace whose image is built
// from a Dockerfile with the project as its context (COPY values.sh)
// starts: on ext4 its tree gets the base's files from the project's
// archive before the build, where a checkout in the workspace would come
// after it. Its postCreateCommand finds the project's files and the
// task's branch (made before the lifecycle commands, as the project's own
// workspace has them); before, it ran on an empty tree, and a task could
// not start. Its index is set on the files (git status is clean). As
// root and rootless.
func TestTaskBuildsFromTheProject(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here to make the test's project")
	}
	bothWays(t, func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd) {
		run := runner(t, cove)
		img := gitImage(t)
		os.MkdirAll(filepath.Join(project, ".devcontainer"), 0o755)
		gitProject(t, project, map[string]string{
			"values.sh":                "value1=wrong\n",
			".devcontainer/Dockerfile": "FROM " + img + "\nCOPY values.sh /opt/values.sh\n",
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": ".."},
				"postCreateCommand": "cat values.sh > /tmp/seen-at-create && git -c safe.directory='*' branch --show-current >> /tmp/seen-at-create"}`,
		})
		if r := run("up", "--detach", "--no-browser", project); r.code != 0 {
			t.Fatalf("cove up: %d\n%s", r.code, r.stderr)
		}
		t.Cleanup(func() { run("task", "discard", "t1", project); run("rm", "-f", project) })
		srv := llmtest.New(t)
		srv.Push(
			toolCall("b", "bash", map[string]any{"command": "cat /opt/values.sh /tmp/seen-at-create && git -c safe.directory='*' status --porcelain && git -c safe.directory='*' branch --show-current"}),
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Built."})},
		)
		out, said, err := agentWith(cove, srv, "--yes", "--task", "t1", "-p", "what did the build copy?", project)
		if err != nil || out != "Built.\n" {
			t.Fatalf("cove agent --task t1: %v, %q\n%s", err, out, said)
		}
		if rs := srv.Requests(); len(rs) != 2 || !strings.Contains(strings.Join(rs[1].ToolResults(t), "\n"), "value1=wrong\nvalue1=wrong\ncove/task/t1\ncove/task/t1") {
			t.Errorf("the task's image, its postCreateCommand's view, its tree (the build's copy of values.sh, what postCreate saw, a clean status, the branch): %d requests\n%s", len(rs), said)
		}
		if !strings.Contains(said, "(its files written from the base's archive: its workspace needs them to start)") {
			t.Errorf("cove agent --task t1 on ext4 with a build from the project says: %q", said)
		}
	})
}

// TestTaskMadeAfterAFailedStart: a task whose workspace failed to start
// (its image could not be pulled) is made when cove agent --task runs
// again: its branch and files are there (Record.Pending); before, the
// second run found the task's record and ran the agent in a tree holding
// only .devcontainer. As root and rootless.
func TestTaskMadeAfterAFailedStart(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git here to make the test's project")
	}
	bothWays(t, func(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd) {
		run := runner(t, cove)
		img := gitImage(t)
		gitProject(t, project, map[string]string{"values.sh": "value1=wrong\n"})
		if r := run("up", "--detach", "--no-browser", "--image", img, project); r.code != 0 {
			t.Fatalf("cove up: %d\n%s", r.code, r.stderr)
		}
		t.Cleanup(func() { run("task", "discard", "t1", project); run("rm", "-f", project) })
		srv := llmtest.New(t)
		missing := testregistry.Addr(t) + "/test/no-such-image:1"
		if _, said, err := agentWith(cove, srv, "--yes", "--image", missing, "--task", "t1", "-p", "first", project); err == nil || !strings.Contains(said, "no-such-image") {
			t.Fatalf("cove agent --task t1 with an image that is not there: %v\n%s", err, said)
		}
		srv.Push(
			toolCall("b", "bash", map[string]any{"command": "cat values.sh && git -c safe.directory='*' branch --show-current"}),
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Done."})},
		)
		out, said, err := agentWith(cove, srv, "--yes", "--image", img, "--task", "t1", "-p", "again", project)
		if err != nil || out != "Done.\n" {
			t.Fatalf("cove agent --task t1 again: %v, %q\n%s", err, out, said)
		}
		if rs := srv.Requests(); len(rs) != 2 || !strings.Contains(strings.Join(rs[1].ToolResults(t), "\n"), "value1=wrong\ncove/task/t1") {
			t.Errorf("the task after its failed first start (its files, its branch): %d requests\n%s", len(rs), said)
		}
	})
}
