package ide

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
)

// Source control: git runs here, in the workspace, as the project's own
// tool (never on the host: see the security model), for the page's
// Source Control view:
//
//	GET  /api/git/status             the branch and the changed files
//	GET  /api/git/diff?path=P&staged=1  a file's two sides: the index and the
//	                                 working tree, or HEAD and the index (staged)
//	GET  /api/git/branches           the local branches
//	POST /api/git/stage?path=P       git add
//	POST /api/git/unstage?path=P     take it out of the index again
//	POST /api/git/discard?path=P     throw away the working tree's change
//	POST /api/git/commit             commit the index, the body the message
//	POST /api/git/switch?branch=B&create=1  switch branch (a new one with create)
//	POST /api/git/stage-hunk, unstage-hunk  one hunk (githunks.go)
//
// Paths are the project's, checked as every file path is; git's output
// is bounded.
type gitAPI struct{ dir *projectfs.Dir }

// maxGitOutput bounds what one git command may print (a status of a huge
// tree, a diff side): beyond it the answer is an error, not a buffer.
const maxGitOutput = 16 << 20

// gitError is git's own complaint, for the page to show.
type gitError struct{ msg string }

func (e *gitError) Error() string { return e.msg }

// run runs git with args in the project, stdin as its input, and returns
// what it printed.
func (g gitAPI) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "core.quotepath=off", "-c", "color.ui=false"}, args...)...)
	cmd.Dir = g.dir.Root
	// No pager, no editor, no prompt for a password: nobody is there to
	// answer it.
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=true", "LC_ALL=C",
		// A path is a file's name, never pathspec magic (":(top)", "*").
		"GIT_LITERAL_PATHSPECS=1",
		// The view's reads come whenever a file changes; a git status
		// would refresh the index under .git/index.lock, and a commit the
		// user makes meanwhile (here or in a terminal) would fail on it.
		// What a command must lock, it still does.
		"GIT_OPTIONAL_LOCKS=0")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb limitedBuffer
	out.max, errb.max = maxGitOutput, 4096
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if out.over {
		return nil, &gitError{fmt.Sprintf("git %s printed more than %d bytes", args[0], maxGitOutput)}
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.Bytes(), &gitError{strings.TrimSpace(errb.String())}
		}
		return nil, fmt.Errorf("run git in the workspace: %w (is git installed in the image?)", err)
	}
	return out.Bytes(), nil
}

// limitedBuffer keeps what is written up to max bytes and notes more.
type limitedBuffer struct {
	bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		b.over = true
		return 0, errors.New("too much output")
	}
	return b.Buffer.Write(p)
}

// gitFile is one changed file in the status: X and Y are git's letters
// for the index and the working tree (M, A, D, R, ?, U…).
type gitFile struct {
	Path string `json:"path"`
	From string `json:"from,omitempty"` // a rename's old path
	X    string `json:"x"`
	Y    string `json:"y"`
}

func (g gitAPI) status(w http.ResponseWriter, r *http.Request) {
	out, err := g.run(r.Context(), nil, "status", "--porcelain=v1", "-z", "--branch", "--untracked-files=all")
	if err != nil {
		gitHTTPError(w, err)
		return
	}
	res := struct {
		Branch string    `json:"branch"`
		Files  []gitFile `json:"files"`
	}{Files: []gitFile{}}
	recs := strings.Split(string(out), "\x00")
	for i := 0; i < len(recs); i++ {
		rec := recs[i]
		if len(rec) < 3 {
			continue
		}
		if strings.HasPrefix(rec, "## ") {
			res.Branch = strings.TrimPrefix(rec, "## ")
			continue
		}
		f := gitFile{X: rec[:1], Y: rec[1:2], Path: rec[3:]}
		if f.X == "R" || f.X == "C" {
			if i+1 < len(recs) {
				f.From = recs[i+1]
				i++
			}
		}
		res.Files = append(res.Files, f)
	}
	writeJSON(w, res)
}

// path is the request's path, checked to be the project's.
func (g gitAPI) path(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", &gitError{"no path"}
	}
	rel, err := g.dir.Rel(p)
	if err != nil {
		return "", err
	}
	// One file or folder of the project: not the project itself, nothing
	// above it, no option.
	if !filepath.IsLocal(rel) || rel == "." {
		return "", fmt.Errorf("%s is not a path in the project", p)
	}
	return rel, nil
}

func (g gitAPI) diff(w http.ResponseWriter, r *http.Request) {
	p, err := g.path(r)
	if err != nil {
		httpError(w, err)
		return
	}
	// Each side as git has it; a side that does not exist (a new file,
	// a deleted one) is empty.
	var res struct {
		Original string    `json:"original"`
		Modified string    `json:"modified"`
		Hunks    []gitHunk `json:"hunks"` // git's, to stage or unstage one by one
	}
	if r.URL.Query().Get("staged") == "1" {
		o, _ := g.run(r.Context(), nil, "show", "HEAD:"+p)
		m, _ := g.run(r.Context(), nil, "show", ":"+p)
		res.Original, res.Modified = string(o), string(m)
	} else {
		o, err := g.run(r.Context(), nil, "show", ":"+p)
		if err != nil {
			o, _ = g.run(r.Context(), nil, "show", "HEAD:"+p)
		}
		if fi, err := g.dir.Stat(p); err == nil && fi.Size() <= maxFileSize {
			m, _ := g.dir.ReadFile(p)
			res.Modified = string(m)
		}
		res.Original = string(o)
	}
	// None when git cannot say (an untracked file, a binary one): the
	// page shows the sides without a hunk's buttons.
	d, _ := g.fileDiff(r.Context(), p, r.URL.Query().Get("staged") == "1")
	res.Hunks = append([]gitHunk{}, d.hunks...)
	writeJSON(w, res)
}

func (g gitAPI) branches(w http.ResponseWriter, r *http.Request) {
	out, err := g.run(r.Context(), nil, "for-each-ref", "--format=%(refname:short)", "refs/heads")
	if err != nil {
		gitHTTPError(w, err)
		return
	}
	cur, _ := g.run(r.Context(), nil, "branch", "--show-current")
	names := strings.Fields(string(out))
	if names == nil {
		names = []string{}
	}
	writeJSON(w, map[string]any{"current": strings.TrimSpace(string(cur)), "branches": names})
}

// change runs one of the commands that change the repository.
func (g gitAPI) change(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var args []string
	var stdin []byte
	switch r.PathValue("op") {
	case "stage", "unstage", "discard":
		p, err := g.path(r)
		if err != nil {
			httpError(w, err)
			return
		}
		args = map[string][]string{
			"stage": {"add", "-A", "--", p},
			// reset, not restore --staged: it works before the first commit too.
			"unstage": {"reset", "-q", "--", p},
			"discard": {"checkout", "-q", "--", p},
		}[r.PathValue("op")]
		if r.PathValue("op") == "discard" && g.untracked(r.Context(), p) {
			args = []string{"clean", "-q", "-f", "--", p}
		}
	case "commit":
		msg, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || strings.TrimSpace(string(msg)) == "" {
			http.Error(w, "a commit needs a message", http.StatusBadRequest)
			return
		}
		args, stdin = []string{"commit", "-q", "-F", "-"}, msg
	case "switch":
		b := q.Get("branch")
		if b == "" || strings.HasPrefix(b, "-") {
			http.Error(w, "no such branch name: "+b, http.StatusBadRequest)
			return
		}
		args = []string{"switch", "-q", b}
		if q.Get("create") == "1" {
			args = []string{"switch", "-q", "-c", b}
		}
	default:
		http.NotFound(w, r)
		return
	}
	if _, err := g.run(r.Context(), stdin, args...); err != nil {
		gitHTTPError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// untracked says whether p is a file git does not track.
func (g gitAPI) untracked(ctx context.Context, p string) bool {
	_, err := g.run(ctx, nil, "ls-files", "--error-unmatch", "--", p)
	return err != nil
}

func gitHTTPError(w http.ResponseWriter, err error) {
	var ge *gitError
	if errors.As(err, &ge) {
		http.Error(w, "git: "+ge.msg, http.StatusConflict)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}
