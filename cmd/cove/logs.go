package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/urfave/cli/v2"
)

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:      "logs",
		Usage:     "print what a detached container (cove run -d) wrote",
		ArgsUsage: "NAME",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "go on printing what it writes, until it stops (or Ctrl-C)"},
			&cli.IntFlag{Name: "tail", Aliases: []string{"n"}, Value: -1, Usage: "only the last `N` lines"},
			&cli.StringFlag{Name: "service", Usage: "the workspace NAME's Compose service `SERVICE` (its container NAME.SERVICE)"},
		},
		Action: func(c *cli.Context) error {
			args, svc := c.Args().Slice(), c.String("service")
			// cove logs NAME --service db, as the flag reads best: after
			// the name, where the flag parser no longer looks.
			if len(args) == 3 && args[1] == "--service" {
				args, svc = args[:1], args[2]
			} else if len(args) == 2 && strings.HasPrefix(args[1], "--service=") {
				args, svc = args[:1], strings.TrimPrefix(args[1], "--service=")
			}
			if len(args) != 1 {
				return fmt.Errorf("logs takes one container name (see cove ps --all)")
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			name := args[0]
			if svc != "" {
				name += "." + svc
			}
			st, err := e.states().Load(name)
			if err != nil {
				return err
			}
			f, err := os.Open(filepath.Join(st.Dir, "log"))
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("container %s has no log: only one started with cove run -d has (the output of others went to the terminal that ran them)", st.Name)
			}
			if err != nil {
				return err
			}
			defer f.Close()
			if n := c.Int("tail"); n >= 0 {
				off, err := tailOffset(f, n)
				if err != nil {
					return fmt.Errorf("logs %s: %w", st.Name, err)
				}
				if _, err := f.Seek(off, io.SeekStart); err != nil {
					return err
				}
			}
			if _, err := io.Copy(c.App.Writer, f); err != nil || !c.Bool("follow") {
				return err
			}
			// Follow: what it writes, until it stops. Polling a file is what
			// tail -f falls back to; ten times a second is plenty for a log.
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				running := st.Status() == container.Running
				if _, err := io.Copy(c.App.Writer, f); err != nil {
					return err
				}
				if !running {
					return nil
				}
				select {
				case <-c.Context.Done():
					return nil
				case <-tick.C:
				}
			}
		},
	}
}

// tailOffset is where the last n lines of f begin (a last line without a
// newline counts as one), reading backwards a block at a time.
func tailOffset(f *os.File, n int) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := fi.Size()
	if n == 0 {
		return end, nil
	}
	buf := make([]byte, 32<<10)
	pos, seen := end, 0
	for pos > 0 {
		size := int64(len(buf))
		if pos < size {
			size = pos
		}
		pos -= size
		b := buf[:size]
		if _, err := f.ReadAt(b, pos); err != nil {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' || pos+int64(i) == end-1 {
				continue // the file's final newline ends the last line
			}
			if seen++; seen == n {
				return pos + int64(i) + 1, nil
			}
		}
	}
	return 0, nil
}
