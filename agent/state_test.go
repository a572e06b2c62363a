package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/workspace"
)

// testLayout is cove's layout under a COVE_ROOT of the test's.
func testLayout(t *testing.T) dirs.Layout {
	t.Helper()
	l, err := dirs.Resolve(dirs.Env{Root: t.TempDir(), UID: os.Geteuid(), SudoUID: -1, SudoGID: -1})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestForgedSessionNotResumed: a session log the workspace planted in the
// project's .cove/sessions is not what -c goes on with, nor listed in
// History; the agent's own sessions are. (It failed before: -c resumed
// the forged log.)
func TestForgedSessionNotResumed(t *testing.T) {
	project := t.TempDir()
	legacy := filepath.Join(project, ".cove", "sessions")
	os.MkdirAll(legacy, 0o755)
	forged := filepath.Join(legacy, "29991231-235959.000000-deadbeef.jsonl")
	os.WriteFile(forged, []byte(`{"type":"message","message":{"role":"user","content":"FORGED"}}`+"\n"), 0o644)
	state, err := agent.OpenState(testLayout(t), workspace.Name(project))
	if err != nil {
		t.Fatal(err)
	}
	if s, msgs, err := agent.ResumeSession(state.Sessions, ""); err == nil {
		s.Close()
		t.Fatalf("-c with no session of cove's resumed %v", msgs)
	}
	own, err := agent.NewSession(state.Sessions)
	if err != nil {
		t.Fatal(err)
	}
	own.Append(agent.LoopEvent{Type: "message", Message: &agent.Message{Role: "user", Content: "mine"}})
	own.Close()
	s, msgs, err := agent.ResumeSession(state.Sessions, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s.ID != own.ID || len(msgs) != 1 || msgs[0].Content != "mine" {
		t.Errorf("-c resumed %s: %v", s.ID, msgs)
	}
	if list, _ := agent.ListSessions(state.Sessions, 0); len(list) != 1 || list[0].ID != own.ID {
		t.Errorf("History lists %+v", list)
	}
	if b, _ := os.ReadFile(forged); !strings.Contains(string(b), "FORGED") {
		t.Errorf("the user's old file was changed: %q", b)
	}
}

// TestAgentStateLeavesTheProject: the state is a 0700 directory of cove's
// state, named as the workspace; the project's old .cove state is noted
// once, kept, and nothing is written into .cove, even as a symlink to a
// host directory. (Before, .cove/.gitignore and the state were written
// through it.)
func TestAgentStateLeavesTheProject(t *testing.T) {
	layout := testLayout(t)
	project := t.TempDir()
	host := t.TempDir()
	os.Symlink(host, filepath.Join(project, ".cove"))
	os.MkdirAll(filepath.Join(host, "checkpoints.git"), 0o755)
	state, err := agent.OpenState(layout, workspace.Name(project))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(layout.State, "projects", workspace.Name(project)); state.Dir != want {
		t.Errorf("state in %s, want %s", state.Dir, want)
	}
	if fi, err := os.Lstat(state.Dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("the state directory: %v %v", fi, err)
	}
	note := state.LegacyNote(project, "")
	if !strings.Contains(note, ".cove/checkpoints.git in this project are no longer used (cove keeps its state in "+state.Dir+"); you may delete them") {
		t.Errorf("note %q", note)
	}
	if again := state.LegacyNote(project, ""); again != "" {
		t.Errorf("said twice: %q", again)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 1 || entries[0].Name() != "checkpoints.git" {
		t.Errorf("the project's .cove (a host directory) now holds %v", entries)
	}
	// A state directory that is a symlink, planted by someone: refused.
	other := dirs.Layout{State: t.TempDir(), StateUID: -1, StateGID: -1}
	os.MkdirAll(filepath.Join(other.State, "projects"), 0o700)
	os.Symlink(host, filepath.Join(other.State, "projects", workspace.Name(project)))
	if _, err := agent.OpenState(other, workspace.Name(project)); err == nil {
		t.Error("a state directory that is a symlink was taken")
	}
}
