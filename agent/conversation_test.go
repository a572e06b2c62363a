package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/llmtest"
)

// events reads a conversation's events after id after until one of type
// typ, and returns them and the id of the last.
func events(t *testing.T, cv *Conversation, after int64, typ string) ([]map[string]any, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []map[string]any
	for {
		evs, last, err := cv.Events().Since(ctx, after)
		if err != nil {
			t.Fatalf("waiting for %q after %v: %v", typ, out, err)
		}
		for i, b := range evs {
			var ev map[string]any
			json.Unmarshal(b, &ev)
			out = append(out, ev)
			if ev["type"] == typ {
				return out, last - int64(len(evs)-1-i)
			}
		}
		after = last
	}
}

func first(evs []map[string]any, typ string) map[string]any {
	for _, ev := range evs {
		if ev["type"] == typ {
			return ev
		}
	}
	return nil
}

// checkpointedProject is an empty project, open for the tools, with its
// checkpoints.
func checkpointedProject(t *testing.T) (string, *Workspace, *Checkpoints) {
	t.Helper()
	dir := t.TempDir()
	w, err := OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	cp, err := OpenCheckpoints(context.Background(), dir, filepath.Join(t.TempDir(), "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, w, cp
}

// TestConversationSharedByWindows: two readers see one approval; its
// answer lets the edit happen; Auto-edit set between turns lets the next
// through without asking; a later Conversation on the same sessions (a
// new launcher) shows what was said and can rewind to its first turn.
func TestConversationSharedByWindows(t *testing.T) {
	dir, w, cp := checkpointedProject(t)
	srv := llmtest.New(t)
	srv.Push(
		call("c1", "write", map[string]any{"path": "a.txt", "content": "one\n"}), answer("wrote one"),
		call("c2", "write", map[string]any{"path": "a.txt", "content": "two\n"}), answer("wrote two"),
	)
	agentFor := func() *Agent {
		return &Agent{Provider: &OpenAI{BaseURL: srv.URL(), Backoff: fast}, Model: "m", Tools: []Tool{WriteTool{w}}, Checkpoints: cp}
	}
	sessions := filepath.Join(t.TempDir(), "sessions")
	cv, err := NewConversation(context.Background(), agentFor(), sessions)
	if err != nil {
		t.Fatal(err)
	}
	if err := cv.Prompt("write one"); err != nil {
		t.Fatal(err)
	}
	evs, last := events(t, cv, 0, "approval")
	ask := first(evs, "approval")
	if ask["path"] != "a.txt" || ask["after"] != "one\n" || first(evs, "user")["text"] != "write one" {
		t.Fatalf("the approval: %v", evs)
	}
	cp1, _ := first(evs, "checkpoint")["text"].(string)
	// A second window, joining now, is asked the same.
	if again, _ := events(t, cv, 0, "approval"); first(again, "approval")["approval"] != ask["approval"] {
		t.Fatalf("the second window sees %v", again)
	}
	if err := cv.Prompt("meanwhile"); err == nil {
		t.Error("a second prompt was taken while a turn runs")
	}
	cv.Decide(int(ask["approval"].(float64)), Decision{Approve: true})
	evs, last = events(t, cv, last, "done")
	if first(evs, "decided")["approve"] != true || first(evs, "edited") == nil {
		t.Fatalf("after the answer: %v", evs)
	}
	_, last = events(t, cv, last, "state")
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
		t.Fatalf("a.txt = %q", b)
	}

	if err := cv.SetMode(ModeEdits); err != nil {
		t.Fatal(err)
	}
	if err := cv.SetMode("all"); err == nil {
		t.Error("an unknown mode was taken")
	}
	cv.Prompt("write two")
	evs, _ = events(t, cv, last, "done")
	if first(evs, "approval") != nil || first(evs, "mode")["text"] != "edits" {
		t.Fatalf("in Auto-edit: %v", evs)
	}
	events(t, cv, last, "state")
	cv.Close()

	// A later launcher: the conversation goes on, its first turn rewindable.
	cv2, err := NewConversation(context.Background(), agentFor(), sessions)
	if err != nil {
		t.Fatal(err)
	}
	defer cv2.Close()
	shown, _ := events(t, cv2, 0, "note")
	var prompts []string
	rest, _ := events(t, cv2, int64(len(shown)), "done")
	for _, ev := range append(shown, rest...) {
		if ev["type"] == "user" {
			prompts = append(prompts, ev["text"].(string))
		}
	}
	if len(prompts) < 1 || prompts[0] != "write one" {
		t.Fatalf("the resumed conversation shows %v", prompts)
	}
	if err := cv2.Rewind(cp1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt after rewinding to before the first prompt: %v", err)
	}
	if err := cv2.Rewind("no-such-checkpoint"); err == nil {
		t.Error("a rewind to a checkpoint not in the conversation went through")
	}
}

// TestSessionsLatestFirst: sessions begun in one second keep their order,
// and one written to again comes first (it is the one to go on with).
func TestSessionsLatestFirst(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	for range 3 {
		s, err := NewSession(dir)
		if err != nil {
			t.Fatal(err)
		}
		s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "prompt " + s.ID}})
		s.Close()
		ids = append(ids, s.ID)
	}
	list, err := ListSessions(dir, 0)
	if err != nil || len(list) != 3 || list[0].ID != ids[2] || list[1].ID != ids[1] || list[2].ID != ids[0] {
		t.Fatalf("begun one after another: %+v (%v), want %v reversed", list, err, ids)
	}
	time.Sleep(20 * time.Millisecond) // past the file system's clock tick
	s, _, err := ResumeSession(dir, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	s.Append(LoopEvent{Type: "message", Message: &Message{Role: "user", Content: "more"}})
	s.Close()
	if list, _ := ListSessions(dir, 0); list[0].ID != ids[0] || list[0].Prompts != 2 {
		t.Errorf("after writing to the first again: %+v", list)
	}
	if s, _, err := ResumeSession(dir, ""); err != nil || s.ID != ids[0] {
		t.Errorf("the latest to go on with: %v %v", s, err)
	} else {
		s.Close()
	}
}

// TestConversationTurnsAfterCompaction: once a turn compacts the
// conversation, the turns before it are a summary and cannot be rewound
// to; the turn itself can, its prompt where the compacted history has it.
func TestConversationTurnsAfterCompaction(t *testing.T) {
	dir, w, cp := checkpointedProject(t)
	srv := llmtest.New(t)
	srv.Push(
		answer("first done"),
		withUsage(call("c1", "write", map[string]any{"path": "a.txt", "content": "x\n"}), 900), // past 80% of 1000
		answer("SUMMARY"),
		answer("second done"),
	)
	a := &Agent{Provider: &OpenAI{BaseURL: srv.URL(), Backoff: fast}, Model: "m", Tools: []Tool{WriteTool{w}}, Checkpoints: cp, Window: 1000}
	cv, err := NewConversation(context.Background(), a, filepath.Join(t.TempDir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	cv.SetMode(ModeEdits)
	cv.Prompt("first")
	evs, last := events(t, cv, 0, "done")
	cp1 := first(evs, "checkpoint")["text"].(string)
	_, last = events(t, cv, last, "state")
	cv.Prompt("second")
	evs, last = events(t, cv, last, "compacted")
	cp2 := first(evs, "checkpoint")["text"].(string)
	events(t, cv, last, "state")
	if err := cv.Rewind(cp1); err == nil {
		t.Error("rewound to a turn that is a summary now")
	}
	if err := cv.Rewind(cp2); err != nil {
		t.Fatalf("the compacting turn: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); !os.IsNotExist(err) {
		t.Errorf("a.txt after rewinding the second turn: %v", err)
	}
}
