package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

func workspaceFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "image", Usage: "workspace image `REF` (default: devcontainer.json's, else the \"image\" of ~/.config/cove/settings.json, else " + workspace.DefaultImage + ")"},
		&cli.BoolFlag{Name: "fresh", Usage: "start the workspace from the image again, dropping what was installed in it"},
		&cli.StringFlag{Name: "config", Usage: "the project's devcontainer.json at `PATH`, when it has several"},
	}, limitFlags()...)
}

// trustFlag is cove up's and cove shell's --trust (cove agent's trusts its
// own project config).
func trustFlag() cli.Flag {
	return &cli.BoolFlag{Name: "trust", Usage: "trust the project's devcontainer.json as it is now: its initializeCommand runs on this host, its host mounts, runArgs and ${localEnv:…} apply"}
}

// attaches says whether the command attaches a user to the workspace (the
// spec's postAttachCommand runs then): cove up and cove shell.
func attaches(c *cli.Context) bool {
	name := c.Command.Name
	return (name == "up" || name == "shell" || name == c.App.Name) && !c.Bool("serve")
}

// dirArg is the command's DIR argument, absolute; the current directory
// when there is none.
func dirArg(c *cli.Context) (string, error) {
	dir := c.Args().First()
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// cove upp: a command mistyped reads as a directory.
		if c.Command.Name == c.App.Name && !strings.ContainsRune(dir, '/') {
			if near := nearestCommand(c.App, dir); near != "" {
				return "", fmt.Errorf("unknown command %s (did you mean %s?)", dir, near)
			}
		}
		return "", fmt.Errorf("%s: no such directory", dir)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s: not a directory (cove works on a project directory)", dir)
	}
	return abs, nil
}

// nearestCommand is the command whose name is within two edits of name,
// "" if none is.
func nearestCommand(app *cli.App, name string) string {
	best, bestDist := "", 3
	for _, cmd := range app.Commands {
		if cmd.Hidden {
			continue
		}
		if d := editDistance(name, cmd.Name); d < bestDist {
			best, bestDist = cmd.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:      "shell",
		Usage:     "a shell in DIR's workspace (started if needed)",
		ArgsUsage: "[DIR]",
		Flags:     append(append(workspaceFlags(), trustFlag()), kubeFlags()...),
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			dir, err := dirArg(c)
			if err != nil {
				return err
			}
			ws, started, err := ensure(c, dirBackend(c, e, dir), dir)
			if err != nil {
				return err
			}
			defer keptRunningNote(c, ws, started)
			if !term.IsTerminal(int(os.Stdin.Fd())) {
				// Commands on stdin (echo make | cove shell): a shell
				// reading them, as sh -s does, with no terminal.
				req := container.ExecRequest{Args: []string{"/bin/sh", "-c", "command -v bash >/dev/null && exec bash -s; exec sh -s"}, Cwd: "/workspace"}
				stdio, closeStdio, err := workspace.ExecStdio([3]*os.File{os.Stdin, os.Stdout, os.Stderr}, true)
				if err != nil {
					return err
				}
				defer closeStdio()
				return execIn(c, ws, req, stdio)
			}
			req := container.ExecRequest{Args: []string{"/bin/sh", "-c", "command -v bash >/dev/null && exec bash -l; exec sh -l"}, Cwd: "/workspace", Terminal: true}
			return execIn(c, ws, req, [3]*os.File{})
		},
	}
}

// workspaceSpec is what the command's flags say of DIR's workspace.
func workspaceSpec(c *cli.Context, dir string) (workspace.Spec, error) {
	limits, conf, err := limitsFrom(c)
	if err != nil {
		return workspace.Spec{}, err
	}
	ports, err := publishedFlags(c)
	if err != nil {
		return workspace.Spec{}, err
	}
	return workspace.Spec{
		Dir: dir, Image: c.String("image"), Fresh: c.Bool("fresh"), Config: c.String("config"), Trust: c.Bool("trust"),
		Limits: limits, Confinement: conf, Attach: attaches(c), Ports: ports,
	}, nil
}

// ensure starts DIR's workspace on the command's backend if it is not
// running; started says it was not (on a cluster: always, the Pod's sync
// was not running).
func ensure(c *cli.Context, b workspace.Backend, dir string) (ws workspace.Workspace, started bool, err error) {
	return ensureOrigin(c, b, dir, "", nil)
}

// ensureOrigin is ensure for a task's tree: its workspace shares the git
// objects of the project origin (workspace.Spec.Origin), and prepare
// (nil: nothing) runs before its lifecycle commands on a start
// (workspace.Spec.Prepare).
func ensureOrigin(c *cli.Context, b workspace.Backend, dir, origin string, prepare func(context.Context, workspace.Workspace) error) (ws workspace.Workspace, started bool, err error) {
	made, err := remember(c, b, dir)
	if err != nil {
		return nil, false, err
	}
	s, err := workspaceSpec(c, dir)
	if err != nil {
		return nil, false, err
	}
	s.Made, s.Origin, s.Prepare = made, origin, prepare
	started = !b.Running(dir)
	ws, err = b.Ensure(c.Context, s)
	return ws, started, err
}

// definingFlags are the flags that make a workspace what it is: kept with
// it (workspace.Made), so that a plain cove up starts it as it was. A new
// one (cove up's -p) is remembered by adding its name here.
var definingFlags = []string{"image", "config", "memory", "pids", "cpus", "net", "security-opt", "publish"}

// remember gives the command the flags DIR's workspace was made with
// where it gives none itself, and returns them as the command now has
// them, to be kept with the workspace.
func remember(c *cli.Context, b workspace.Backend, dir string) (workspace.Made, error) {
	was, err := b.MadeWith(dir)
	if err != nil {
		return nil, err
	}
	now := workspace.Made{}
	for _, name := range definingFlags {
		f := commandFlag(c, name)
		if f == nil {
			continue // not this command's (cove agent has no --net)
		}
		if !c.IsSet(name) {
			for _, v := range was[name] {
				if err := c.Set(name, v); err != nil {
					return nil, fmt.Errorf("--%s %s, as the workspace was made: %w", name, v, err)
				}
			}
		}
		if !c.IsSet(name) {
			continue
		}
		if _, many := f.(*cli.StringSliceFlag); many {
			now[name] = c.StringSlice(name)
		} else {
			now[name] = []string{fmt.Sprint(c.Value(name))}
		}
	}
	return now, nil
}

// commandFlag is the command's flag name, nil if it has none.
func commandFlag(c *cli.Context, name string) cli.Flag {
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

// keptRunningNote says, when a command that is not the workspace's
// launcher (cove shell, cove agent) started the workspace, that it goes
// on running, and how to stop it. It lets go of the workspace first (on a
// cluster: a last sync round).
func keptRunningNote(c *cli.Context, ws workspace.Workspace, started bool) {
	if err := ws.Close(); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: %v\n", err)
	}
	if started && ws.Running() {
		flags := strings.Join(append([]string{""}, ws.ExecFlags()...), " ")
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s keeps running (cove stop%s %s stops it; cove up%s opens it)\n", ws.Name(), flags, ws.Name(), flags)
	}
}
