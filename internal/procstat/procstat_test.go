package procstat

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFieldsOfThisProcess(t *testing.T) {
	f, err := Fields(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(f) < 20 || f[0] != "R" && f[0] != "S" || f[1] != strconv.Itoa(os.Getppid()) {
		t.Fatalf("fields %q (parent %d)", f, os.Getppid())
	}
	if _, err := Fields(-1); err == nil {
		t.Error("no error for a process that is not there")
	}
}

// TestIdentityTellsAReusedPID: a process is alive while it runs; once it
// ended, its identity is not alive, and a record of it naming another
// process's PID (a PID reused) is not either.
func TestIdentityTellsAReusedPID(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	id, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !id.Alive() {
		t.Errorf("%+v not alive while it runs", id)
	}
	self, err := Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	reused := id
	reused.PID = os.Getpid() // another process now has the PID: its start and executable differ
	if reused.Alive() || self.Start == id.Start && self.ExeIno == id.ExeIno {
		t.Errorf("a record of sleep with this test's PID is alive: %+v", reused)
	}
	// Why says which: the test started before sleep did.
	if err := reused.Gone(); err == nil || !strings.Contains(err.Error(), "another process, started at tick "+self.Start) {
		t.Errorf("a reused pid: %v", err)
	}
	other := id
	other.ExeIno++
	if err := other.Gone(); err == nil || !strings.Contains(err.Error(), "runs another program now") {
		t.Errorf("a pid that runs another program: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if id.Alive() {
		t.Errorf("%+v alive after it ended", id)
	}
	if err := id.Gone(); err == nil || err.Error() != fmt.Sprintf("pid %d has exited", id.PID) {
		t.Errorf("a pid that is free: %v", err)
	}
}

// TestIdentifyStartedNamesTheProgram: a process just started is known by
// the program it execs, not by its parent's (which /proc/PID/exe shows
// until the exec is through); one that runs this program is taken at
// once, and one that never shows the program it was said to run is an
// error, not an identity of the wrong program.
func TestIdentifyStartedNamesTheProgram(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(sleep, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	id, err := IdentifyStarted(cmd.Process.Pid, sleep)
	if err != nil {
		t.Fatal(err)
	}
	var want unix.Stat_t
	if err := unix.Stat(sleep, &want); err != nil {
		t.Fatal(err)
	}
	if id.ExeDev != uint64(want.Dev) || id.ExeIno != want.Ino {
		t.Errorf("identity %+v, want the inode of %s (%d)", id, sleep, want.Ino)
	}

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	again := exec.Command(self, "-test.run=^$")
	again.Env = append(os.Environ(), "PROCSTAT_TEST_HOLD=1")
	stdin, err := again.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); again.Wait() }()
	t0 := time.Now()
	if _, err := identifyStarted(again.Process.Pid, self, 2*time.Second); err != nil || time.Since(t0) > time.Second {
		t.Errorf("this test's own program: %v after %s", err, time.Since(t0))
	}
	// Said to run sleep, it runs this program: not taken for sleep.
	if _, err := identifyStarted(again.Process.Pid, sleep, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "still runs this program") {
		t.Errorf("a process that never showed its program: %v", err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("PROCSTAT_TEST_HOLD") != "" {
		io.Copy(io.Discard, os.Stdin) // held until the test closes stdin
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// sleeping starts a sleep of a minute, killed when the test ends, and
// returns it with its Identity.
func sleeping(t *testing.T) (*exec.Cmd, Identity) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, id
}

// TestExitedIsTheKernelsWord: the channel closes once the process exits,
// not before; a process that is not the recorded one (its PID reused)
// cannot be watched; a watch whose context ended never says it exited.
func TestExitedIsTheKernelsWord(t *testing.T) {
	cmd, id := sleeping(t)
	exited, err := id.Exited(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	abandoned, err := id.Exited(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-exited:
		t.Fatal("it says a running process exited")
	case <-time.After(300 * time.Millisecond):
	}
	other := id
	other.Start = "1"
	if _, err := other.Exited(context.Background()); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("watching a reused PID: %v", err)
	}
	// Exited only: not reaped yet, the PID still taken.
	cmd.Process.Signal(unix.SIGKILL)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the process was killed 5 s ago and the channel is open")
	}
	select {
	case <-abandoned:
		t.Error("a watch whose context ended says the process exited")
	case <-time.After(100 * time.Millisecond):
	}
	cmd.Wait()
	if _, err := id.Exited(context.Background()); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("watching a process gone: %v", err)
	}
}

// TestPolledWithoutAPidfd: where there are no pidfds, Exited's channel
// still closes once the process exits, from /proc.
func TestPolledWithoutAPidfd(t *testing.T) {
	cmd, id := sleeping(t)
	exited := id.polled(context.Background())
	select {
	case <-exited:
		t.Fatal("it says a running process exited")
	case <-time.After(1500 * time.Millisecond):
	}
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the process was killed 5 s ago and the channel is open")
	}
}

// TestProcessSignalsOnlyItsProcess: a Process's signal reaches the
// process it was opened on, and once that has exited (reaped, its PID
// free for another) a signal is an error, never sent to a PID; a second
// wait on it works after the first one's context ended.
func TestProcessSignalsOnlyItsProcess(t *testing.T) {
	cmd, id := sleeping(t)
	p, err := id.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.f == nil {
		t.Fatal("no pidfd on this kernel")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	select {
	case <-p.Exited(ctx):
		t.Fatal("it says a running process exited")
	case <-ctx.Done():
	}
	exited := p.Exited(context.Background())
	if err := p.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("signalled 5 s ago, the channel is open: the second wait does not work")
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("the process ended with %v, want SIGTERM's", err)
	}
	if err := p.Signal(unix.SIGKILL); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("a signal to a process reaped: %v", err)
	}
}
