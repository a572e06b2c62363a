package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a running container",
		ArgsUsage: "NAME CMD [ARG...]",
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
			if c.Bool("kube") {
				return kubeExec(c, c.Args().First(), c.Args().Tail())
			}
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			name := c.Args().First()
			st, err := e.states().Load(name)
			if err != nil {
				return err
			}
			if st.Status() != container.Running {
				return fmt.Errorf("container %s is not running (cove ps --all)", name)
			}
			req := container.ExecRequest{Args: c.Args().Tail(), Env: envFlags(c), Cwd: c.String("workdir"), User: c.String("user"), Terminal: c.Bool("tty")}
			if req.Terminal {
				// The terminal is relayed alone: a second reader of our
				// stdin (the pipe below) took the keys meant for it.
				return e.exec(name, req, [3]*os.File{})
			}
			stdio, closeStdio, err := execStdio(c)
			if err != nil {
				return err
			}
			defer closeStdio()
			return e.exec(name, req, stdio)
		},
	}
}

// exec runs req in the container name, relaying its terminal if it has
// one, and returns its exit status as the command's.
func (e *env) exec(name string, req container.ExecRequest, stdio [3]*os.File) error {
	rs := &runStdio{copying: make(chan struct{}), tty: req.Terminal, restore: func() {}}
	var console *os.File
	// SIGTERM or SIGHUP ends a terminal session as closing a terminal
	// window does: its master closes, and the shell in it gets SIGHUP.
	hangup := make(chan os.Signal, 1)
	signal.Notify(hangup, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(hangup)
	code, err := container.Exec(filepath.Join(e.states().Dir(name), "ctl.sock"), req, stdio, func(con *os.File) {
		console = con
		rs.start(con)
		if con != nil {
			go func() {
				if _, ok := <-hangup; ok {
					con.Close()
				}
			}()
		}
	})
	if console != nil {
		rs.wait(console)
	}
	rs.restore()
	var ee *container.ExecError
	if errors.As(err, &ee) && ee.Code != 0 {
		// As a shell says it (and podman exec): 127 not found, 126 not runnable.
		return &exitError{code: ee.Code, err: fmt.Errorf("exec in %s: %w", name, err)}
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// execStdio gives the process our streams, or pipes where ours are a
// terminal (which the process could push keystrokes into).
func execStdio(c *cli.Context) ([3]*os.File, func(), error) {
	var out [3]*os.File
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	streams := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	for i, f := range streams {
		if i == 0 && !c.Bool("interactive") && term.IsTerminal(int(f.Fd())) {
			null, err := os.Open(os.DevNull)
			if err != nil {
				return out, closeAll, err
			}
			out[0] = null
			closers = append(closers, func() { null.Close() })
			continue
		}
		if !term.IsTerminal(int(f.Fd())) {
			out[i] = f
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			return out, closeAll, err
		}
		if i == 0 {
			out[i] = r
			go func() { io.Copy(w, f); w.Close() }()
			closers = append(closers, func() { r.Close() })
		} else {
			out[i] = w
			done := make(chan struct{})
			go func() { io.Copy(f, r); close(done) }()
			closers = append(closers, func() { w.Close(); <-done })
		}
	}
	return out, closeAll, nil
}
