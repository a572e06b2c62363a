package main

import (
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/testbuf"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/creack/pty"
)

// TestExecInteractiveTerminal: `cove exec -it NAME sh` in a terminal gets
// what is typed (a command, then Ctrl-D ends it), and a second one ends on
// SIGTERM, as podman exec does.
func TestExecInteractiveTerminal(t *testing.T) {
	t.Parallel()
	needRoot(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	root := t.TempDir()
	if r := runProc(t, root, "", "run", "-d", "--name", "box", ref, "sleep", "300"); r.code != 0 {
		t.Fatalf("run -d: %+v", r)
	}
	t.Cleanup(func() { runProc(t, root, "", "rm", "-f", "box") })
	start := func() (*testbuf.Buffer, func([]byte), func(time.Duration) (int, bool), func(syscall.Signal)) {
		cmd, _, _ := coveProc(root, "exec", "-it", "box", "sh")
		cmd.Stdout, cmd.Stderr = nil, nil
		tty, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tty.Close() })
		out := testbuf.New()
		go io.Copy(out, tty)
		return out, func(b []byte) { tty.Write(b) }, func(d time.Duration) (int, bool) { return waitExit(cmd, d) },
			func(s syscall.Signal) { cmd.Process.Signal(s) }
	}
	out, typ, wait, _ := start()
	typ([]byte("echo typed-$((40+2))\n"))
	out.WaitFor(t, "typed-42")
	// Ctrl-D. busybox's line editor asks the terminal where its cursor is
	// after a prompt and reads the answer for a while, which can take a
	// first Ctrl-D as noise; a person presses it again, so does this.
	go func() {
		for range 4 {
			typ([]byte{4})
			time.Sleep(time.Second)
		}
	}()
	if code, ok := wait(10 * time.Second); !ok || code != 0 {
		t.Fatalf("Ctrl-D did not end the shell (exited %v, status %d):\n%s", ok, code, out.String())
	}
	out, typ, wait, signal := start()
	typ([]byte("echo ready-$((1+1))\n"))
	out.WaitFor(t, "ready-2")
	signal(syscall.SIGTERM)
	if _, ok := wait(10 * time.Second); !ok {
		t.Fatalf("SIGTERM did not end cove exec -it:\n%s", out.String())
	}
}
