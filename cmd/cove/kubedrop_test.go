package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/netcut"
	"github.com/cove-sh/cove/internal/testbuf"
	"github.com/cove-sh/cove/workspace"
	"github.com/cove-sh/cove/workspace/kube"
)

// TestKubeSurvivesADrop: cove up --kube, with its page open in Chromium,
// while every connection between the launcher and the API server drops
// at once with no reset (a laptop on another Wi-Fi, a NAT entry lost, a
// VPN down and up; new connections go through). Within about 10 s, not
// client-go's minute: a file saved here is in the Pod and one made in the
// Pod is here, the user is told once that the connection was lost and
// once that it is back, the page's terminal is the same shell again, and
// a save in the editor reaches the laptop.
func TestKubeSurvivesADrop(t *testing.T) {
	kc, ref, k := kubeTest(t)
	node := browserTestTools(t)
	relay := netcut.New(t, strings.TrimPrefix(k.Server(), "https://"))
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "main.c"), []byte("int main(void) { return 0; }\n"), 0o644)
	name := workspace.Name(project)
	t.Cleanup(func() { k.Remove(context.Background(), name) })
	_, url := startUp(t, t.TempDir(), ref, project, "--kube", "--kubeconfig", relay.Kubeconfig(t, kc), "--grace", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pod, err := k.Pod(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The test's own view of the Pod, not through the relay.
	inPod := func(script string) string {
		var b strings.Builder
		pod.Exec(ctx, []string{"sh", "-c", script}, kube.ExecOptions{Stdout: &b})
		return b.String()
	}
	here := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(project, name))
		return string(b)
	}
	within := func(what string, since time.Time, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Since(since) > 15*time.Second {
				t.Fatalf("%s: not within 15 s; cove up said %s", what, upErr(t))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s: %v after the drop", what, time.Since(since).Round(100*time.Millisecond))
	}

	browser := exec.Command(node, "../../ide/web/test/kubedrop.mjs", url)
	tell, err := browser.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := browser.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := testbuf.New()
	browser.Stderr = errb
	if err := browser.Start(); err != nil {
		t.Fatal(err)
	}
	defer browser.Process.Kill()
	said := bufio.NewScanner(stdout)
	if !said.Scan() || said.Text() != "ready" {
		browser.Wait()
		t.Fatalf("the page before the drop: %q %s; cove up said %s", said.Text(), errb, upErr(t))
	}

	relay.Drop()
	dropped := time.Now()
	os.WriteFile(filepath.Join(project, "after.txt"), []byte("saved here after the drop\n"), 0o644)
	inPod("echo made there after the drop > /workspace/there.txt")
	tell.Write([]byte("dropped\n"))
	tell.Close()
	within("a local save after the drop, in the Pod", dropped, func() bool { return inPod("cat /workspace/after.txt") == "saved here after the drop\n" })
	within("a file made in the Pod after the drop, here", dropped, func() bool { return here("there.txt") == "made there after the drop\n" })

	var page []string
	for said.Scan() {
		page = append(page, said.Text())
		t.Logf("page: %s", said.Text())
	}
	if err := browser.Wait(); err != nil || len(page) == 0 || page[len(page)-1] != "ok" {
		t.Fatalf("the page after the drop: %v %q %s; cove up said %s", err, page, errb, upErr(t))
	}
	within("the editor's save after the drop, here", dropped, func() bool {
		return here("main.c") == "int main(void) { return 0; }\n// saved after the drop"
	})
	said2 := upErr(t)
	if n, m := strings.Count(said2, "lost the connection to the workspace's files"), strings.Count(said2, "synchronised again"); n != 1 || m != 1 {
		t.Errorf("cove up said the loss %d times and the return %d times, want once each:\n%s", n, m, said2)
	}
}
