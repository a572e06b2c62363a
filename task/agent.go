package task

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/procstat"
)

// AgentRun is how the task's agent (the cove agent --task that works on
// it) is doing, kept beside the task's record so that every cove and a
// launcher started later know it: its process while it works, how it
// ended. The process is told from one that reused its PID by its
// identity (start time, boot, executable).
type AgentRun struct {
	Process procstat.Identity `json:"process"`
	Started time.Time         `json:"started"`
	Ended   *time.Time        `json:"ended,omitempty"`
	Error   string            `json:"error,omitempty"` // why it failed, when it did
}

// States of a task's agent (AgentState).
const (
	AgentWorking = "working"
	AgentDone    = "done"
	AgentGone    = "gone" // its cove ended without a word (killed)
	AgentNone    = "-"    // none ran (or its record is unreadable)
)

func (m *Manager) agentPath(name string) string { return filepath.Join(m.dir(), name+".agent") }

// AgentStarted records that this process's agent works on the task now.
func (m *Manager) AgentStarted(name string) error {
	id, err := procstat.Identify(os.Getpid())
	if err != nil {
		return err
	}
	return m.writeAgent(name, AgentRun{Process: id, Started: time.Now().UTC()})
}

// AgentEnded records that the agent AgentStarted recorded ended, with
// err (nil: done).
func (m *Manager) AgentEnded(name string, err error) error {
	run, rerr := m.readAgent(name)
	if rerr != nil {
		return rerr
	}
	now := time.Now().UTC()
	run.Ended = &now
	if err != nil {
		run.Error = truncate(err.Error())
	}
	return m.writeAgent(name, run)
}

// AgentState is how the task's agent is: AgentWorking while its process
// runs, AgentDone, "failed: why", AgentGone when its process ended
// without recording it, AgentNone when none ran.
func (m *Manager) AgentState(name string) string {
	run, err := m.readAgent(name)
	switch {
	case err != nil:
		return AgentNone
	case run.Ended == nil && run.Process.Alive():
		return AgentWorking
	case run.Ended == nil:
		return AgentGone
	case run.Error != "":
		return "failed: " + run.Error
	}
	return AgentDone
}

func (m *Manager) readAgent(name string) (AgentRun, error) {
	var run AgentRun
	if err := CheckName(name); err != nil {
		return run, err
	}
	b, err := os.ReadFile(m.agentPath(name))
	if err != nil {
		return run, err
	}
	return run, json.Unmarshal(b, &run)
}

func (m *Manager) writeAgent(name string, run AgentRun) error {
	if err := CheckName(name); err != nil {
		return err
	}
	b, _ := json.Marshal(run)
	return atomicfile.WriteFile(m.agentPath(name), b)
}

// removeAgent forgets the task's agent (Discard).
func (m *Manager) removeAgent(name string) error {
	if err := os.Remove(m.agentPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
