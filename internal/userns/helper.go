package userns

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// HelperArg is the hidden first argument that makes the cove binary the
// helper: main hands such a process to Main before anything else runs.
const HelperArg = "__cove-userns"

// mappedArg marks the helper's second stage, re-executed once its user
// namespace has its maps: a process becomes root there, with the
// capabilities that brings, only by an exec after the maps are written,
// and the first stage execs before newuidmap can write them.
const mappedArg = "--mapped"

// Task is a job the helper does as root in the mapped namespace: args are
// the ones Start was given, in and out the helper's stdin and stdout
// (the caller's Proc.In and Proc.Out). An error is printed on stderr and
// makes the helper exit 1.
type Task func(args []string, in io.Reader, out io.Writer) error

// Main is the helper process: args are what follows HelperArg, tasks the
// jobs it can do besides its own ("rm", "du"). It never returns.
func Main(args []string, tasks map[string]Task) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(args) >= 2 && args[0] == mappedArg {
		// The exec may have cleared the parent-death signal: set it again,
		// and make sure the parent did not go meanwhile.
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		if os.Getppid() == 1 {
			os.Exit(1)
		}
		task, ok := tasks[args[1]]
		if !ok {
			task, ok = builtin[args[1]]
		}
		if !ok {
			fail(fmt.Errorf("%s: no task %q", HelperArg, args[1]))
		}
		if err := task(args[2:], os.Stdin, os.Stdout); err != nil {
			fail(err)
		}
		os.Exit(0)
	}
	if len(args) < 1 {
		fail(fmt.Errorf("%s: no task", HelperArg))
	}
	// Stage 1: wait for the parent to write the maps (it says so on fd 3),
	// then become the namespace's root by exec.
	sync := os.NewFile(3, "sync")
	var b [1]byte
	if n, _ := sync.Read(b[:]); n != 1 {
		fail(errors.New("the parent went away before the user namespace was mapped"))
	}
	sync.Close()
	err := unix.Exec("/proc/self/exe", append([]string{"cove", HelperArg, mappedArg}, args...), []string{})
	fail(fmt.Errorf("re-exec in the user namespace: %w", err))
}

// Proc is a running helper.
type Proc struct {
	cmd    *exec.Cmd
	In     io.WriteCloser // the task's stdin
	Out    *bufio.Reader  // the task's stdout
	stderr bytes.Buffer
	what   string
}

// Start starts task in a new user namespace mapped as m (m.Helps must
// hold) and returns once the task runs; the caller talks to it on In and
// Out and then calls Wait.
func Start(ctx context.Context, m IDMap, task string, args ...string) (*Proc, error) {
	if !m.Helps() {
		return nil, errors.New("no user namespace helper: not rootless with subordinate ids")
	}
	// /proc/self/exe, not its path: that stays this binary even after an
	// upgrade replaced the file (install.sh does, safely while cove runs).
	const exe = "/proc/self/exe"
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer syncR.Close()
	defer syncW.Close()
	p := &Proc{what: task}
	p.cmd = exec.CommandContext(ctx, exe, append([]string{HelperArg, task}, args...)...)
	p.cmd.Env = []string{}
	p.cmd.Dir = "/"
	p.cmd.ExtraFiles = []*os.File{syncR}
	p.cmd.Stderr = &limitedBuffer{b: &p.stderr, n: 64 << 10}
	in, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.In, p.Out = in, bufio.NewReaderSize(out, 64<<10)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER, Pdeathsig: unix.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the user namespace helper: %w", err)
	}
	syncR.Close()
	if err := m.Apply(ctx, p.cmd.Process.Pid); err != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		return nil, fmt.Errorf("map the helper's user namespace: %w", err)
	}
	if _, err := syncW.Write([]byte{1}); err != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
		return nil, fmt.Errorf("start the user namespace helper: %w", err)
	}
	return p, nil
}

// Wait closes In, waits for the helper to end and returns its error (what
// it printed, if anything).
func (p *Proc) Wait() error {
	p.In.Close()
	io.Copy(io.Discard, p.Out)
	if err := p.cmd.Wait(); err != nil {
		return p.failure(err)
	}
	return nil
}

// Kill stops the helper at once.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	p.In.Close()
	p.cmd.Wait()
}

// Stderr is what the helper has printed on stderr so far.
func (p *Proc) Stderr() string { return strings.TrimSpace(p.stderr.String()) }

func (p *Proc) failure(err error) error {
	if msg := p.Stderr(); msg != "" {
		return errors.New(msg)
	}
	return fmt.Errorf("user namespace helper (%s): %w", p.what, err)
}

// Run runs task to its end with no input and returns its stdout.
func Run(ctx context.Context, m IDMap, task string, args ...string) ([]byte, error) {
	p, err := Start(ctx, m, task, args...)
	if err != nil {
		return nil, err
	}
	p.In.Close()
	out, rerr := io.ReadAll(p.Out)
	if err := p.Wait(); err != nil {
		return out, err
	}
	return out, rerr
}

// limitedBuffer keeps the first n bytes written to it: a helper's
// error, not a flood.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
