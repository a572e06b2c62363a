// Package task runs several agents on one project at once: each task is
// a branch and a working tree of the project of its own, in a workspace of
// its own made from the project's committed devcontainer.json, so that
// tasks cannot trample each other's files, ports or processes; a task's
// branch is merged back into the project, or the task discarded with
// everything it made.
//
// git runs only in workspaces, never here: the project's workspace makes a
// bundle of HEAD, which the task's workspace clones from; a merge goes the
// other way. This side keeps the task's record (its base commit, prompt,
// creation) in cove's own data directory, where no workspace writes, and
// carries bytes between the two workspaces without reading them, but for
// the project's .devcontainer, which it extracts with the same checks as
// an image layer (plain files and directories, names inside, sizes capped).
package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/workspace"
)

// Record is what this machine keeps of a task.
type Record struct {
	Name    string    `json:"name"`
	Project string    `json:"project"` // the project's directory
	Base    string    `json:"base"`    // the project's HEAD when the task was made
	Prompt  string    `json:"prompt,omitempty"`
	Created time.Time `json:"created"`
	// Last is the task's work as its workspace said when its agent was
	// last done: what cove tasks shows while the workspace is stopped (a
	// cluster's Pod stops with its cove).
	Last *Stat `json:"last,omitempty"`
	// Pending is set from Create until Populate has made the task's
	// branch: a task whose first start stopped on the way (its workspace
	// failed to start, cove was killed) is made on the next.
	Pending bool `json:"pending,omitempty"`
}

// Branch is the task's branch, in its tree and, once merged, the project.
func (r Record) Branch() string { return "cove/task/" + r.Name }

// Manager keeps a project's tasks.
type Manager struct {
	Project string // the project's directory, absolute
	Data    string // cove's data directory (dirs.Layout.Data)
}

// validName is a task's name: a word that is a path element, a branch
// name and part of a workspace's name as it is.
var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`) })

// CheckName says why name cannot be a task's.
func CheckName(name string) error {
	if !validName().MatchString(name) {
		return fmt.Errorf("task %q: a task's name is 1–40 lowercase letters, digits and dashes", name)
	}
	return nil
}

// dir holds the project's tasks: a record and a tree each. It is under
// cove's data directory (0700), so that no workspace can put a symlink on
// the way to a tree cove binds into another.
func (m *Manager) dir() string {
	return filepath.Join(m.Data, "tasks", workspace.Name(m.Project))
}

// Tree is the task's working tree: the project directory of its workspace.
func (m *Manager) Tree(name string) string { return filepath.Join(m.dir(), name) }

func (m *Manager) recordPath(name string) string { return filepath.Join(m.dir(), name+".json") }

// Log is where an agent started for the task in the background (the
// IDE's New task) writes what it says: beside its record, where no
// workspace writes; Discard removes it.
func (m *Manager) Log(name string) string { return filepath.Join(m.dir(), name+".log") }

// OpenLog makes the task's Log anew (its directory too, for a task not
// yet created) and opens it to write.
func (m *Manager) OpenLog(name string) (*os.File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(m.dir(), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(m.Log(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
}

// Get returns the task's record; fs.ErrNotExist when there is none.
func (m *Manager) Get(name string) (Record, error) {
	var r Record
	if err := CheckName(name); err != nil {
		return r, err
	}
	b, err := os.ReadFile(m.recordPath(name))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("task %s: its record %s: %w", name, m.recordPath(name), err)
	}
	return r, nil
}

// List returns the project's tasks, oldest first.
func (m *Manager) List() ([]Record, error) {
	ents, err := os.ReadDir(m.dir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || CheckName(name) != nil {
			continue
		}
		r, err := m.Get(name)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Create records a new task of the project as its workspace main has it
// now (HEAD) and makes its tree, holding for now only the project's
// committed .devcontainer (and .devcontainer.json): the task's workspace
// is made from it as the project's is. Populate then fills the tree.
func (m *Manager) Create(ctx context.Context, main workspace.Workspace, name, prompt string) (Record, error) {
	if err := CheckName(name); err != nil {
		return Record{}, err
	}
	if _, err := m.Get(name); err == nil {
		return Record{}, fmt.Errorf("task %s exists (cove tasks lists them; cove task discard %s removes it)", name, name)
	}
	// One exec: HEAD's commit on the first line, then a tar of what HEAD
	// holds of .devcontainer (nothing when it holds none).
	out, err := run(ctx, main, nil, 16<<20, "sh", "-c", `g() { git -c safe.directory='*' "$@"; }
g rev-parse --verify HEAD || exit 4
set -- $(g ls-tree --name-only HEAD .devcontainer .devcontainer.json); [ $# -eq 0 ] || exec git -c safe.directory='*' archive --format=tar HEAD -- "$@"`)
	var ee *exitError
	if errors.As(err, &ee) && ee.code == 4 {
		return Record{}, fmt.Errorf("task %s: the project's HEAD (a task is a branch: the project needs a git repository with a commit): %s", name, truncate(strings.TrimSpace(string(ee.out))))
	}
	head, config, _ := bytes.Cut(out, []byte("\n"))
	if err != nil {
		return Record{}, fmt.Errorf("task %s: the project's .devcontainer: %w", name, err)
	}
	base := lastCommitLine(head)
	if base == "" {
		return Record{}, fmt.Errorf("task %s: the workspace gave %q as HEAD", name, truncate(strings.TrimSpace(string(head))))
	}
	r := Record{Name: name, Project: m.Project, Base: base, Prompt: prompt, Created: time.Now().UTC(), Pending: true}
	return r, m.make(r, config)
}

// Shared is what Share found of the project's history for a task: its
// shallow list, once a ref in the project keeps the task's base, or why
// the history cannot be shared.
type Shared struct {
	shallow []byte
	err     error
}

// Share readies the project, in its workspace main, to lend its history
// to task r's tree: when every object is in its own .git, a ref
// (refs/cove/tasks/NAME) keeps the base from its gc until the task is
// discarded. It needs nothing of the task's workspace: a launcher runs it
// while that workspace starts, and hands the result to Populate.
func (m *Manager) Share(ctx context.Context, main workspace.Workspace, r Record) Shared {
	keep := ownObjects + `; g update-ref "refs/cove/tasks/$1" "$2"; [ ! -f shallow ] || cat shallow`
	shallow, err := run(ctx, main, nil, 16<<20, "sh", "-c", keep, "sh", r.Name, r.Base)
	return Shared{shallow: shallow, err: err}
}

// Populate makes the task's tree a checkout of the project's HEAD on the
// task's branch, in the task's workspace tw, and clears the record's
// Pending. Where CopyBase put the base's files in the tree (copied), git
// only sets the branch and the index on them (no file is written); else
// it checks them out. Where tw shares the project's object store
// (workspace.Spec.Origin: a workspace on this machine) and Share found
// the history shareable, the task's repository reads the project's
// history there (alternates): none of it is copied. Else the project's
// objects are carried as they are (a tar of .git/objects from the
// project's workspace, as bytes through a pipe here, unread): no pack is
// written or indexed again. A project whose objects are not all in its
// .git (a worktree, alternates, a partial clone) gets a bundle of its HEAD.
func (m *Manager) Populate(ctx context.Context, main, tw workspace.Workspace, r Record, shared Shared, copied bool) error {
	if err := m.populate(ctx, main, tw, r, shared, copied); err != nil {
		return err
	}
	r.Pending = false
	return m.save(r)
}

func (m *Manager) populate(ctx context.Context, main, tw workspace.Workspace, r Record, shared Shared, copied bool) error {
	// No templates: nothing of them is needed, and an image without them
	// makes git init warn.
	init := "git init -q --template="
	if len(r.Base) == 64 {
		init += " --object-format=sha256"
	}
	checkout := `git checkout -q -f -B "$2" "$1"`
	if copied {
		// The index gets each file's stat the first time git looks (git
		// status, the commit's refresh): the files' times are the
		// commit's, so none is "racily clean" and hashed again after.
		checkout = `git update-ref "refs/heads/$2" "$1" && git symbolic-ref HEAD "refs/heads/$2" && git read-tree "$1"`
	}
	if shared.err == nil {
		script := `set -e; cd /workspace; [ -d "$3" ]; ` + init + `; echo "$3" > .git/objects/info/alternates; cat > .git/shallow; [ -s .git/shallow ] || rm .git/shallow; ` + checkout
		in := bytesFile(shared.shallow)
		_, err := run(ctx, tw, in, 64<<10, "sh", "-c", script, "sh", r.Base, r.Branch(), workspace.OriginObjects)
		if in != nil {
			in.Close()
		}
		if err == nil {
			return nil
		}
		if _, err := run(ctx, tw, nil, 4<<10, "rm", "-rf", "/workspace/.git"); err != nil {
			return fmt.Errorf("task %s: its tree: %w", r.Name, err)
		}
	}
	err := carry(ctx, main, []string{"sh", "-c", copyObjects}, tw,
		[]string{"sh", "-c", "set -e; cd /workspace; " + init + "; tar -xo -C .git -f -; " + checkout, "sh", r.Base, r.Branch()})
	if err == nil {
		return nil
	}
	if _, err := run(ctx, tw, nil, 4<<10, "rm", "-rf", "/workspace/.git"); err != nil {
		return fmt.Errorf("task %s: its tree: %w", r.Name, err)
	}
	const bundle = "/tmp/cove-origin.bundle"
	if err := carry(ctx, main, []string{"git", "-c", "safe.directory=*", "bundle", "create", "-", "HEAD"}, tw, writeTo(bundle)); err != nil {
		return fmt.Errorf("task %s: the project's history: %w", r.Name, err)
	}
	script := `set -e; cd /workspace; ` + init + `; git fetch -q "$3" "$1"; rm -f "$3"; ` + checkout
	if _, err := run(ctx, tw, nil, 64<<10, "sh", "-c", script, "sh", r.Base, r.Branch(), bundle); err != nil {
		return fmt.Errorf("task %s: its tree: %w", r.Name, err)
	}
	return nil
}

// ownObjects succeeds, in the project's .git, when every object is in its
// own .git: not a worktree, no alternates, no partial clone; else the
// objects are not all where a task can share or copy them.
const ownObjects = `set -e; cd /workspace; g() { git -c safe.directory='*' "$@"; }
[ "$(g rev-parse --git-dir)" = .git ]; [ -z "$(g config extensions.partialClone || true)" ]
cd .git; [ ! -s objects/info/alternates ]`

// bytesFile is b as a file to read from: a pipe written by a goroutine.
func bytesFile(b []byte) *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	go func() {
		w.Write(b)
		w.Close()
	}()
	return r
}

// copyObjects writes a tar of the project's object store (and its shallow
// list) when every object is in its own .git: not a worktree, no
// alternates, no partial clone; else it fails and the bundle is used.
const copyObjects = ownObjects + `; set -- objects; [ ! -f shallow ] || set -- "$@" shallow
exec tar -c -f - "$@"`

// writeTo is the command that writes its standard input to path.
func writeTo(path string) []string { return []string{"sh", "-c", `cat > "$1"`, "sh", path} }

// Commit commits everything the task changed in its tree on its branch,
// and says whether there was anything. One script, one exec. Only what
// changed is added: git add -A takes an entry written in the index's
// second ("racily clean") for changed and hashes it again, and writing an
// object that is only in the project's store, read-only there, copies it
// into the task's: hundreds of the checkout's files, when the agent was
// quick. diff-files compares such an entry's content without writing.
// Paths are literal (a file named ":(glob)*" is that file). An author
// when the workspace's git has none.
func (m *Manager) Commit(ctx context.Context, tw workspace.Workspace, r Record, message string) (bool, error) {
	const script = `export GIT_LITERAL_PATHSPECS=1; g() { git -c safe.directory='*' "$@"; }
g update-index -q --refresh
if command -v xargs >/dev/null; then
	{ g diff-files -z --name-only && g ls-files -z -o --exclude-standard; } | xargs -0 -r git -c safe.directory='*' add -A -- || exit 1
else g add -A || exit 1; fi
g diff --cached --quiet && exit 3
[ -n "$(g config user.email)" ] || set -- -c user.name=cove -c user.email=cove@localhost "$@"
g "$@" commit -q --no-verify -m "$0"`
	_, err := run(ctx, tw, nil, 64<<10, "sh", "-c", script, message)
	var ee *exitError
	if errors.As(err, &ee) && ee.code == 3 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("task %s: commit: %w", r.Name, err)
	}
	return true, nil
}

// Stat is a task's work: commits on its branch since the base, and the
// diff's summary (git diff --shortstat), as its workspace says.
type Stat struct {
	Commits int    `json:"commits"`
	Diff    string `json:"diff"`
}

// Stat reads the task's work from its workspace.
func (m *Manager) Stat(ctx context.Context, tw workspace.Workspace, r Record) (Stat, error) {
	var s Stat
	out, err := git(ctx, tw, nil, "rev-list", "--count", r.Base+"..HEAD")
	if err != nil {
		return s, err
	}
	fmt.Sscan(string(out), &s.Commits)
	out, err = git(ctx, tw, nil, "diff", "--shortstat", r.Base, "HEAD")
	s.Diff = truncate(strings.TrimSpace(string(out)))
	return s, err
}

// Remember keeps the task's work as its workspace says it now in its
// record (Record.Last).
func (m *Manager) Remember(ctx context.Context, tw workspace.Workspace, r Record) error {
	s, err := m.Stat(ctx, tw, r)
	if err != nil {
		return err
	}
	r.Last = &s
	return m.save(r)
}

// Diff is the task's diff against its base, as its workspace says.
func (m *Manager) Diff(ctx context.Context, tw workspace.Workspace, r Record) ([]byte, error) {
	return git(ctx, tw, nil, "diff", r.Base, "HEAD")
}

// ErrConflict is Merge's error when the merge stopped on conflicts: they
// are in the project's working tree to resolve, as git left them.
var ErrConflict = errors.New("the merge has conflicts")

// Merge brings the task's branch into the project, in its workspace main:
// fetched as cove/task/NAME and merged into the project's current branch
// (a fast-forward when it can be). Its output is git's.
func (m *Manager) Merge(ctx context.Context, main, tw workspace.Workspace, r Record) ([]byte, error) {
	bundle := "/tmp/cove-task-" + r.Name + ".bundle"
	if err := carry(ctx, tw, []string{"git", "-c", "safe.directory=*", "bundle", "create", "-", r.Base + ".." + r.Branch()}, main, writeTo(bundle)); err != nil {
		return nil, fmt.Errorf("task %s: its branch (no commit since the base?): %w", r.Name, err)
	}
	if _, err := git(ctx, main, nil, "fetch", "-q", bundle, "+"+r.Branch()+":refs/heads/"+r.Branch()); err != nil {
		return nil, fmt.Errorf("task %s: fetch its branch: %w", r.Name, err)
	}
	run(ctx, main, nil, 1<<10, "rm", "-f", bundle)
	out, err := git(ctx, main, identity(ctx, main), "merge", "--no-edit", r.Branch())
	var ee *exitError
	if errors.As(err, &ee) {
		if conflicts, _ := git(ctx, main, nil, "diff", "--name-only", "--diff-filter=U"); len(bytes.TrimSpace(conflicts)) > 0 {
			return append(ee.out, conflicts...), fmt.Errorf("task %s: %w in %s: resolve them in the workspace, then git commit (or git merge --abort)",
				r.Name, ErrConflict, strings.Join(strings.Fields(string(conflicts)), ", "))
		}
	}
	return out, err
}

// Discard removes the task: its workspace (tw, nil if it has none), its
// tree, its record, its Log and its agent's run; its branch in the project too, when a merge
// brought it there. Nothing of it is left.
func (m *Manager) Discard(ctx context.Context, b workspace.Backend, main, tw workspace.Workspace, r Record) error {
	tree := m.Tree(r.Name)
	if tw != nil {
		// What the task's processes made as other users of the
		// workspace (a range of this user's subordinate ids) only they
		// can remove: it goes from inside first.
		run(ctx, tw, nil, 4<<10, "sh", "-c", `find /workspace -mindepth 1 -maxdepth 1 -exec rm -rf {} +`)
	}
	if err := b.Remove(ctx, workspace.Name(tree), true); err != nil && !strings.Contains(err.Error(), "no such") {
		return fmt.Errorf("task %s: its workspace: %w", r.Name, err)
	}
	if err := os.RemoveAll(tree); err != nil {
		return fmt.Errorf("task %s: its tree %s: %w", r.Name, tree, err)
	}
	if main != nil {
		git(ctx, main, nil, "branch", "-q", "-D", r.Branch())
		git(ctx, main, nil, "update-ref", "-d", "refs/cove/tasks/"+r.Name)
	}
	if err := os.Remove(m.Log(r.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := m.removeAgent(r.Name); err != nil {
		return err
	}
	if err := os.Remove(m.recordPath(r.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := m.releaseBase(r.Base); err != nil {
		return fmt.Errorf("task %s: the checkout of its base: %w", r.Name, err)
	}
	return nil
}

// identity is the -c options that give a commit an author when the
// workspace's git has none (a fresh image: git refuses to commit then).
func identity(ctx context.Context, ws workspace.Workspace) []string {
	if out, err := git(ctx, ws, nil, "config", "user.email"); err == nil && len(bytes.TrimSpace(out)) > 0 {
		return nil
	}
	return []string{"-c", "user.name=cove", "-c", "user.email=cove@localhost"}
}

// git runs git in ws's /workspace (with opts before the command) and
// returns its output. The tree is the workspace's: safe.directory is
// set, as the owner of /workspace inside may not be the one running git.
func git(ctx context.Context, ws workspace.Workspace, opts []string, args ...string) ([]byte, error) {
	argv := append(append([]string{"git", "-c", "safe.directory=*"}, opts...), args...)
	return run(ctx, ws, nil, 8<<20, argv...)
}

// exitError is a command that ran and failed: its status, and its output
// then its standard error.
type exitError struct {
	argv []string
	code int
	out  []byte
}

func (e *exitError) Error() string {
	return fmt.Sprintf("%s exited %d: %s", strings.Join(e.argv[:min(len(e.argv), 4)], " "), e.code, truncate(strings.TrimSpace(string(e.out))))
}

// run runs argv in ws's /workspace with stdin (nil: none) and returns what
// it wrote on its standard output, at most max bytes (what a workspace
// says is read only so far). Its standard error is kept apart: a value
// read from the output (a commit, a tar, a diff) never has a warning in
// it, wherever the warning came (a cluster's exec carries the two streams
// separately, in no order between them). A command that fails has its
// standard error, after its output, in its error.
func run(ctx context.Context, ws workspace.Workspace, stdin *os.File, max int64, argv ...string) ([]byte, error) {
	var out, errOut []byte
	stdout, outDone, err := drain(&out, max)
	if err != nil {
		return nil, err
	}
	stderr, errDone, err := drain(&errOut, 64<<10)
	if err != nil {
		stdout.Close()
		outDone()
		return nil, err
	}
	if stdin == nil {
		null, err := os.Open(os.DevNull)
		if err != nil {
			stdout.Close()
			stderr.Close()
			outDone()
			errDone()
			return nil, err
		}
		defer null.Close()
		stdin = null
	}
	code, err := ws.Exec(ctx, container.ExecRequest{Args: argv, Cwd: "/workspace"}, [3]*os.File{stdin, stdout, stderr})
	stdout.Close()
	stderr.Close()
	outDone()
	errDone()
	if err != nil {
		return out, fmt.Errorf("%s: %w", argv[0], err)
	}
	if code != 0 {
		return out, &exitError{argv: argv, code: code, out: append(append([]byte{}, out...), errOut...)}
	}
	return out, nil
}

// drain returns the write end of a pipe whose bytes go into *into, at
// most max of them (the rest read and dropped), and a wait that returns,
// *into complete, once every copy of the write end is closed.
func drain(into *[]byte, max int64) (*os.File, func(), error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		*into, _ = io.ReadAll(io.LimitReader(r, max))
		io.Copy(io.Discard, r)
		r.Close()
		close(done)
	}()
	return w, func() { <-done }, nil
}

// carry runs argv in from with its standard output the standard input of
// toArgv in to, through a pipe here: the bytes pass, unread.
func carry(ctx context.Context, from workspace.Workspace, argv []string, to workspace.Workspace, toArgv []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		_, err := run(ctx, to, r, 64<<10, toArgv...)
		r.Close()
		errc <- err
	}()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	var errb limitedBuffer
	code, err := from.Exec(ctx, container.ExecRequest{Args: argv, Cwd: "/workspace"}, [3]*os.File{null, w, errb.file()})
	w.Close()
	errb.close()
	if rerr := <-errc; err == nil {
		err = rerr
	}
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited %d: %s", strings.Join(argv[:min(len(argv), 4)], " "), code, truncate(errb.String()))
	}
	return err
}

// carryThroughFile is carry for a file of path in to: argv's output,
// kept here in between in a temporary file (unlinked; the bytes pass,
// unread), then delivered to path (see deliver). What argv writes is the
// workspace's to choose: more than max bytes is refused before it fills
// this machine's disk.
func carryThroughFile(ctx context.Context, from workspace.Workspace, argv []string, to workspace.Workspace, path string, max int64) error {
	f, err := os.CreateTemp("", "cove-carry-")
	if err != nil {
		return err
	}
	os.Remove(f.Name())
	defer f.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	copied := make(chan error, 1)
	var size int64
	go func() {
		n, err := io.Copy(f, io.LimitReader(r, max+1))
		r.Close() // past max, the writer meets a closed pipe and stops
		size = n
		copied <- err
	}()
	var errb limitedBuffer
	code, err := from.Exec(ctx, container.ExecRequest{Args: argv, Cwd: "/workspace"}, [3]*os.File{null, w, errb.file()})
	w.Close()
	errb.close()
	if cerr := <-copied; err == nil {
		err = cerr
	}
	if err == nil && size > max { // (its exit status then says the pipe closed)
		err = fmt.Errorf("%s wrote more than %d MiB: too much to carry", strings.Join(argv[:min(len(argv), 4)], " "), max>>20)
	}
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited %d: %s", strings.Join(argv[:min(len(argv), 4)], " "), code, truncate(errb.String()))
	}
	if err != nil {
		return err
	}
	return deliver(ctx, to, path, func() (io.ReadCloser, error) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return io.NopCloser(f), nil
	})
}

// deliver writes what open gives to path in to, and checks that all of it
// arrived: a cluster may drop an exec's standard input
// (kubernetes/kubernetes#112834; a task's 219-byte diff arrived empty
// there, and was merged as "nothing to apply"). The size written there is
// compared with what was read here to its end; short, it is written
// again, from a new open, three tries in all.
func deliver(ctx context.Context, to workspace.Workspace, path string, open func() (io.ReadCloser, error)) error {
	var sent int64
	var got string
	for range 3 {
		src, err := open()
		if err != nil {
			return err
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			src.Close()
			return err
		}
		in := &countingReader{r: src}
		copied := make(chan struct{})
		go func() {
			io.Copy(pw, in)
			pw.Close()
			close(copied)
		}()
		out, err := run(ctx, to, pr, 4<<10, "sh", "-c", `cat > "$1" && wc -c < "$1"`, "sh", path)
		pr.Close() // a copy still writing to a lost standard input ends
		<-copied
		src.Close()
		if err != nil {
			return err
		}
		if in.err != nil {
			return fmt.Errorf("what goes to %s: %w", path, in.err)
		}
		sent, got = in.n, strings.TrimSpace(string(out))
		if in.eof && got == strconv.FormatInt(sent, 10) {
			return nil
		}
	}
	return fmt.Errorf("%d bytes sent to %s in %s arrived as %q, three times: its standard input was lost on the way", sent, path, to.Name(), truncate(got))
}

// countingReader counts what it reads, and keeps apart an error of its
// source from one of where the bytes go (a lost standard input).
type countingReader struct {
	r   io.Reader
	n   int64
	eof bool
	err error
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	switch {
	case err == io.EOF:
		c.eof = true
	case err != nil:
		c.err = err
	}
	return n, err
}

// limitedBuffer is a command's stderr, kept up to 4 KiB.
type limitedBuffer struct {
	w    *os.File
	done chan struct{}
	b    []byte
}

func (l *limitedBuffer) file() *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		return nil
	}
	l.w, l.done = w, make(chan struct{})
	go func() {
		l.b, _ = io.ReadAll(io.LimitReader(r, 4<<10))
		io.Copy(io.Discard, r)
		r.Close()
		close(l.done)
	}()
	return w
}

func (l *limitedBuffer) close() {
	if l.w != nil {
		l.w.Close()
		<-l.done
	}
}

func (l *limitedBuffer) String() string { return strings.TrimSpace(string(l.b)) }

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
