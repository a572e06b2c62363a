package ide

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/cove-sh/cove/internal/termtext"
)

// TaskRow is one of the project's tasks as the Tasks view lists it (the
// fields of cove tasks --json). Commits and Diff are what the task's
// workspace says, when it runs: untrusted text, bounded and made visible
// here before the page gets it.
type TaskRow struct {
	Name    string `json:"name"`
	Branch  string `json:"branch"`
	Base    string `json:"base"`
	Status  string `json:"status"`
	Commits int    `json:"commits"`
	Diff    string `json:"diff"`
	Tests   string `json:"tests"` // the last test run of its agent: passed, failed or -
	Prompt  string `json:"prompt"`
	Created string `json:"created"`
	// Agent is, in the IDE, the agent its launcher started on the task
	// (New task): "working" while it runs, "failed: WHY" when it failed;
	// "" for any other.
	Agent string `json:"agent,omitempty"`
}

// TaskBackend is the launcher's side of the project's tasks (package
// task, reached through cmd/cove, as cove tasks and cove task do): git
// runs in the workspaces, never on the host.
type TaskBackend interface {
	Tasks(ctx context.Context) ([]TaskRow, error)
	// TaskDiff is the task's diff against its base, from its workspace.
	TaskDiff(ctx context.Context, name string) ([]byte, error)
	// TaskMerge merges the task's branch into the project, in the
	// project's workspace, and returns git's output.
	TaskMerge(ctx context.Context, name string) ([]byte, error)
	// TaskTranscript is the task's agent's conversation, as text.
	TaskTranscript(ctx context.Context, name string) ([]byte, error)
	// TaskOpen serves the task's workspace in a launcher of its own (cove
	// up --detach on its tree) and returns that IDE's URL: its terminal,
	// its files.
	TaskOpen(ctx context.Context, name string) (string, error)
	// TaskDiscard removes the task: its workspace, tree, branch, record.
	TaskDiscard(ctx context.Context, name string) error
	// TaskNew makes the task name and starts its agent on prompt, as
	// cove agent --task NAME -p PROMPT does, in the background: it
	// returns once the agent started, with an error for a name that is
	// not a task's or is taken, a prompt empty or over MaxTaskPrompt, or
	// no model set up.
	TaskNew(ctx context.Context, name, prompt string) error
}

// MaxTaskPrompt bounds a new task's prompt (it is a command-line
// argument of the task's agent: Linux takes 128 KiB in one).
const MaxTaskPrompt = 64 << 10

// Tasks serves the IDE's Tasks view on the launcher's side of the proxy:
//
//	GET  /api/tasks                  the tasks, [TaskRow…]
//	GET  /api/tasks/diff?name=N      the task's diff against its base (text)
//	GET  /api/tasks/transcript?name=N  its agent's conversation (text)
//	POST /api/tasks/open?name=N      its own IDE, {"url": …}
//	POST /api/tasks/merge?name=N     merge it into the project (git's output)
//	POST /api/tasks/discard?name=N   remove it and everything it made
//	POST /api/tasks/new              {"name": N, "prompt": P}: make a task, start its agent
//
// A POST comes only from the page's own origin (the proxy checks it).
type Tasks struct{ Backend TaskBackend }

// maxTaskDiff bounds a task's diff the page is given: a merge view of
// more is no review.
const maxTaskDiff = 4 << 20

// Handle puts the Tasks view's routes on the proxy.
func (t Tasks) Handle(p *Proxy) {
	p.Handle("/api/tasks", http.HandlerFunc(t.list))
	p.Handle("/api/tasks/diff", t.method(http.MethodGet, t.diff))
	p.Handle("/api/tasks/transcript", t.method(http.MethodGet, t.transcript))
	p.Handle("/api/tasks/open", t.method(http.MethodPost, t.open))
	p.Handle("/api/tasks/merge", t.method(http.MethodPost, t.merge))
	p.Handle("/api/tasks/discard", t.method(http.MethodPost, t.discard))
	p.Handle("/api/tasks/new", t.method(http.MethodPost, t.create))
}

func (t Tasks) method(m string, h func(w http.ResponseWriter, r *http.Request, name string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m {
			http.Error(w, "cove: "+m+" only", http.StatusMethodNotAllowed)
			return
		}
		h(w, r, r.URL.Query().Get("name"))
	})
}

func (t Tasks) list(w http.ResponseWriter, r *http.Request) {
	rows, err := t.Backend.Tasks(r.Context())
	if err != nil {
		http.Error(w, termtext.Visible(err.Error()), http.StatusInternalServerError)
		return
	}
	if rows == nil {
		rows = []TaskRow{}
	}
	for i := range rows {
		rows[i].Diff = visibleText(rows[i].Diff, 300)   // one line
		rows[i].Agent = visibleText(rows[i].Agent, 300) // its end may be the workspace's
	}
	writeJSON(w, rows)
}

func (t Tasks) diff(w http.ResponseWriter, r *http.Request, name string) {
	out, err := t.Backend.TaskDiff(r.Context(), name)
	if err != nil {
		http.Error(w, workspaceText(err.Error(), 4096), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(workspaceText(string(out), maxTaskDiff)))
}

func (t Tasks) transcript(w http.ResponseWriter, r *http.Request, name string) {
	out, err := t.Backend.TaskTranscript(r.Context(), name)
	if err != nil {
		http.Error(w, workspaceText(err.Error(), 4096), http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(workspaceText(string(out), maxTaskDiff)))
}

func (t Tasks) open(w http.ResponseWriter, r *http.Request, name string) {
	url, err := t.Backend.TaskOpen(r.Context(), name)
	if err != nil {
		http.Error(w, workspaceText(err.Error(), 4096), http.StatusConflict)
		return
	}
	writeJSON(w, map[string]string{"url": url})
}

func (t Tasks) merge(w http.ResponseWriter, r *http.Request, name string) {
	out, err := t.Backend.TaskMerge(r.Context(), name)
	if err != nil {
		msg := err.Error()
		if len(out) > 0 {
			msg += "\n" + string(out)
		}
		http.Error(w, workspaceText(msg, 8192), http.StatusConflict)
		return
	}
	w.Write([]byte(workspaceText(string(out), 8192)))
}

func (t Tasks) discard(w http.ResponseWriter, r *http.Request, name string) {
	if err := t.Backend.TaskDiscard(r.Context(), name); err != nil {
		http.Error(w, workspaceText(err.Error(), 4096), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// create is New task: the name and prompt, JSON in a body read only so
// far, handed to the backend as they are (never to a shell).
func (t Tasks) create(w http.ResponseWriter, r *http.Request, _ string) {
	var req struct{ Name, Prompt string }
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxTaskPrompt*2+1024)) // JSON escapes
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "cove: a new task is {\"name\", \"prompt\"}: "+termtext.Visible(err.Error()), http.StatusBadRequest)
		return
	}
	if len(req.Prompt) > MaxTaskPrompt {
		http.Error(w, fmt.Sprintf("cove: the prompt is %d KiB: at most %d KiB", len(req.Prompt)>>10, MaxTaskPrompt>>10), http.StatusRequestEntityTooLarge)
		return
	}
	if err := t.Backend.TaskNew(r.Context(), req.Name, req.Prompt); err != nil {
		http.Error(w, workspaceText(err.Error(), 4096), http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// visibleText is what a workspace printed, at most max bytes (cut on a
// character), with its control characters shown, never obeyed.
func workspaceText(s string, max int) string {
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "\n… (cut at " + strconv.Itoa(max>>10) + " KiB)"
	}
	return termtext.Visible(s)
}
