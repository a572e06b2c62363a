package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

// psJSON is one element of `cove ps --json` (the command-line contract).
type psJSON struct {
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Image   string    `json:"image"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Dir     string    `json:"dir"`
	Where   string    `json:"where,omitempty"`
}

func (e *env) states() container.StateDir {
	return container.StateDir(filepath.Join(e.layout.Runtime, "containers"))
}

func psCommand() *cli.Command {
	return &cli.Command{
		Name:  "ps",
		Usage: "list containers",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "all", Aliases: []string{"a"}, Usage: "also the ones that exited"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON array of {name, id, pid, image, status, created, dir, where}"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			list, err := e.backend(c).List(c.Context, c.Bool("all"))
			if err != nil {
				return err
			}
			if !c.Bool("kube") {
				// What this machine's launchers serve elsewhere: the PID
				// is the launcher's.
				list = append(list, servedElsewhere(e)...)
			}
			out := []psJSON{}
			for _, w := range list {
				out = append(out, psJSON{Name: w.Name, ID: w.ID, PID: w.Pid, Image: w.Image, Status: w.Status, Created: w.Created, Dir: w.Dir, Where: w.Where})
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPID\tIMAGE\tSTATUS\tCREATED\tWHERE")
			for _, p := range out {
				created := ""
				if !p.Created.IsZero() {
					created = p.Created.Local().Format("2006-01-02 15:04:05")
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", p.Name, p.PID, p.Image, p.Status, created, p.Where)
			}
			return tw.Flush()
		},
	}
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop containers: SIGTERM, then after --time the whole tree is killed",
		ArgsUsage: "NAME|DIR...",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "time", Aliases: []string{"t"}, Value: 10, Usage: "`SECONDS` to wait before killing"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("stop takes one or more container names (see cove ps)")
			}
			return eachWorkspace(c, func(ctx context.Context, b workspace.Backend, name string) error {
				return b.Stop(ctx, name, time.Duration(c.Int("time"))*time.Second)
			})
		},
	}
}

func rmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove containers and what they wrote",
		ArgsUsage: "NAME|DIR...",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "stop running ones first"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("rm takes one or more container names (see cove ps --all)")
			}
			return eachWorkspace(c, func(ctx context.Context, b workspace.Backend, name string) error {
				return b.Remove(ctx, name, c.Bool("force"))
			})
		},
	}
}

// nameArg is the workspace (or container) arg names: by name, or by its
// project directory (workspace.NameArg).
func (e *env) nameArg(c *cli.Context, arg string) (string, error) {
	return workspace.NameArg(arg, func(name string) bool {
		if c.Bool("kube") {
			return true // the cluster knows; a name is a name there
		}
		_, err := e.states().Load(name)
		return err == nil
	})
}

// eachWorkspace runs do for each workspace (or container) named in the
// arguments, on the command's backend, and prints the name of each it was
// done for.
func eachWorkspace(c *cli.Context, do func(context.Context, workspace.Backend, string) error) error {
	e, err := globalEnv(c)
	if err != nil {
		return err
	}
	b := e.backend(c)
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	for _, arg := range c.Args().Slice() {
		name, err := e.nameArg(c, arg)
		if err != nil {
			return err
		}
		if err := do(ctx, b, name); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, name)
	}
	return nil
}
