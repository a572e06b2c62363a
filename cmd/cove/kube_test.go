package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
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

	"github.com/coder/websocket"
	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/task"
	"github.com/cove-sh/cove/workspace"
	"github.com/cove-sh/cove/workspace/kube"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testKubeconfig is the test cluster's (scripts/kube/cluster.sh), which
// scripts/test.sh starts; in CI its absence is a failure.
func testKubeconfig(t *testing.T) string {
	t.Helper()
	kc := os.Getenv("COVE_TEST_KUBECONFIG")
	if kc == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("COVE_TEST_KUBECONFIG is not set: scripts/test.sh starts the test cluster")
		}
		t.Skip("COVE_TEST_KUBECONFIG is not set (scripts/kube/cluster.sh up)")
	}
	return kc
}

// kubeTest is what a test on the cluster starts with: the test
// cluster's kubeconfig, the test image pushed to the registry, and a
// client for the default namespace.
func kubeTest(t *testing.T) (kubeconfig, ref string, k *kube.Cluster) {
	t.Helper()
	needRoot(t)
	kc := testKubeconfig(t)
	ref = testregistry.Push(t, testregistry.Addr(t), layered(t))
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	return kc, ref, k
}

// TestUpKube: cove up --kube serves a workspace that runs as a Pod: the
// IDE's API and terminals answer from the Pod through the launcher's
// proxy, a local save is in the Pod within a second or two and a file made
// in the Pod is here as soon, and Ctrl-C brings the last changes home and
// stops the Pod, keeping its volume.
func TestUpKube(t *testing.T) {
	t.Parallel()
	needRoot(t)
	kc := testKubeconfig(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "hello.c"), []byte("int main;\n"), 0o644)
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	// The panel's model: one command, then an answer.
	llm := llmtest.New(t)
	llm.Push(
		llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": "b1", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"echo panel-$((6*7)) $(test -f /.cove/ide.pid && echo in-the-pod)"}`}}}})},
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Ran it."})},
	)
	start := time.Now()
	cmd, url := startUpEnv(t, t.TempDir(), ref, project, []string{"COVE_BASE_URL=" + llm.URL(), "COVE_MODEL=test-model"}, "--kube", "--kubeconfig", kc, "--grace", "0", "--memory", "96m")
	t.Logf("cove up --kube answered in %v", time.Since(start).Round(time.Millisecond))
	base, token, _ := strings.Cut(url, "/?token=")
	get := func(path string) (int, string) { return getWithToken(t, base, token, path) }
	if code, body := get("/api/tree"); code != 200 || !strings.Contains(body, `"hello.c"`) {
		t.Fatalf("the Pod's tree through the proxy: %d %s", code, body)
	}

	// A terminal runs in the Pod, under the Pod's limit.
	h := http.Header{"X-Cove-Token": {token}, "Origin": {base}}
	ws, _, err := websocket.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+"/api/term/new", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("a terminal: %v; cove up said %s", err, upErr(t))
	}
	defer ws.CloseNow()
	ws.Write(context.Background(), websocket.MessageBinary, append([]byte{0}, "echo in-$(cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)-$(pwd)-$(test -f /.cove/ide.pid && echo pod)\n"...))
	want := "in-100663296-/workspace-pod"
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for !strings.Contains(out.String(), want) {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("terminal: %v; output so far %q", err, out.String())
		}
		if msg[0] == 0x10 {
			out.Write(msg[9:])
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")

	// The agent panel: its command runs in the Pod.
	p := openPanel(t, url, 0)
	p.until("live")
	p.send(map[string]any{"type": "mode", "text": "yolo"})
	p.until("mode")
	p.send(map[string]any{"type": "prompt", "text": "run something"})
	p.until("done")
	if reqs := llm.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "panel-42 in-the-pod") {
		t.Errorf("the panel's command did not run in the Pod: %d requests", len(reqs))
	}

	// Both ways, within the sync's rounds.
	pod, err := k.Ensure(ctx, kube.Spec{Name: name, Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	inPod := func(script string) string {
		var b strings.Builder
		pod.Exec(ctx, []string{"sh", "-c", script}, kube.ExecOptions{Stdout: &b})
		return b.String()
	}
	os.WriteFile(filepath.Join(project, "hello.c"), []byte("int main(void) { return 0; }\n"), 0o644)
	saved := time.Now()
	for inPod("cat /workspace/hello.c") != "int main(void) { return 0; }\n" {
		if time.Since(saved) > 10*time.Second {
			t.Fatal("a local save did not reach the Pod")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a local save was in the Pod after %v", time.Since(saved).Round(time.Millisecond))
	inPod("echo made in the pod > /workspace/made.txt")
	made := time.Now()
	for {
		if b, _ := os.ReadFile(filepath.Join(project, "made.txt")); string(b) == "made in the pod\n" {
			break
		}
		if time.Since(made) > 10*time.Second {
			t.Fatal("a file made in the Pod did not arrive")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a file made in the Pod was here after %v", time.Since(made).Round(time.Millisecond))

	// cove exec and ps reach it too.
	root := t.TempDir()
	kc2 := []string{"--kube", "--kubeconfig", kc}
	if r := runProc(t, root, "", append(append([]string{"exec"}, kc2...), name, "sh", "-c", "cat hello.c; echo err >&2; exit 7")...); r.code != 7 ||
		r.stdout != "int main(void) { return 0; }\n" || !strings.Contains(r.stderr, "err") {
		t.Errorf("cove exec --kube: %+v", r)
	}
	if r := runProc(t, root, "", append([]string{"ps"}, kc2...)...); !regexp.MustCompile(name + `\s+0\s+` + regexp.QuoteMeta(ref) + `\s+running\s+\S+ \S+\s+default on https://\S+`).MatchString(r.stdout) {
		t.Errorf("cove ps --kube: %+v", r)
	}

	// Ctrl-C: the last change made just before it comes home, the Pod
	// goes, the volume stays.
	inPod("echo last > /workspace/last.txt")
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if b, _ := os.ReadFile(filepath.Join(project, "last.txt")); string(b) != "last\n" {
		t.Errorf("the change made just before Ctrl-C: %q; stderr %s", b, upErr(t))
	}
	ws2, err := k.List(context.Background())
	if err != nil || !slices.Contains(ws2, kube.Workspace{Name: name, Phase: "stopped"}) {
		t.Errorf("after Ctrl-C the cluster has %+v (%v), want %s stopped with its volume", ws2, err, name)
	}
}

// TestRmKube: cove rm --kube refuses a running workspace without -f, and
// leaves nothing of it in the cluster.
func TestRmKube(t *testing.T) {
	t.Parallel()
	kc, ref, k := kubeTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("rm%d", time.Now().UnixNano()%1e6)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	if _, err := k.Ensure(ctx, kube.Spec{Name: name, Image: ref, Volume: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if r := runProc(t, root, "", "rm", "--kube", "--kubeconfig", kc, name); r.code == 0 || !strings.Contains(r.stderr, "is running") {
		t.Errorf("rm of a running workspace without -f: %+v", r)
	}
	if r := runProc(t, root, "", "rm", "-f", "--kube", "--kubeconfig", kc, name); r.code != 0 {
		t.Fatalf("rm -f: %+v", r)
	}
	list, err := k.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range list {
		if w.Name == name {
			t.Errorf("after rm the cluster still has %+v", w)
		}
	}
}

// TestBrowserKube: the IDE in Chromium on a cove up --kube workspace
// (ide/web/test/kube.mjs): the tree is the Pod's copy, a terminal runs in
// the Pod, and a file saved in the editor reaches the laptop's disk.
func TestBrowserKube(t *testing.T) {
	t.Parallel()
	needRoot(t)
	kc := testKubeconfig(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "main.c"), []byte("int main(void) { return 0; }\n"), 0o644)
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Remove(context.Background(), workspace.Name(project)) })
	_, url := startUp(t, t.TempDir(), ref, project, "--kube", "--kubeconfig", kc, "--grace", "0")
	out, err := exec.Command(node, "../../ide/web/test/kube.mjs", url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("browser test: %v\n%s\nlauncher: %s", err, out, upErr(t))
	}
	want := "int main(void) { return 0; }\n// saved in the browser"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(project, "main.c"))
		if string(b) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser's save, on the laptop: %q", b)
		}
	}
}

// TestAgentKube: cove agent --kube -p fixes a failing test with the
// scripted model: its commands run in the Pod, its edit (made here) is in
// the Pod before the next command, and what a command writes in the Pod
// is on the laptop's disk when the agent is done.
func TestAgentKube(t *testing.T) {
	t.Parallel()
	needRoot(t)
	kc := testKubeconfig(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "greet.sh"), []byte("echo helo\n"), 0o644)
	os.WriteFile(filepath.Join(project, "test.sh"), []byte(`[ "$(sh greet.sh)" = hello ] && echo PASS || { echo FAIL; exit 1; }`+"\n"), 0o644)
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Remove(context.Background(), workspace.Name(project)) })
	srv := llmtest.New(t)
	toolCall := func(id, name string, args any) llmtest.Response {
		b, _ := json.Marshal(args)
		return llmtest.Response{Events: llmtest.OpenAIChunks("tool_calls", map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function", "function": map[string]any{"name": name, "arguments": string(b)}}}})}
	}
	srv.Push(
		toolCall("c1", "bash", map[string]any{"command": "sh test.sh"}),
		toolCall("c2", "edit", map[string]any{"path": "greet.sh", "edits": []any{map[string]any{"old": "echo helo", "new": "echo hello"}}}),
		toolCall("c3", "bash", map[string]any{"command": "sh test.sh > result.txt; cat result.txt; test -f /.cove/ide.pid && echo in-the-pod"}),
		llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": "Fixed the typo."})},
	)
	cmd, out, errb := coveProc(t.TempDir(), "agent", "--kube", "--kubeconfig", kc, "--image", ref, "--yes", "-p", "make test.sh pass", project)
	cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model")
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err != nil {
		t.Fatalf("cove agent --kube: %v\n%s", err, errb)
	}
	if out.String() != "Fixed the typo.\n" {
		t.Errorf("stdout %q", out)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests; stderr %s", len(reqs), errb)
	}
	results := reqs[3].ToolResults(t)
	if len(results) != 3 || results[0] != "FAIL\n[exit status 1]" || !strings.HasPrefix(results[2], "PASS\nin-the-pod") {
		t.Fatalf("tool results the model saw: %q\nstderr: %s", results, errb)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "result.txt")); string(b) != "PASS\n" {
		t.Errorf("what the command wrote in the Pod, on the laptop: %q", b)
	}
}

// TestShellKube: echo CMDS | cove shell --kube runs them in the Pod, in
// the project, and what they write is on the laptop when it returns.
func TestShellKube(t *testing.T) {
	t.Parallel()
	needRoot(t)
	kc := testKubeconfig(t)
	ref := testregistry.Push(t, testregistry.Addr(t), layered(t))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "in.txt"), []byte("from the laptop\n"), 0o644)
	k, err := kube.Connect(kube.Config{Kubeconfig: kc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Remove(context.Background(), workspace.Name(project)) })
	r := runProc(t, t.TempDir(), "cat in.txt; echo shell-$((6*7)) > from-shell.txt; test -f /.cove/ide.pid && echo in-the-pod\n",
		"shell", "--kube", "--kubeconfig", kc, "--image", ref, project)
	if r.code != 0 || r.stdout != "from the laptop\nin-the-pod\n" {
		t.Fatalf("cove shell --kube: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(project, "from-shell.txt")); string(b) != "shell-42\n" {
		t.Errorf("what the shell wrote, on the laptop: %q", b)
	}
}

// TestDevcontainerKube: on a cluster, devcontainer.json's image, its
// environment (with ${containerEnv:…} resolved against the Pod's image)
// and its lifecycle commands apply, the create commands once a volume;
// what a Pod cannot take is said; a build is refused before anything
// starts; a failing create command stops the Pod and says which failed.
func TestDevcontainerKube(t *testing.T) {
	t.Parallel()
	kc, ref, k := kubeTest(t)
	project := t.TempDir()
	os.MkdirAll(filepath.Join(project, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(project, "setup.sh"), []byte("echo setup-ran-in-$(pwd) >> created.log\n"), 0o644)
	os.WriteFile(filepath.Join(project, ".devcontainer", "devcontainer.json"), []byte(`{
		// as projects write it
		"image": "`+ref+`",
		"containerEnv": {"TOOLPATH": "/opt/tool:${containerEnv:PATH}", "QUOTED": "it's $HOME"},
		"remoteEnv": {"KUBERNETES_SERVICE_HOST": null},
		"onCreateCommand": "echo oncreate >> created.log",
		"postCreateCommand": ["sh", "./setup.sh"],
		"postStartCommand": {"a": "echo start-a", "b": "echo start-b"},
		"mounts": ["type=volume,source=cache,target=/cache"],
		"forwardPorts": [3000],
		"runArgs": ["-e", "FROM_RUNARGS=yes", "--shm-size=100m", "--tmpfs", "/scratch:size=2m", "--hostname", "box"],
	}`), 0o644)
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	root := t.TempDir()
	kflags := []string{"--kube", "--kubeconfig", kc}
	script := `echo "T=$TOOLPATH"; echo "Q=$QUOTED"; echo "G=${KUBERNETES_SERVICE_HOST-unset}"; cat created.log; echo "R=$FROM_RUNARGS"; ` +
		`for m in /dev/shm /scratch; do grep " $m tmpfs " /proc/mounts | grep -oE 'size=[0-9]+k'; done` + "\n"
	r := runProc(t, root, script, append(append([]string{"shell"}, kflags...), project)...)
	if r.code != 0 {
		t.Fatalf("cove shell --kube: %+v", r)
	}
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "T=/opt/tool:") || !strings.Contains(lines[0], "/bin") ||
		lines[1] != "Q=it's $HOME" || lines[2] != "G=unset" || lines[3] != "oncreate" || lines[4] != "setup-ran-in-/workspace" ||
		strings.Join(lines[5:], ",") != "R=yes,size=102400k,size=2048k," {
		t.Errorf("the Pod's environment and create commands: %q\nstderr %s", r.stdout, r.stderr)
	}
	for _, want := range []string{"mounts, forwardPorts are not applied", "runArgs on a cluster: --hostname not applied", "start-a", "start-b", "onCreateCommand"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, r.stderr)
		}
	}
	// cove exec gets the workspace's environment too.
	if r := runProc(t, root, "", append(append([]string{"exec"}, kflags...), name, "sh", "-c", `echo "$QUOTED"`)...); r.stdout != "it's $HOME\n" {
		t.Errorf("cove exec --kube's environment: %+v", r)
	}
	// Again, the Pod running: the create commands do not run twice.
	r = runProc(t, root, "cat created.log\n", append(append([]string{"shell"}, kflags...), project)...)
	if r.code != 0 || r.stdout != "oncreate\nsetup-ran-in-/workspace\n" || strings.Contains(r.stderr, "onCreateCommand") || strings.Contains(r.stderr, "start-a") {
		t.Errorf("a second cove shell --kube: %+v", r)
	}

	// A build needs a registry: refused before anything starts.
	built := t.TempDir()
	os.MkdirAll(filepath.Join(built, ".devcontainer"), 0o755)
	os.WriteFile(filepath.Join(built, ".devcontainer", "Dockerfile"), []byte("FROM "+ref+"\n"), 0o644)
	os.WriteFile(filepath.Join(built, ".devcontainer", "devcontainer.json"), []byte(`{"build": {"dockerfile": "Dockerfile"}}`), 0o644)
	r = runProc(t, root, "true\n", append(append([]string{"shell"}, kflags...), built)...)
	if r.code == 0 || !strings.Contains(r.stderr, "builds its image (build)") || !strings.Contains(r.stderr, "--image") {
		t.Errorf("a build on --kube: %+v", r)
	}
	if list, _ := k.List(context.Background()); slices.ContainsFunc(list, func(w kube.Workspace) bool { return w.Name == workspace.Name(built) }) {
		t.Errorf("a refused build left %s in the cluster", workspace.Name(built))
	}

	// A failing create command: said with its status, the Pod stopped,
	// the volume kept.
	failing := t.TempDir()
	os.WriteFile(filepath.Join(failing, ".devcontainer.json"), []byte(`{"image": "`+ref+`", "postCreateCommand": "exit 3"}`), 0o644)
	t.Cleanup(func() { k.Remove(context.Background(), workspace.Name(failing)) })
	r = runProc(t, root, "true\n", append(append([]string{"shell"}, kflags...), failing)...)
	if r.code == 0 || !strings.Contains(r.stderr, "postCreateCommand (exit 3) failed with exit status 3") || !strings.Contains(r.stderr, "is stopped") {
		t.Errorf("a failing postCreateCommand on --kube: %+v", r)
	}
	if _, err := k.Pod(context.Background(), workspace.Name(failing)); err == nil {
		t.Errorf("the Pod runs on after its create command failed")
	}
}

// TestKubeChosenByDevcontainer: a project's devcontainer.json may choose
// a cluster (customizations.cove.kube), but the file is the project's: it
// takes effect only once the user trusts it; until then the workspace
// runs here, and that is said.
func TestKubeChosenByDevcontainer(t *testing.T) {
	t.Parallel()
	kc, ref, k := kubeTest(t)
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, ".devcontainer.json"), []byte(`{"image": "`+ref+`", "customizations": {"cove": {"kube": {"namespace": "default"}}}}`), 0o644)
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	root, home := t.TempDir(), t.TempDir()
	shell := func(args ...string) result {
		cmd, out, errb := coveProc(root, append(append([]string{"shell", "--kubeconfig", kc}, args...), project)...)
		cmd.Env = append(cmd.Env, "HOME="+home)
		cmd.Stdin = strings.NewReader("test -f /.cove/ide.pid && echo in-the-pod || echo here\n")
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return result{out.String(), errb.String(), code}
	}
	if r := shell(); r.code != 0 || r.stdout != "here\n" || !strings.Contains(r.stderr, "asks for the workspace to run on a Kubernetes cluster") {
		t.Fatalf("an untrusted choice of a cluster: %+v", r)
	}
	runProc(t, root, "", "stop", name)
	if r := shell("--trust"); r.code != 0 || r.stdout != "in-the-pod\n" {
		t.Fatalf("the trusted choice of a cluster: %+v", r)
	}
	if _, err := k.Pod(context.Background(), name); err != nil {
		t.Errorf("the chosen cluster has no Pod: %v", err)
	}
}

// TestUpKubeDetach: cove up --kube --detach leaves a launcher serving the
// Pod in the background; a second cove up --kube finds it (one launcher,
// one sync); cove stop --kube deletes the Pod and that launcher sees it
// and leaves.
func TestUpKubeDetach(t *testing.T) {
	t.Parallel()
	kc, ref, k := kubeTest(t)
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "a.txt"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(project, ".devcontainer.json"), []byte(`{"postAttachCommand": "echo attached >> attach.log"}`), 0o644)
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	root := t.TempDir()
	up := []string{"up", "--kube", "--kubeconfig", kc, "--detach", "--image", ref, project}
	r := runProc(t, root, "", up...)
	url := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("cove up --kube --detach: %+v", r)
	}
	base, token, _ := strings.Cut(url, "/?token=")
	if code, body := getWithToken(t, base, token, "/api/tree"); code != 200 || !strings.Contains(body, `"a.txt"`) {
		t.Fatalf("the detached launcher's proxy: %d %s", code, body)
	}
	recs, _ := filepath.Glob(filepath.Join(root, "run", "workspaces", "kube-*-"+name, "launcher.json"))
	if len(recs) != 1 {
		t.Fatalf("launcher records: %v", recs)
	}
	if r := runProc(t, root, "", up...); r.code != 0 || strings.TrimSpace(r.stdout) != url {
		t.Errorf("a second cove up --kube: %+v, want %s", r, url)
	}
	// Each window is a user attaching: postAttachCommand ran twice, and
	// the background launcher's sync brought its file here.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(project, "attach.log")); string(b) == "attached\nattached\n" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("attach.log after two windows: %q", b)
		}
	}
	// cove ps here lists it, where it runs, with its launcher's pid.
	if r := runProc(t, root, "", "ps"); !regexp.MustCompile(name + `\s+[1-9]\d*\s+running\s+\S+ \S+\s+default on https://`).MatchString(r.stdout) {
		t.Errorf("cove ps does not show the Pod served from here: %+v", r)
	}
	if r := runProc(t, root, "", "stop", "--kube", "--kubeconfig", kc, name); r.code != 0 {
		t.Fatalf("cove stop --kube: %+v", r)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(recs[0]); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(recs[0]), "launcher.log"))
			t.Fatalf("the detached launcher serves on after its Pod was deleted; its log: %s", b)
		}
	}
}

// TestKubeImageMetadata: on a cluster, the image's devcontainer.metadata
// label applies as locally (read from the registry by the host): its
// env and its create command, with no devcontainer.json in the project;
// the user it names is said not to apply.
func TestKubeImageMetadata(t *testing.T) {
	t.Parallel()
	kc, _, k := kubeTest(t)
	img, err := mutate.Config(layered(t), v1.Config{Cmd: []string{"sh"}, Env: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Labels: map[string]string{"devcontainer.metadata": `[{"remoteUser": "nobody", "containerEnv": {"FROM_LABEL": "yes"},
			"postCreateCommand": "echo label-created > label.txt"}]`}})
	if err != nil {
		t.Fatal(err)
	}
	ref := testregistry.Push(t, testregistry.Addr(t), img)
	project := t.TempDir()
	t.Cleanup(func() { k.Remove(context.Background(), workspace.Name(project)) })
	r := runProc(t, t.TempDir(), "echo \"label=$FROM_LABEL\"; cat label.txt\n", "shell", "--kube", "--kubeconfig", kc, "--image", ref, project)
	if r.code != 0 || r.stdout != "label=yes\nlabel-created\n" || !strings.Contains(r.stderr, "names a user (nobody)") {
		t.Fatalf("the image's metadata on a Pod: %+v", r)
	}
}

// TestTasksOnACluster: cove agent --kube --task makes each task a Pod of
// its own, with the project's history carried from its .git (which no
// Pod has) but nothing its .git leads to outside, nor a FIFO that would
// hang the carry: two agents (scripted models) work at once, each fixing
// a different failing test in the one file both change, each test
// passing in its own Pod while the project is untouched. Their Pods
// stopped, cove tasks still says their work; a diff starts the
// task's Pod again from its volume (history and all); the merge applies
// the task's diff to the project's files (home through the sync, for the
// user to commit), or says its conflict and leaves the hunk beside the
// file; a discard leaves no Pod, volume, tree or record. As root, and as
// a user (covetest) with their own kubeconfig.
func TestTasksOnACluster(t *testing.T) {
	t.Parallel() // its own workspaces' names: it waits on Pods beside the other tests
	needRoot(t)
	testKubeconfig(t)
	bothWays(t, tasksOnAClusterScenario)
}

func tasksOnAClusterScenario(t *testing.T, root, project string, cove func(args ...string) *exec.Cmd) {
	img := gitImage(t)
	k, err := kube.Connect(kube.Config{Kubeconfig: testKubeconfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The user's own kubeconfig, as they would have it: the test
	// cluster's, its keys in it (kubectl config view --flatten).
	cfg, err := clientcmd.LoadFromFile(testKubeconfig(t))
	must(t, err)
	must(t, clientcmdapi.FlattenConfig(cfg))
	kc := filepath.Join(root, "kubeconfig")
	must(t, clientcmd.WriteToFile(*cfg, kc))
	if fi, err := os.Stat(root); err == nil {
		st := fi.Sys().(*syscall.Stat_t)
		os.Chown(kc, int(st.Uid), int(st.Gid))
	}
	kflags := []string{"--kube", "--kubeconfig", kc}
	run := runner(t, cove)
	values := "value1=wrong\n#\n#\n#\nvalue2=wrong\n"
	os.Mkdir(filepath.Join(project, ".devcontainer"), 0o755)
	base := gitProject(t, project, map[string]string{
		"values.sh": values, "test1.sh": failingTest(1), "test2.sh": failingTest(2),
		".devcontainer/devcontainer.json": `{"image": "` + img + `"}`,
	})
	// What the project's .git leads to outside it is not carried; a FIFO
	// there does not stop the carry.
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret\n"), 0o600)
	must(t, os.Symlink(secret, filepath.Join(project, ".git", "refs", "heads", "evil")))
	must(t, os.Symlink(filepath.Dir(secret), filepath.Join(project, ".git", "objects", "evil")))
	must(t, syscall.Mkfifo(filepath.Join(project, ".git", "objects", "fifo"), 0o644))
	m := &task.Manager{Project: project, Data: filepath.Join(root, "data")}
	t.Cleanup(func() {
		for _, d := range []string{project, m.Tree("t1"), m.Tree("t2")} {
			k.Remove(context.Background(), workspace.Name(d))
		}
	})

	var wg sync.WaitGroup
	for i := 1; i <= 2; i++ {
		srv := llmtest.New(t)
		srv.Push(
			toolCall("e", "edit", map[string]any{"path": "values.sh", "edits": []any{map[string]any{"old": fmt.Sprintf("value%d=wrong", i), "new": fmt.Sprintf("value%d=right", i)}}}),
			toolCall("b", "bash", map[string]any{"command": fmt.Sprintf("sh test%d.sh; sh test%d.sh; ls .git/objects/evil .git/refs/heads/evil 2>&1 | wc -l", i, 3-i)}),
			llmtest.Response{Events: llmtest.OpenAIChunks("stop", map[string]any{"content": fmt.Sprintf("Fixed test %d.", i)})},
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := cove(append(append([]string{"agent", "--yes"}, kflags...), "--task", fmt.Sprintf("t%d", i), "-p", fmt.Sprintf("fix test %d", i), project)...)
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			cmd.Env = append(cmd.Env, "COVE_BASE_URL="+srv.URL(), "COVE_MODEL=test-model", "COVE_API_KEY=sk-test")
			cmd.Stdin = strings.NewReader("")
			timer := time.AfterFunc(8*time.Minute, func() { cmd.Process.Kill() })
			defer timer.Stop()
			if err := cmd.Run(); err != nil || out.String() != fmt.Sprintf("Fixed test %d.\n", i) {
				t.Errorf("task t%d: %v, %q\n%s", i, err, out.String(), errb.String())
				return
			}
			// Its own test passes in its Pod, the other's still fails
			// there; neither of the .git's links arrived.
			want := fmt.Sprintf("edited values.sh\nok %d\ntest %d: value%d is wrong\n2", i, 3-i, 3-i)
			if rs := srv.Requests(); len(rs) != 3 || strings.Join(rs[2].ToolResults(t), "\n") != want {
				t.Errorf("task t%d: in its Pod: %q, want %q\n%s", i, strings.Join(rs[len(rs)-1].ToolResults(t), "\n"), want, errb.String())
			}
			if !strings.Contains(errb.String(), fmt.Sprintf("task t%d: branch cove/task/t%d from %s", i, i, base[:12])) {
				t.Errorf("task t%d: %s", i, errb.String())
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if st := hostGit(t, project, "status", "--porcelain"); st != "" {
		t.Errorf("the project's tree changed before any merge: %s", st)
	}
	// Stopped (their Pods gone, their volumes kept), as after a restart.
	for i := 1; i <= 2; i++ {
		if r := run(append(append([]string{"stop"}, kflags...), workspace.Name(m.Tree(fmt.Sprintf("t%d", i))))...); r.code != 0 {
			t.Fatalf("cove stop --kube t%d's workspace: %d\n%s", i, r.code, r.stderr)
		}
	}
	var listed []struct {
		Name, Status, Diff, Tests string
		Commits                   int
	}
	r := run(append(append([]string{"tasks", "--json"}, kflags...), project)...)
	json.Unmarshal([]byte(r.stdout), &listed)
	if len(listed) != 2 {
		t.Fatalf("cove tasks --kube: %+v\n%s", listed, r.stderr)
	}
	for _, l := range listed {
		if l.Status != "stopped" || l.Commits != 1 || !strings.Contains(l.Diff, "1 file changed, 1 insertion(+), 1 deletion(-)") || l.Tests != "-" {
			t.Errorf("cove tasks --kube: %+v", l)
		}
	}

	// The task's Pod again, from its volume: its history is there.
	r = run(append(append([]string{"task", "diff"}, kflags...), "t1", project)...)
	if r.code != 0 || !strings.Contains(r.stdout, "\n-value1=wrong\n+value1=right\n") || strings.Contains(r.stdout, "value2=right") {
		t.Fatalf("cove task diff --kube t1: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(append(append([]string{"task", "merge"}, kflags...), "t1", project)...)
	if r.code != 0 {
		t.Fatalf("cove task merge --kube t1: %d\n%s", r.code, r.stderr)
	}
	want := strings.Replace(values, "value1=wrong", "value1=right", 1)
	if got, _ := os.ReadFile(filepath.Join(project, "values.sh")); string(got) != want {
		t.Errorf("the project after merging t1 on the cluster:\n%s\nwant\n%s", got, want)
	}
	if st := hostGit(t, project, "status", "--porcelain"); st != " M values.sh\n" {
		t.Errorf("the project's status after the merge: %q", st)
	}
	// t2's change, where the user changed the line meanwhile: the
	// conflict is said, its hunk left beside the file, the rest kept.
	changed := strings.Replace(want, "value2=wrong", "value2=mine", 1)
	must(t, os.WriteFile(filepath.Join(project, "values.sh"), []byte(changed), 0o644))
	r = run(append(append([]string{"task", "merge"}, kflags...), "t2", project)...)
	if r.code == 0 || !strings.Contains(r.stderr, "the merge has conflicts") || !strings.Contains(r.stderr, "FILE.rej") {
		t.Errorf("cove task merge --kube t2 on a changed line: %d\n%s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(project, "values.sh")); string(got) != changed {
		t.Errorf("the project's values.sh after a conflict:\n%s", got)
	}
	if rej, _ := os.ReadFile(filepath.Join(project, "values.sh.rej")); !strings.Contains(string(rej), "+value2=right") {
		t.Errorf("the rejected hunk at home: %q", rej)
	}
	// t2 stopped first: its discard starts no Pod to remove it.
	if r := run(append(append([]string{"stop"}, kflags...), workspace.Name(m.Tree("t2")))...); r.code != 0 {
		t.Fatalf("cove stop --kube t2's workspace: %d\n%s", r.code, r.stderr)
	}
	for _, n := range []string{"t1", "t2"} {
		r := run(append(append([]string{"task", "discard"}, kflags...), n, project)...)
		if r.code != 0 {
			t.Fatalf("cove task discard --kube %s: %d\n%s", n, r.code, r.stderr)
		}
		if n == "t2" && strings.Contains(r.stderr, "starting") {
			t.Errorf("cove task discard --kube of a stopped task started its Pod:\n%s", r.stderr)
		}
		name := workspace.Name(m.Tree(n))
		if list, _ := k.List(t.Context()); slices.ContainsFunc(list, func(w kube.Workspace) bool { return w.Name == name }) {
			t.Errorf("a discarded task's Pod or volume is left: %s", name)
		}
		if _, err := os.Lstat(m.Tree(n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a discarded task's tree is left: %v", err)
		}
		if _, err := m.Get(n); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a discarded task's record is left: %v", err)
		}
	}
}
