package procstat

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
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
	cmd.Process.Kill()
	cmd.Wait()
	if id.Alive() {
		t.Errorf("%+v alive after it ended", id)
	}
}
