package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/task"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

// agentTask is cove agent --task NAME: the agent in the task's own tree
// and workspace, made from the project's HEAD when the task is new; what
// it changed is committed on the task's branch when it is done.
func agentTask(c *cli.Context, e *env, dir, name string, cfg agent.Config) error {
	if err := task.CheckName(name); err != nil {
		return err
	}
	b := dirBackend(c, e, dir)
	m := &task.Manager{Project: dir, Data: e.layout.Data}
	open := taskHere
	if b.Copies() {
		open = taskOnCopy
	}
	tw, twStarted, err := open(c, m, b, name)
	if err != nil {
		return err
	}
	defer keptRunningNote(c, tw, twStarted)
	r, err := m.Get(name)
	if err != nil {
		return err
	}
	tree := m.Tree(name)
	if err := m.AgentStarted(name); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: %v\n", name, err)
	}
	runErr := runAgent(c, e, tw, tree, cfg, siblingStores(m, e.layout, name)...)
	msg := "cove task " + name
	if p := strings.TrimSpace(c.String("prompt")); p != "" {
		msg += ": " + strings.SplitN(p, "\n", 2)[0]
	}
	// The agent's last edits reach a cluster's Pod before the commit
	// there (its tools write the tree here; the sync carries them).
	if err := tw.Sync(c.Context); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: sync before the commit: %v\n", name, err)
	}
	if ok, err := m.Commit(c.Context, tw, r, msg); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: %v\n", err)
	} else if ok {
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: committed on %s (cove task diff %s; cove task merge %s)\n", name, r.Branch(), name, name)
	}
	m.Remember(c.Context, tw, r)
	m.AgentEnded(name, runErr)
	return runErr
}

// taskHere makes or reopens the task name on this machine: its tree
// shares the project's history (Populate), made in the project's
// workspace, which runs while the task is made.
func taskHere(c *cli.Context, m *task.Manager, b workspace.Backend, name string) (tw workspace.Workspace, started bool, err error) {
	main, mainStarted, err := ensure(c, b, m.Project)
	if err != nil {
		return nil, false, err
	}
	defer keptRunningNote(c, main, mainStarted)
	r, err := m.Get(name)
	created := errors.Is(err, fs.ErrNotExist)
	if created {
		r, err = m.Create(c.Context, main, name, c.String("prompt"))
	}
	if err != nil {
		return nil, false, err
	}
	// The project readies its history for the task while its files are
	// cloned here (where they can share their data) and its workspace
	// starts; the branch and its files are made in the workspace before
	// its lifecycle commands run, which find them as in the project's. A
	// task whose first start stopped on the way (Pending) is made now.
	populate := created || r.Pending
	var prepare func(ctx context.Context, ws workspace.Workspace) error
	prepared := false
	files := "checked out"
	if populate {
		shared := make(chan task.Shared, 1)
		go func() { shared <- m.Share(c.Context, main, r) }()
		type copyResult struct {
			s   task.CloneStats
			err error
		}
		base := make(chan copyResult, 1)
		early := workspace.FilesBeforeStart(workspace.Spec{Dir: m.Tree(name), Config: c.String("config")})
		copyBase := func() {
			s, err := m.CopyBase(c.Context, main, r, early)
			base <- copyResult{s, err}
		}
		if early {
			copyBase()
		} else {
			// Nothing of the workspace's start reads the project's
			// files: they are cloned meanwhile (on a file system that
			// keeps a checkout of the base; elsewhere the workspace
			// checks them out).
			go copyBase()
		}
		prepare = func(ctx context.Context, ws workspace.Workspace) error {
			prepared = true
			res := <-base
			copied := res.err == nil
			switch {
			case res.s.Kept && copied:
				files = fmt.Sprintf("cloned from the base's checkout, %d of %d sharing their data", res.s.Shared, res.s.Files)
			case copied:
				files = "written from the base's archive: its workspace needs them to start"
			case !errors.Is(res.err, task.ErrNoBase):
				fmt.Fprintf(c.App.ErrWriter, "cove: task %s: its files are checked out in its workspace: %v\n", name, res.err)
			}
			return m.Populate(ctx, main, ws, r, <-shared, copied)
		}
	}
	tw, started, err = ensureOrigin(c, b, m.Tree(name), m.Project, prepare)
	if err != nil {
		return nil, false, fmt.Errorf("task %s: its workspace: %w", name, err)
	}
	if populate {
		if !prepared { // its workspace ran already
			if err := prepare(c.Context, tw); err != nil {
				keptRunningNote(c, tw, started)
				return nil, false, err
			}
		}
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: branch %s from %s, in the workspace %s (its files %s)\n", name, r.Branch(), r.Base[:12], tw.Name(), files)
	}
	return tw, started, nil
}

// taskOnCopy makes or reopens the task name for a backend whose
// workspaces work on a copy (a cluster's): no workspace of the project
// is needed; the task's gets the project's history from its .git
// (CarryHistory) the first time it runs. A task whose history did not
// arrive (an earlier cove stopped on the way) gets it now.
func taskOnCopy(c *cli.Context, m *task.Manager, b workspace.Backend, name string) (tw workspace.Workspace, started bool, err error) {
	r, err := m.Get(name)
	if errors.Is(err, fs.ErrNotExist) {
		r, err = m.CreateForCopy(name, c.String("prompt"))
	}
	if err != nil {
		return nil, false, err
	}
	tw, started, err = ensure(c, b, m.Tree(name))
	if err != nil {
		return nil, false, fmt.Errorf("task %s: its workspace: %w", name, err)
	}
	if r.Base == "" {
		if r, err = m.CarryHistory(c.Context, tw, r); err != nil {
			keptRunningNote(c, tw, started)
			return nil, false, err
		}
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: branch %s from %s, in the workspace %s\n", name, r.Branch(), r.Base[:12], tw.Name())
	}
	return tw, started, nil
}

// siblingStores are the checkpoint stores of the project's own agent and
// of its other tasks (each starts with the same files): a task's
// checkpoints link their copies rather than write them again.
func siblingStores(m *task.Manager, layout dirs.Layout, name string) []string {
	rs, _ := m.List()
	// The project's own agent's store first: what it saved of the
	// project is what the task starts with.
	out := []string{filepath.Join(layout.State, "projects", workspace.Name(m.Project), "checkpoints")}
	for _, r := range rs {
		if r.Name != name {
			out = append(out, filepath.Join(layout.State, "projects", workspace.Name(m.Tree(r.Name)), "checkpoints"))
		}
	}
	return out
}

func tasksCommand() *cli.Command {
	return &cli.Command{
		Name:      "tasks",
		Usage:     "list DIR's tasks (cove agent --task NAME, or the IDE's New task, makes one)",
		ArgsUsage: "[DIR]",
		Description: `STATUS is the task's workspace's (running or stopped); COMMITS and DIFF are its
branch's since the commit it started from, as its running workspace says (a stopped
one's as it said when its agent was last done; a cluster's Pod stops with its cove); TESTS is the
status of the last test suite its agent ran (go test, pytest, npm test, cargo test, make
test…): passed or failed by that command's exit status as the agent recorded it, - when it
ran none or its status was not the tests' (piped on, or followed by ; or ||). AGENT is its
agent's (cove agent --task's, the IDE's New task's): working, done, failed, gone (its cove
ended without a word: killed; cove agent --task NAME goes on), - when none ran.`,
		Flags: append([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON array of {name, branch, base, status, commits, diff, tests, agent (working or failed: WHY; none when done), prompt, created}"}}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			dir, err := dirArg(c)
			if err != nil {
				return err
			}
			m := &task.Manager{Project: dir, Data: e.layout.Data}
			rs, err := m.List()
			if err != nil {
				return err
			}
			rows := taskRows(c.Context, m, rs, dirBackend(c, e, dir), e.layout.State)
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(rows)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tCOMMITS\tDIFF\tTESTS\tAGENT\tPROMPT")
			for _, w := range rows {
				p := w.Prompt
				if len(p) > 40 {
					p = p[:40] + "…"
				}
				agent, _, _ := strings.Cut(m.AgentState(w.Name), ":")
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", w.Name, w.Status, w.Commits, termtext.Visible(w.Diff), w.Tests, agent, termtext.Visible(p))
			}
			return tw.Flush()
		},
	}
}

// taskRows are the tasks rs of m as cove tasks and the IDE's Tasks view
// list them: each running task's work as its workspace says (a stopped
// one's is read when it runs again; listing starts nothing), and its
// tests' status as its agent's latest session in state has it.
func taskRows(ctx context.Context, m *task.Manager, rs []task.Record, b workspace.Backend, state string) []ide.TaskRow {
	rows := []ide.TaskRow{}
	for _, r := range rs {
		w := ide.TaskRow{Name: r.Name, Branch: r.Branch(), Base: r.Base, Status: "stopped", Prompt: r.Prompt, Created: r.Created.Format("2006-01-02T15:04:05Z"),
			Tests: taskTests(state, m.Tree(r.Name)), Agent: agentNote(m.AgentState(r.Name), r.Name)}
		if r.Last != nil {
			w.Commits, w.Diff = r.Last.Commits, r.Last.Diff
		}
		if tw, err := b.Open(ctx, workspace.Name(m.Tree(r.Name))); err == nil {
			w.Status = "running"
			if s, err := m.Stat(ctx, tw, r); err == nil {
				w.Commits, w.Diff = s.Commits, s.Diff
			}
			tw.Close()
		}
		rows = append(rows, w)
	}
	return rows
}

// agentNote is a task's agent's state (task.AgentState) as the IDE's
// rows have it: "working", "failed: WHY", "" when done or none ran.
func agentNote(state, name string) string {
	switch state {
	case task.AgentWorking:
		return "working"
	case task.AgentGone:
		return "failed: its cove ended before the agent was done (killed?); cove agent --task " + name + " goes on"
	case task.AgentDone, task.AgentNone:
		return ""
	}
	return state
}

// taskTests is the tests' status (task.TestStatusOf) of the task whose
// tree is tree, from its agent's latest sessions: the state directory is
// the host's, where no workspace writes; it is read, never made here.
func taskTests(state, tree string) string {
	if state == "" {
		return task.TestsUnknown
	}
	dir := filepath.Join(state, "projects", workspace.Name(tree), "sessions")
	infos, _ := agent.ListSessions(dir, maxTestSessions)
	var sessions [][]agent.Message
	for _, info := range infos {
		if msgs, err := agent.ReadSession(dir, info.ID); err == nil {
			sessions = append(sessions, msgs)
		}
	}
	return task.TestStatusOf(sessions...)
}

// maxTestSessions is how many of a task's agent's sessions, the latest
// first, are looked through for its last test run.
const maxTestSessions = 5

func taskCommand() *cli.Command {
	// each opens the task NAME of [DIR] with the project's workspace and
	// the task's running, and calls fn.
	each := func(fn func(c *cli.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record) error) cli.ActionFunc {
		return func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return fmt.Errorf("say the task's NAME (and the project's DIR)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			name := c.Args().Get(0)
			dir := "."
			if c.NArg() == 2 {
				dir = c.Args().Get(1)
			}
			if dir, err = absDir(dir); err != nil {
				return err
			}
			m := &task.Manager{Project: dir, Data: e.layout.Data}
			r, err := m.Get(name)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no task %s in %s (cove tasks lists them)", name, dir)
			}
			if err != nil {
				return err
			}
			b := dirBackend(c, e, dir)
			// The project's workspace, where a merge goes (and where a
			// discarded task's branch is deleted, on this machine).
			var main workspace.Workspace
			if c.Command.Name == "merge" || c.Command.Name == "discard" && !b.Copies() {
				var mainStarted bool
				if main, mainStarted, err = ensure(c, b, dir); err != nil {
					return err
				}
				defer keptRunningNote(c, main, mainStarted)
			}
			if c.Command.Name == "discard" && b.Copies() {
				// A cluster's task goes with its Pod and volume: no Pod
				// is started to be removed.
				tw, err := b.Open(c.Context, workspace.Name(m.Tree(name)))
				if err != nil {
					tw = nil
				}
				return fn(c, m, b, main, tw, r)
			}
			tw, twStarted, err := ensure(c, b, m.Tree(name))
			if err != nil {
				return fmt.Errorf("task %s: its workspace: %w", name, err)
			}
			if c.Command.Name != "discard" {
				defer keptRunningNote(c, tw, twStarted)
			}
			return fn(c, m, b, main, tw, r)
		}
	}
	return &cli.Command{
		Name:  "task",
		Usage: "review, merge or discard a task (cove agent --task NAME makes one)",
		Subcommands: []*cli.Command{
			{
				Name: "diff", Flags: kubeFlags(), Usage: "the task's changes against the commit it started from", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, _ workspace.Backend, _, tw workspace.Workspace, r task.Record) error {
					out, err := m.Diff(c.Context, tw, r)
					c.App.Writer.Write([]byte(termtext.Visible(string(out))))
					return err
				}),
			},
			{
				Name: "merge", Flags: kubeFlags(), Usage: "merge the task's branch into the project's current branch, in its workspace (a cluster's: its diff applied to the project's files)", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record) error {
					out, err := mergeTask(c.Context, m, b, main, tw, r)
					c.App.ErrWriter.Write([]byte(termtext.Visible(string(out))))
					return err
				}),
			},
			{
				Name: "discard", Flags: kubeFlags(), Usage: "remove the task: its workspace, its tree, its branch", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record) error {
					e, err := globalEnv(c)
					if err != nil {
						return err
					}
					if err := discardTask(c.Context, m, b, main, tw, r, e.layout.State); err != nil {
						return err
					}
					fmt.Fprintf(c.App.ErrWriter, "cove: task %s discarded\n", r.Name)
					return nil
				}),
			},
		},
	}
}

// mergeTask is cove task merge and the IDE's Merge: the task's branch
// merged in the project's workspace main; where that works on a copy (a
// cluster's Pod, no .git there), the task's diff applied to its files,
// which the sync brings home for the user to commit.
func mergeTask(ctx context.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record) ([]byte, error) {
	if b.Copies() {
		return m.Apply(ctx, main, tw, r)
	}
	return m.Merge(ctx, main, tw, r)
}

// discardTask is cove task discard and the IDE's Discard: the task's
// workspace handle closed (its removal stops it), then all of it removed,
// its agent's sessions and checkpoints in the state directory too:
// nothing of a discarded task is left.
func discardTask(ctx context.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record, state string) error {
	if tw != nil {
		tw.Close()
	}
	if err := m.Discard(ctx, b, main, tw, r); err != nil {
		return err
	}
	if state == "" {
		return nil
	}
	if err := os.RemoveAll(filepath.Join(state, "projects", workspace.Name(m.Tree(r.Name)))); err != nil {
		return fmt.Errorf("task %s: its agent's sessions: %w", r.Name, err)
	}
	return nil
}

// taskPanel is the IDE's Tasks view on the launcher (ide.TaskBackend):
// the project's tasks, through the same calls as cove tasks and cove
// task, with the project's workspace the launcher serves. A task's
// workspace is opened when it runs; a stopped one is not started from
// here (that is cove task merge's, with the flags the user gives it).
type taskPanel struct {
	m      *task.Manager
	b      workspace.Backend
	main   workspace.Workspace // the launcher's: not closed here
	layout dirs.Layout         // where the tasks' agents keep their sessions
	root   string              // --root, for the cove up of a task's own IDE
	// shape is the launcher's flags that shape a workspace (--image…),
	// for the tasks' workspaces its New task makes; where, those of them
	// that say where the workspaces are (--kube…), for a task's own IDE.
	shape, where []string

	mu sync.Mutex // one merge or discard at a time: git in main is one tree

	amu    sync.Mutex
	agents map[string]*taskAgent // the agents New task started, by task
}

// taskAgent is an agent the launcher started on a task (New task).
type taskAgent struct {
	prompt string
	done   bool
	failed string // why, when it ended so
}

// How long the Tasks view waits on the workspaces: a task's workspace
// that does not answer (it is the agent's, and may be busy or hostile)
// leaves the list without its stat, and a diff or merge with an error,
// not a request that hangs.
const (
	taskListWait  = 15 * time.Second
	taskDiffWait  = time.Minute
	taskMergeWait = 5 * time.Minute
)

func (p *taskPanel) Tasks(ctx context.Context) ([]ide.TaskRow, error) {
	ctx, cancel := context.WithTimeout(ctx, taskListWait)
	defer cancel()
	rs, err := p.m.List()
	if err != nil {
		return nil, err
	}
	rows := taskRows(ctx, p.m, rs, p.b, p.layout.State)
	// The agents New task started: how they are, and the tasks they
	// have not recorded yet (their workspace is being made).
	p.amu.Lock()
	defer p.amu.Unlock()
	listed := map[string]bool{}
	for i, w := range rows {
		listed[w.Name] = true
		if a := p.agents[w.Name]; a != nil {
			rows[i].Agent = a.state()
		}
	}
	var unlisted []string
	for name, a := range p.agents {
		switch {
		case listed[name]:
		case a.done && a.failed == "":
			delete(p.agents, name) // its task was discarded since (cove task discard)
		default:
			unlisted = append(unlisted, name)
		}
	}
	slices.Sort(unlisted)
	for _, name := range unlisted {
		a, status := p.agents[name], "starting"
		if a.done {
			status = "failed" // before it made its task: Discard forgets it
		}
		rows = append(rows, ide.TaskRow{Name: name, Branch: task.Record{Name: name}.Branch(), Status: status, Tests: task.TestsUnknown, Prompt: a.prompt, Agent: a.state()})
	}
	return rows, nil
}

func (a *taskAgent) state() string {
	switch {
	case !a.done:
		return "working"
	case a.failed != "":
		return "failed: " + a.failed
	}
	return ""
}

// TaskNew is the Tasks view's New task: cove agent --yes --task NAME
// --prompt PROMPT DIR, run by this launcher in the background with its
// own environment (the agent panel's model, as the user's config and
// COVE_* give it) and workspace flags; the agent's command runs on the
// host, never a shell, with the name checked and the prompt one
// argument. It outlives the window and the launcher (a session of its
// own, its output in the task's Log); there is no terminal to approve
// its commands, and its tree and workspace are the task's own: --yes.
func (p *taskPanel) TaskNew(ctx context.Context, name, prompt string) error {
	if err := task.CheckName(name); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(prompt) == "":
		return fmt.Errorf("task %s: say what it is to do (the prompt is empty)", name)
	case len(prompt) > ide.MaxTaskPrompt:
		return fmt.Errorf("task %s: the prompt is %d KiB, at most %d KiB", name, len(prompt)>>10, ide.MaxTaskPrompt>>10)
	case !utf8.ValidString(prompt) || strings.ContainsRune(prompt, 0):
		return fmt.Errorf("task %s: the prompt is not text", name)
	}
	p.amu.Lock()
	defer p.amu.Unlock()
	if a := p.agents[name]; a != nil && !a.done {
		return fmt.Errorf("task %s is starting: choose another name", name)
	}
	if _, err := p.m.Get(name); err == nil {
		return fmt.Errorf("task %s exists: choose another name (or discard it first)", name)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	home, _ := os.UserHomeDir()
	cfg, err := agent.LoadConfig(home, p.m.Project, os.Getenv, agent.Config{})
	if err == nil {
		_, err = cfg.NewProvider()
	}
	if err != nil {
		return fmt.Errorf("task %s: no model for its agent (the agent panel sets one up): %w", name, err)
	}
	bin, err := coveBinary()
	if err != nil {
		return err
	}
	log, err := p.m.OpenLog(name)
	if err != nil {
		return fmt.Errorf("task %s: %w", name, err)
	}
	defer log.Close()
	args := append(append([]string{"agent", "--yes", "--task", name, "--prompt=" + prompt}, p.shape...), "--", p.m.Project)
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	if p.root != "" {
		cmd.Env = append(cmd.Env, "COVE_ROOT="+p.root)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("task %s: start its agent: %w", name, err)
	}
	a := &taskAgent{prompt: prompt}
	if p.agents == nil {
		p.agents = map[string]*taskAgent{}
	}
	p.agents[name] = a
	go func() {
		err := cmd.Wait()
		p.amu.Lock()
		defer p.amu.Unlock()
		a.done = true
		if err != nil {
			a.failed = err.Error()
			if b, rerr := readTail(p.m.Log(name), 4<<10); rerr == nil && strings.TrimSpace(string(b)) != "" {
				a.failed = lastLine(string(b))
			}
		}
	}()
	return nil
}

// readTail is the last max bytes of the file at path.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(fi.Size()-max, io.SeekStart)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// open returns the task's record and its running workspace (nil when it
// is stopped, with the error saying what to do).
func (p *taskPanel) open(ctx context.Context, name, verb string) (task.Record, workspace.Workspace, error) {
	r, err := p.m.Get(name)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil, fmt.Errorf("no task %s (cove tasks lists them)", name)
	}
	if err != nil {
		return r, nil, err
	}
	tw, err := p.b.Open(ctx, workspace.Name(p.m.Tree(name)))
	if err != nil {
		return r, nil, fmt.Errorf("task %s: its workspace is not running (⧉ in the Tasks view, or cove task %s %s %s, starts it): %w", name, verb, name, p.m.Project, err)
	}
	return r, tw, nil
}

func (p *taskPanel) TaskDiff(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, taskDiffWait)
	defer cancel()
	r, tw, err := p.open(ctx, name, "diff")
	if err != nil {
		return nil, err
	}
	defer tw.Close()
	return p.m.Diff(ctx, tw, r)
}

func (p *taskPanel) TaskMerge(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, taskMergeWait)
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	r, tw, err := p.open(ctx, name, "merge")
	if err != nil {
		return nil, err
	}
	defer tw.Close()
	return mergeTask(ctx, p.m, p.b, p.main, tw, r)
}

// TaskTranscript is the task's agent's latest session (its state is the
// task tree's, as cove agent --task keeps it), as text: each message,
// tool calls and results cut short.
func (p *taskPanel) TaskTranscript(ctx context.Context, name string) ([]byte, error) {
	if _, err := p.m.Get(name); err != nil {
		return nil, fmt.Errorf("no task %s (cove tasks lists them)", name)
	}
	state, err := agent.OpenState(p.layout, workspace.Name(p.m.Tree(name)))
	if err != nil {
		return nil, err
	}
	msgs, err := agent.ReadSession(state.Sessions, "")
	if err != nil {
		return nil, fmt.Errorf("task %s: its agent's session: %w", name, err)
	}
	var b strings.Builder
	cut := func(s string, n int) string {
		if len(s) > n {
			return strings.ToValidUTF8(s[:n], "") + "…"
		}
		return s
	}
	for _, m := range msgs {
		switch m.Role {
		case "user":
			fmt.Fprintf(&b, "▶ you\n%s\n\n", m.Content)
		case "assistant":
			fmt.Fprintf(&b, "◀ agent\n%s\n", m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, "  → %s %s\n", c.Name, cut(string(c.Args), 500))
			}
			b.WriteString("\n")
		case "tool":
			what := "result"
			if m.IsError {
				what = "failed"
			}
			fmt.Fprintf(&b, "  ← %s\n%s\n\n", what, cut(m.Content, 2000))
		}
	}
	return []byte(b.String()), nil
}

// TaskOpen is cove up --detach on the task's tree: a launcher of its
// own (or the one that serves it already), which starts the task's
// workspace as it was made if it stopped; its URL is this binary's
// output, checked for its shape all the same.
func (p *taskPanel) TaskOpen(ctx context.Context, name string) (string, error) {
	if _, err := p.m.Get(name); err != nil {
		return "", fmt.Errorf("no task %s (cove tasks lists them)", name)
	}
	bin, err := coveBinary()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, taskMergeWait)
	defer cancel()
	// The task's workspace is where the launcher's are: on its cluster
	// with --kube (without, cove up would make a local one of the tree).
	cmd := exec.CommandContext(ctx, bin, append(append([]string{"up", "--detach", "--no-browser"}, p.where...), p.m.Tree(name))...)
	cmd.Env = os.Environ()
	if p.root != "" {
		cmd.Env = append(cmd.Env, "COVE_ROOT="+p.root)
	}
	// What it says on stderr holds the workspace's lifecycle commands'
	// output: only its end is kept, for the error.
	errb := &tailWriter{max: 4 << 10}
	cmd.Stderr = errb
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("task %s: cove up %s: %w: %s", name, p.m.Tree(name), err, lastLine(string(errb.b)))
	}
	url := strings.TrimSpace(lastLine(string(out)))
	if !regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]+$`).MatchString(url) {
		return "", fmt.Errorf("task %s: cove up printed %q, not a URL", name, url)
	}
	return url, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	b   []byte
	max int
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	if len(w.b) > w.max {
		w.b = w.b[len(w.b)-w.max:]
	}
	return len(p), nil
}

// lastLine is s's last line that is not empty.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TaskDiscard removes a stopped task too: nothing of it needs to run for
// that.
func (p *taskPanel) TaskDiscard(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, taskMergeWait)
	defer cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.amu.Lock()
	a := p.agents[name]
	working := a != nil && !a.done
	p.amu.Unlock()
	if working {
		return fmt.Errorf("task %s: its agent is still working (its workspace stops with cove stop %s)", name, workspace.Name(p.m.Tree(name)))
	}
	r, tw, err := p.open(ctx, name, "discard")
	if r.Name == "" {
		if a != nil { // an agent that failed before it made its task
			p.amu.Lock()
			delete(p.agents, name)
			p.amu.Unlock()
			os.Remove(p.m.Log(name))
			return nil
		}
		return err
	}
	if err := discardTask(ctx, p.m, p.b, p.main, tw, r, p.layout.State); err != nil {
		return err
	}
	p.amu.Lock()
	delete(p.agents, name)
	p.amu.Unlock()
	return nil
}

// absDir is dir made absolute, if it is a directory.
func absDir(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: no such directory", dir)
	}
	return filepath.Abs(dir)
}
