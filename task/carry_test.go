package task

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/workspace"
)

// hostShell is a workspace whose commands run here, in dir; the first
// drops of them get an empty standard input, as a cluster's exec may
// (kubernetes/kubernetes#112834).
type hostShell struct {
	workspace.Workspace // the rest is not called
	dir                 string
	drops               int
}

func (h *hostShell) Name() string { return "host-shell" }

func (h *hostShell) Exec(ctx context.Context, req container.ExecRequest, stdio [3]*os.File) (int, error) {
	cmd := exec.CommandContext(ctx, req.Args[0], req.Args[1:]...)
	cmd.Dir = h.dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio[0], stdio[1], stdio[2]
	if h.drops > 0 {
		h.drops--
		cmd.Stdin = strings.NewReader("")
	}
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// TestCarryThroughFileWritesAgainWhatWasLost: a diff whose first
// delivery lost its standard input arrives whole on the next; one lost
// every time is an error that says so, never an empty file taken for
// "nothing to apply".
func TestCarryThroughFileWritesAgainWhatWasLost(t *testing.T) {
	ctx := context.Background()
	from := &hostShell{dir: t.TempDir()}
	patch := "diff --git a/v b/v\n-value=wrong\n+value=right\n"
	argv := []string{"printf", "%s", patch}
	dest := filepath.Join(t.TempDir(), "task.patch")

	to := &hostShell{dir: t.TempDir(), drops: 1}
	if err := carryThroughFile(ctx, from, argv, to, dest, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); string(got) != patch {
		t.Errorf("after one lost delivery %s holds %q, want %q", dest, got, patch)
	}

	to = &hostShell{dir: t.TempDir(), drops: 3}
	err := carryThroughFile(ctx, from, argv, to, dest, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "lost on the way") {
		t.Errorf("lost three times: %v, want an error saying so", err)
	}

	// A workspace that writes without end is cut off at the bound.
	to = &hostShell{dir: t.TempDir()}
	err = carryThroughFile(ctx, from, []string{"sh", "-c", "yes diff"}, to, dest, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "too much to carry") {
		t.Errorf("an endless diff: %v, want it refused", err)
	}
}

// TestDeliverMakesAgainWhatWasLost: what is made as it goes (the
// project's history as a tar) is made again for the next try when a
// delivery lost it, and an error of its own making stops the tries.
func TestDeliverMakesAgainWhatWasLost(t *testing.T) {
	ctx := context.Background()
	dest := filepath.Join(t.TempDir(), "history.tar")
	want := strings.Repeat("history ", 100_000) // past a pipe's buffer
	opened := 0
	open := func() (io.ReadCloser, error) {
		opened++
		pr, pw := io.Pipe()
		go func() {
			_, err := io.Copy(pw, strings.NewReader(want))
			pw.CloseWithError(err)
		}()
		return pr, nil
	}
	to := &hostShell{dir: t.TempDir(), drops: 2}
	if err := deliver(ctx, to, dest, open); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); string(got) != want || opened != 3 {
		t.Errorf("after two lost deliveries: %d bytes there (want %d), made %d times (want 3)", len(got), len(want), opened)
	}

	broken := func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte("half"))
			pw.CloseWithError(errors.New("the project's .git went away"))
		}()
		return pr, nil
	}
	err := deliver(ctx, &hostShell{dir: t.TempDir()}, dest, broken)
	if err == nil || !strings.Contains(err.Error(), "went away") {
		t.Errorf("a source that fails: %v, want its error", err)
	}
}

// TestRunReadsTheOutputAlone: what a command warns on its standard error,
// before or after its value (a cluster's exec brings the two streams in
// no order), is never part of the value run returns; a command that
// fails says both.
func TestRunReadsTheOutputAlone(t *testing.T) {
	ctx := context.Background()
	ws := &hostShell{dir: t.TempDir()}
	const c = "0123456789abcdef0123456789abcdef01234567"
	for _, script := range []string{
		"echo warning: before >&2; echo " + c,
		"echo " + c + "; echo warning: after >&2",
	} {
		out, err := run(ctx, ws, nil, 1<<10, "sh", "-c", script)
		if err != nil || string(out) != c+"\n" {
			t.Errorf("%s: %q, %v; want the commit alone", script, out, err)
		}
	}
	_, err := run(ctx, ws, nil, 1<<10, "sh", "-c", "echo partial; echo fatal: broken >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "partial") || !strings.Contains(err.Error(), "fatal: broken") || !strings.Contains(err.Error(), "exited 3") {
		t.Errorf("a failed command's error: %v", err)
	}
}
