package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/cove-sh/cove/agent"
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
	main, mainStarted, err := ensure(c, b, dir)
	if err != nil {
		return err
	}
	defer keptRunningNote(c, main, mainStarted)
	m := &task.Manager{Project: dir, Data: e.layout.Data}
	r, err := m.Get(name)
	created := errors.Is(err, fs.ErrNotExist)
	if created {
		r, err = m.Create(c.Context, main, name, c.String("prompt"))
	}
	if err != nil {
		return err
	}
	tree := m.Tree(name)
	tw, twStarted, err := ensure(c, b, tree)
	if err != nil {
		return fmt.Errorf("task %s: its workspace: %w", name, err)
	}
	defer keptRunningNote(c, tw, twStarted)
	if created {
		if err := m.Populate(c.Context, main, tw, r); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: branch %s from %s, in the workspace %s\n", name, r.Branch(), r.Base[:12], tw.Name())
	}
	runErr := runAgent(c, e, tw, tree, cfg)
	msg := "cove task " + name
	if p := strings.TrimSpace(c.String("prompt")); p != "" {
		msg += ": " + strings.SplitN(p, "\n", 2)[0]
	}
	if ok, err := m.Commit(c.Context, tw, r, msg); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: %v\n", err)
	} else if ok {
		fmt.Fprintf(c.App.ErrWriter, "cove: task %s: committed on %s (cove task diff %s; cove task merge %s)\n", name, r.Branch(), name, name)
	}
	return runErr
}

func tasksCommand() *cli.Command {
	return &cli.Command{
		Name:      "tasks",
		Usage:     "list DIR's tasks (cove agent --task NAME makes one)",
		ArgsUsage: "[DIR]",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON array of {name, branch, base, status, commits, diff, prompt, created}"}},
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
			b := dirBackend(c, e, dir)
			type row struct {
				Name    string `json:"name"`
				Branch  string `json:"branch"`
				Base    string `json:"base"`
				Status  string `json:"status"`
				Commits int    `json:"commits"`
				Diff    string `json:"diff"`
				Prompt  string `json:"prompt"`
				Created string `json:"created"`
			}
			rows := []row{}
			for _, r := range rs {
				w := row{Name: r.Name, Branch: r.Branch(), Base: r.Base, Status: "stopped", Prompt: r.Prompt, Created: r.Created.Format("2006-01-02T15:04:05Z")}
				// A stopped task's work is read when it runs again; listing
				// starts nothing.
				if tw, err := b.Open(c.Context, workspace.Name(m.Tree(r.Name))); err == nil {
					w.Status = "running"
					if s, err := m.Stat(c.Context, tw, r); err == nil {
						w.Commits, w.Diff = s.Commits, s.Diff
					}
					tw.Close()
				}
				rows = append(rows, w)
			}
			if c.Bool("json") {
				return json.NewEncoder(c.App.Writer).Encode(rows)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TASK\tSTATUS\tCOMMITS\tDIFF\tPROMPT")
			for _, w := range rows {
				p := w.Prompt
				if len(p) > 40 {
					p = p[:40] + "…"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", w.Name, w.Status, w.Commits, termtext.Visible(w.Diff), termtext.Visible(p))
			}
			return tw.Flush()
		},
	}
}

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
			main, mainStarted, err := ensure(c, b, dir)
			if err != nil {
				return err
			}
			defer keptRunningNote(c, main, mainStarted)
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
				Name: "diff", Usage: "the task's changes against the commit it started from", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, _ workspace.Backend, _, tw workspace.Workspace, r task.Record) error {
					out, err := m.Diff(c.Context, tw, r)
					c.App.Writer.Write([]byte(termtext.Visible(string(out))))
					return err
				}),
			},
			{
				Name: "merge", Usage: "merge the task's branch into the project's current branch, in its workspace", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, _ workspace.Backend, main, tw workspace.Workspace, r task.Record) error {
					out, err := m.Merge(c.Context, main, tw, r)
					c.App.ErrWriter.Write([]byte(termtext.Visible(string(out))))
					return err
				}),
			},
			{
				Name: "discard", Usage: "remove the task: its workspace, its tree, its branch", ArgsUsage: "NAME [DIR]",
				Action: each(func(c *cli.Context, m *task.Manager, b workspace.Backend, main, tw workspace.Workspace, r task.Record) error {
					tw.Close()
					if err := m.Discard(c.Context, b, main, tw, r); err != nil {
						return err
					}
					fmt.Fprintf(c.App.ErrWriter, "cove: task %s discarded\n", r.Name)
					return nil
				}),
			},
		},
	}
}

// absDir is dir made absolute, if it is a directory.
func absDir(dir string) (string, error) {
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: no such directory", dir)
	}
	return filepath.Abs(dir)
}
