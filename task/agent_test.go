package task

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/procstat"
)

// TestAgentState: a task's agent is working while its process runs,
// done or failed (with why) as it recorded, gone when its process ended
// without a word, even when another process has its PID now.
func TestAgentState(t *testing.T) {
	t.Parallel()
	m := &Manager{Project: t.TempDir(), Data: t.TempDir()}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(m.dir(), 0o700))
	if s := m.AgentState("t1"); s != AgentNone {
		t.Errorf("no agent ran: %q", s)
	}
	must(m.AgentStarted("t1"))
	if s := m.AgentState("t1"); s != AgentWorking {
		t.Errorf("while this process works: %q", s)
	}
	must(m.AgentEnded("t1", nil))
	if s := m.AgentState("t1"); s != AgentDone {
		t.Errorf("ended: %q", s)
	}
	must(m.AgentStarted("t1"))
	must(m.AgentEnded("t1", errors.New("the model said no")))
	if s := m.AgentState("t1"); s != "failed: the model said no" {
		t.Errorf("failed: %q", s)
	}

	// An agent whose cove was killed: its record names a process that
	// ended; then one whose PID another process (this one) has now.
	cmd := exec.Command("sleep", "60")
	must(cmd.Start())
	id, err := procstat.Identify(cmd.Process.Pid)
	must(err)
	must(m.writeAgent("t2", AgentRun{Process: id, Started: time.Now()}))
	if s := m.AgentState("t2"); s != AgentWorking {
		t.Errorf("its process runs: %q", s)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if s := m.AgentState("t2"); s != AgentGone {
		t.Errorf("its process was killed: %q", s)
	}
	id.PID = os.Getpid()
	must(m.writeAgent("t2", AgentRun{Process: id, Started: time.Now()}))
	if s := m.AgentState("t2"); s != AgentGone {
		t.Errorf("its PID is another process's now: %q", s)
	}
	if s := m.AgentState("../x"); !strings.HasPrefix(s, AgentNone) {
		t.Errorf("a name that is not a task's: %q", s)
	}
}
