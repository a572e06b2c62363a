package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/nsremove"
	"github.com/urfave/cli/v2"
)

// psJSON is one element of `cove ps --json` (DESIGN.md contract).
type psJSON struct {
	Name    string    `json:"name"`
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Image   string    `json:"image"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
	Dir     string    `json:"dir"`
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
			&cli.BoolFlag{Name: "json", Usage: "print one JSON array of {name, id, pid, image, status, created, dir}"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.Bool("kube") {
				return kubeList(c)
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			list, err := e.states().List()
			if err != nil {
				return err
			}
			out := []psJSON{}
			for _, st := range list {
				status := st.Status()
				if status != container.Running {
					if st.Remove {
						// A --rm container whose launcher died: finish its cleanup.
						st.Stop(0)
						e.states().Delete(st.Name)
						e.removeLayer(c.Context, st.Dir)
						continue
					}
					if !c.Bool("all") {
						continue
					}
				}
				s := string(status)
				pid := st.Pid
				if status != container.Running {
					pid = 0
					if st.ExitCode != nil {
						s = fmt.Sprintf("exited (%d)", *st.ExitCode)
					}
				}
				out = append(out, psJSON{Name: st.Name, ID: st.ID, PID: pid, Image: st.Image, Status: s, Created: st.Created, Dir: st.Workdir})
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPID\tIMAGE\tSTATUS\tCREATED")
			for _, p := range out {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Name, p.PID, p.Image, p.Status, p.Created.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop containers: SIGTERM, then after --time the whole tree is killed",
		ArgsUsage: "NAME...",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "time", Aliases: []string{"t"}, Value: 10, Usage: "`SECONDS` to wait before killing"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("stop takes one or more container names (see cove ps)")
			}
			if c.Bool("kube") {
				return kubeStopOrRemove(c, false)
			}
			return eachContainer(c, func(e *env, st *container.State) error {
				if err := st.Stop(time.Duration(c.Int("time")) * time.Second); err != nil {
					return fmt.Errorf("stop %s: %w", st.Name, err)
				}
				return nil
			})
		},
	}
}

func rmCommand() *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove containers and what they wrote",
		ArgsUsage: "NAME...",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "stop running ones first"},
		}, kubeFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("rm takes one or more container names (see cove ps --all)")
			}
			if c.Bool("kube") {
				return kubeStopOrRemove(c, true)
			}
			return eachContainer(c, func(e *env, st *container.State) error {
				name := st.Name
				if st.Status() == container.Running {
					if !c.Bool("force") {
						return fmt.Errorf("container %s is running: cove stop %s first, or cove rm -f", name, name)
					}
					if err := st.Stop(10 * time.Second); err != nil {
						return err
					}
				}
				if err := st.Stop(0); err != nil { // also removes what is left of its cgroup
					return err
				}
				// The layer goes to the trash before the name is forgotten:
				// whatever happens next, no later start reuses a layer that
				// is half deleted.
				trash := filepath.Join(e.layout.Data, "trash")
				tomb, err := nsremove.Retire(st.Dir, trash)
				if err != nil {
					return fmt.Errorf("rm %s: %w", name, err)
				}
				forgetWorkspaceImages(c, e, name)
				if err := e.states().Delete(name); err != nil {
					return fmt.Errorf("rm %s: %w", name, err)
				}
				if err := nsremove.Sweep(c.Context, trash); err != nil {
					return fmt.Errorf("rm %s: removed, but deleting its files in %s failed: %w (cove rm deletes them the next time it runs)", name, tomb, err)
				}
				return nil
			})
		},
	}
}

// eachContainer runs do for each container named in the arguments and
// prints the name of each it was done for.
func eachContainer(c *cli.Context, do func(*env, *container.State) error) error {
	e, err := globalEnv(c)
	if err != nil {
		return err
	}
	for _, name := range c.Args().Slice() {
		st, err := e.states().Load(name)
		if err != nil {
			return err
		}
		if err := do(e, st); err != nil {
			return err
		}
		fmt.Fprintln(c.App.Writer, name)
	}
	return nil
}
