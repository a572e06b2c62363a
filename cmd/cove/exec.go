package main

import (
	"fmt"
	"os"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a running container (a workspace by its name or its directory: ./DIR, .)",
		ArgsUsage: "NAME|DIR CMD [ARG...]",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a terminal"},
			&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "keep standard input open"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working `DIR` inside (default: the container's)"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set `K=V`"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "`UID[:GID]` or name[:group] (default: the container's)"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() < 2 {
				return fmt.Errorf("exec takes a container name and a command (see cove ps)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			name, err := e.nameArg(c, c.Args().First())
			if err != nil {
				return err
			}
			ws, err := e.backend(c).Open(c.Context, name)
			if err != nil {
				return err
			}
			req := container.ExecRequest{Args: c.Args().Tail(), Env: envFlags(c), Cwd: c.String("workdir"), User: c.String("user"), Terminal: c.Bool("tty")}
			if req.Terminal {
				// The terminal is relayed alone: a second reader of our
				// stdin (the pipe below) took the keys meant for it.
				return execIn(c, ws, req, [3]*os.File{})
			}
			stdio, closeStdio, err := workspace.ExecStdio([3]*os.File{os.Stdin, os.Stdout, os.Stderr}, c.Bool("interactive"))
			if err != nil {
				return err
			}
			defer closeStdio()
			return execIn(c, ws, req, stdio)
		},
	}
}

// execIn runs req in ws and returns its exit status as cove's.
func execIn(c *cli.Context, ws workspace.Workspace, req container.ExecRequest, stdio [3]*os.File) error {
	code, err := ws.Exec(c.Context, req, stdio)
	if code != 0 {
		return &exitError{code: code, err: err}
	}
	return err
}
