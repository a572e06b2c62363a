package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image/progress"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/urfave/cli/v2"
)

func systemCommand() *cli.Command {
	return &cli.Command{
		Name:  "system",
		Usage: "manage cove's own state",
		Subcommands: []*cli.Command{{
			Name:  "reset",
			Usage: "remove all of cove's state for this user: images, workspaces and what they wrote, the build cache, agent sessions",
			Description: `As podman system reset. Running workspaces are named and left alone unless
--force stops them. Projects and the config in ~/.config/cove are not touched.`,
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "stop running workspaces and containers first"},
			},
			Action: systemReset,
		}, writeProgramsCommand()},
	}
}

func systemReset(c *cli.Context) error {
	e, err := globalEnv(c)
	if err != nil {
		return err
	}
	ctx := c.Context
	lo := e.local(c)
	all, err := lo.List(ctx, true)
	if err != nil {
		return fmt.Errorf("system reset: %w", err)
	}
	var running []string
	for _, w := range all {
		if w.Status == string(container.Running) {
			running = append(running, w.Name)
		}
	}
	if len(running) > 0 && !c.Bool("force") {
		return fmt.Errorf("system reset: running: %s; stop them first (cove stop %s) or give --force", strings.Join(running, ", "), strings.Join(running, " "))
	}
	// Each workspace goes as cove rm -f does it (its processes, cgroup and
	// files), then whatever else is left of the directories.
	rmCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, w := range all {
		if err := lo.Remove(rmCtx, w.Name, true); err != nil {
			return fmt.Errorf("system reset: %w", err)
		}
	}
	l := e.layout
	var dirs []string
	for _, d := range []string{l.Images, l.Data, l.Runtime, l.State} {
		if d == "" {
			continue
		}
		if _, err := os.Lstat(d); err == nil {
			dirs = append(dirs, d)
		}
	}
	freed := userns.Usage(ctx, dirs...)
	for _, d := range dirs {
		if err := userns.RemoveAll(ctx, d); err != nil {
			return fmt.Errorf("system reset: %w", err)
		}
		// ~/.cache/cove once its images are gone, and COVE_ROOT's parts.
		if parent := filepath.Dir(d); filepath.Base(parent) == "cove" {
			os.Remove(parent)
		}
	}
	if left := leftIn(dirs); left != "" {
		return fmt.Errorf("system reset: %s is still there", left)
	}
	fmt.Fprintf(c.App.Writer, "removed all of cove's state (%s), freed %s\n", strings.Join(dirs, ", "), progress.Bytes(freed))
	return nil
}

// leftIn returns the first of dirs that still exists.
func leftIn(dirs []string) string {
	for _, d := range dirs {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			return d
		}
	}
	return ""
}
