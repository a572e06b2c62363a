package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSessionIDsArePlainNames: a session opened by id (-r ID, the panel's
// open) is a name in the sessions directory, never a path out of it.
// (It failed before: -r ../../x resumed a log planted outside.)
func TestSessionIDsArePlainNames(t *testing.T) {
	top := t.TempDir()
	sessions := filepath.Join(top, "state", "sessions")
	os.MkdirAll(sessions, 0o700)
	forged := `{"type":"message","message":{"role":"user","content":"FORGED"}}` + "\n"
	os.WriteFile(filepath.Join(top, "x.jsonl"), []byte(forged), 0o644)
	os.Symlink(filepath.Join(top, "x.jsonl"), filepath.Join(sessions, "20250101-000000.000000-0000000a.jsonl"))
	for _, id := range []string{"../../x", "/tmp/x", "a/b", "..", "20250101-000000.000000-0000000a"} {
		if s, msgs, err := ResumeSession(sessions, id); err == nil {
			s.Close()
			t.Errorf("-r %q resumed %v", id, msgs)
		}
	}
	if s, _, err := ResumeSession(sessions, ""); err == nil {
		t.Errorf("-c took the symlink %s", s.Path)
	}
	if list, _ := ListSessions(sessions, 0); len(list) != 0 {
		t.Errorf("listed %+v", list)
	}
	s, err := NewSession(sessions)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if r, _, err := ResumeSession(sessions, s.ID); err != nil {
		t.Errorf("a real id: %v", err)
	} else {
		r.Close()
	}
	if fi, err := os.Stat(s.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the log: %v", err)
	}
}
