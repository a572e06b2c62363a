package ide

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// hostileTasks is a task workspace's answers at their worst: escape
// sequences (OSC 52 sets the clipboard, bidi overrides reorder what is
// read) and more than any review needs.
type hostileTasks struct {
	merged []string
	made   [][2]string // New task's name and prompt, as the backend got them
}

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
func (h *hostileTasks) TaskNew(_ context.Context, name, prompt string) error {
	h.made = append(h.made, [2]string{name, prompt})
	if name == "taken" {
		return errors.New("task taken exists" + osc52)
	}
	return nil
}

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

// TestTasksAPINewTask: New task takes {"name", "prompt"} by POST alone,
// hands them to the backend byte for byte (a prompt that would mean
// something to a shell is only text), refuses a body that is not that or
// a prompt over MaxTaskPrompt before the backend sees it, and shows the
// backend's refusal as text.
func TestTasksAPINewTask(t *testing.T) {
	t.Parallel()
	h := &hostileTasks{}
	p := NewProxyDial(nil, 1)
	Tasks{Backend: h}.Handle(p)
	call := func(method, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		p.local["/api/tasks/new"].ServeHTTP(rec, httptest.NewRequest(method, "/api/tasks/new", strings.NewReader(body)))
		return rec
	}
	hostile := "$(touch /tmp/pwned); `id` ; --yes\n-p x' \" \u0000"
	b, _ := json.Marshal(map[string]string{"name": "t3", "prompt": hostile})
	if rec := call("POST", string(b)); rec.Code != http.StatusAccepted || len(h.made) != 1 || h.made[0] != [2]string{"t3", hostile} {
		t.Errorf("New task: %d %q; the backend got %q", rec.Code, rec.Body, h.made)
	}
	if rec := call("GET", string(b)); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("a GET: %d", rec.Code)
	}
	for _, body := range []string{"", "[1]", `{"name": 3}`, `{"name":"t","prompt":"` + strings.Repeat("x", MaxTaskPrompt+1) + `"}`, strings.Repeat(" ", 3*MaxTaskPrompt) + "{}"} {
		if rec := call("POST", body); rec.Code < 400 || rec.Code >= 500 {
			t.Errorf("a body of %d bytes (%.20q): %d", len(body), body, rec.Code)
		}
	}
	if len(h.made) != 1 {
		t.Errorf("the backend got refused bodies: %q", h.made[1:])
	}
	rec := call("POST", `{"name":"taken","prompt":"p"}`)
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "task taken exists") || strings.ContainsAny(rec.Body.String(), "\x1b\x07") {
		t.Errorf("a taken name: %d %q", rec.Code, rec.Body)
	}
}
