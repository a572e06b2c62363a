package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
)

// TestBrowserIDEWorkbench checks the IDE as a VS Code user works in it,
// in Chromium at 1280×800 and at 800×600 (ide/web/test/workbench.mjs):
// keys that reach the IDE from the terminal (Ctrl+Shift+`, Ctrl+P, the
// command palette, Ctrl+B, Ctrl+J), panels dragged to a size that a
// reload keeps, a search hit selecting the match, Makefile and fenced
// Markdown highlighted, a Markdown preview that keeps HTML as text, the
// status bar (Ln, Col, language, the branch from .git/HEAD), the favicon,
// readable ANSI colours and inputs on the light theme. Then the launcher
// is stopped with Ctrl-C: the app window closes, the other windows say
// the workspace stopped and keep their unsaved changes. A second launcher
// is killed outright: its windows find out by themselves. A third one's
// workspace is stopped with cove stop: every window stays and says so.
// COVE_SCREENSHOTS=DIR saves the IDE at both sizes there (docs/).
func TestBrowserIDEWorkbench(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	node := browserTestTools(t)
	ref := testregistry.Push(t, addr, layered(t))
	project := t.TempDir()
	for name, body := range map[string]string{
		"hello.txt": "hi\n",
		"notes.md": "# Notes\n\nline two\nfind needle-77 here\n\n```sh\necho \"fenced\" | wc -c\n```\n\n" +
			"<img src=x onerror=alert(1)> [bad](javascript:alert(1)) [site](https://example.com/)\n",
		"Makefile": "# build the tool\nCC ?= cc\n\nbuild: main.c\n\t$(CC) -o app main.c # compile\n\n.PHONY: build\n",
		"main.c":   "#include <stdio.h>\n\nint main(void) {\n\tputs(\"hello from cove\");\n\treturn 0;\n}\n",
	} {
		os.WriteFile(filepath.Join(project, name), []byte(body), 0o644)
	}
	if out, err := exec.Command("git", "init", "-q", "-b", "ux-branch", project).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	llm := llmtest.New(t)
	llm.Push(llmtest.Response{Events: llmtest.OpenAIChunks("stop",
		map[string]any{"content": "The **Makefile** builds `app` from `main.c` with `$(CC)`:\n\n- `make build` compiles it\n- `CC` defaults to `cc`\n"})})
	env := []string{"COVE_BASE_URL=" + llm.URL(), "COVE_MODEL=test-model"}
	root := t.TempDir()

	// The launcher stopped on purpose (Ctrl-C).
	up, url := startUpEnv(t, root, ref, project, env)
	runWorkbench(t, node, []string{url, "main", project}, func(what string) {
		if what == "interrupt" {
			up.Process.Signal(syscall.SIGINT)
		}
	})
	if _, ok := waitExit(up, 20*time.Second); !ok {
		t.Fatalf("the launcher did not end after Ctrl-C: %s", upErr(t))
	}

	// A launcher that dies without a word; a project without git.
	bare := t.TempDir()
	os.WriteFile(filepath.Join(bare, "hello.txt"), []byte("hi\n"), 0o644)
	up2, url2 := startUpEnv(t, root, ref, bare, env)
	runWorkbench(t, node, []string{url2, "killed", bare}, func(what string) {
		if what == "kill" {
			up2.Process.Kill()
		}
	})
	waitExit(up2, 20*time.Second)

	// The workspace stopped from elsewhere (cove stop): the launcher says
	// so and ends; its windows stay, app windows too, saying why.
	up3, url3 := startUpEnv(t, root, ref, bare, env)
	runWorkbench(t, node, []string{url3, "stopped", bare}, func(what string) {
		if what == "stop" {
			if r := runProc(t, root, "", "stop", workspace.Name(bare)); r.code != 0 {
				t.Errorf("cove stop: %+v", r)
			}
		}
	})
	if _, ok := waitExit(up3, 20*time.Second); !ok {
		t.Fatalf("the launcher did not end after cove stop: %s", upErr(t))
	}
}

// runWorkbench runs workbench.mjs with args; a line "cove-test: WHAT" it
// prints is for act to do (stop the launcher), and it must end with "ok".
func runWorkbench(t *testing.T, node string, args []string, act func(string)) {
	t.Helper()
	cmd := exec.Command(node, append([]string{"../../ide/web/test/workbench.mjs"}, args...)...)
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if what, ok := strings.CutPrefix(sc.Text(), "cove-test: "); ok {
			act(what)
		}
	}
	if err := cmd.Wait(); err != nil || len(lines) == 0 || lines[len(lines)-1] != "ok" {
		t.Fatalf("workbench %s: %v\n%s\n%s\nlauncher: %s", args[1], err, strings.Join(lines, "\n"), errb.String(), upErr(t))
	}
}
