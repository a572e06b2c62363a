package ide

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hostileTasks is a task workspace's answers at their worst: escape
// sequences (OSC 52 sets the clipboard, bidi overrides reorder what is
// read) and more than any review needs.
type hostileTasks struct{ merged []string }

const osc52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"

func (h *hostileTasks) Tasks(context.Context) ([]TaskRow, error) {
	return []TaskRow{{Name: "t1", Status: "running", Commits: 1, Diff: "1 file changed\x1b[2J\u202e" + osc52}}, nil
}
func (h *hostileTasks) TaskDiff(context.Context, string) ([]byte, error) {
	return []byte("diff --git a/x b/x\n" + osc52 + strings.Repeat("+é\n", 3<<20)), nil
}
func (h *hostileTasks) TaskMerge(_ context.Context, name string) ([]byte, error) {
	h.merged = append(h.merged, name)
	return []byte("Fast-forward\n" + osc52), nil
}
func (h *hostileTasks) TaskTranscript(context.Context, string) ([]byte, error) {
	return []byte("tool output " + osc52), nil
}
func (h *hostileTasks) TaskOpen(context.Context, string) (string, error) { return "", nil }
func (h *hostileTasks) TaskDiscard(context.Context, string) error        { return nil }

// TestTasksAPIShowsWorkspaceTextBounded: what a task's workspace prints
// reaches the page with no control character (its escape sequences
// shown, not obeyed; bidi overrides gone from the one-line stat), a diff
// cut at maxTaskDiff on a character, and a merge only by POST.
func TestTasksAPIShowsWorkspaceTextBounded(t *testing.T) {
	t.Parallel()
	h := &hostileTasks{}
	p := NewProxyDial(nil, 1)
	Tasks{Backend: h}.Handle(p)
	call := func(method, target string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		p.local[strings.SplitN(target, "?", 2)[0]].ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		return rec
	}
	noControl := func(what, s string) {
		if strings.ContainsAny(s, "\x1b\x07\u202e") {
			t.Errorf("%s has control characters: %q", what, s[:min(len(s), 200)])
		}
	}

	rec := call("GET", "/api/tasks")
	var rows []TaskRow
	if err := json.Unmarshal(rec.Body.Bytes(), &rows); err != nil || len(rows) != 1 || !strings.HasPrefix(rows[0].Diff, "1 file changed") {
		t.Fatalf("the list: %v %s", err, rec.Body)
	}
	noControl("the stat", rows[0].Diff)

	rec = call("GET", "/api/tasks/diff?name=t1")
	body := rec.Body.String()
	noControl("the diff", body)
	if !strings.Contains(body, "␛]52") || len(body) > maxTaskDiff+4096 || !strings.HasSuffix(body, "KiB)") || !strings.HasPrefix(body, "diff --git") {
		t.Errorf("the diff: %d bytes, ends %q", len(body), body[max(0, len(body)-60):])
	}
	if strings.ContainsRune(body, '\uFFFD') {
		t.Errorf("the diff was cut inside a character")
	}

	noControl("the transcript", call("GET", "/api/tasks/transcript?name=t1").Body.String())
	if rec = call("GET", "/api/tasks/merge?name=t1"); rec.Code != http.StatusMethodNotAllowed || len(h.merged) != 0 {
		t.Errorf("a GET merged: %d %v", rec.Code, h.merged)
	}
	rec = call("POST", "/api/tasks/merge?name=t1")
	noControl("the merge's output", rec.Body.String())
	if rec.Code != 200 || len(h.merged) != 1 || h.merged[0] != "t1" {
		t.Errorf("the merge: %d %v", rec.Code, h.merged)
	}
}
