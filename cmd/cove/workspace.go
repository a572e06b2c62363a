package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cove-sh/cove/internal/devcontainer"
	"github.com/cove-sh/cove/internal/termtext"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/image"
	"github.com/urfave/cli/v2"
)

// DefaultImage is the workspace image when neither --image nor the
// project's devcontainer.json names one: Debian, with a shell.
const DefaultImage = "docker.io/library/debian:bookworm"

// workspaceName is the stable, unique name of DIR's workspace: the
// directory's name and a hash of its path.
func workspaceName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, filepath.Base(dir))
	base = strings.Trim(base, "-.")
	if base == "" || len(base) > 40 {
		base = "ws"
	}
	return base + "-" + hex.EncodeToString(sum[:3])
}

func workspaceFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "image", Usage: "workspace image `REF` (default: devcontainer.json's, else " + DefaultImage + ")"},
		&cli.BoolFlag{Name: "fresh", Usage: "start the workspace from the image again, dropping what was installed in it"},
	}, limitFlags()...)
}

// ensureWorkspace returns the state of DIR's running workspace, starting
// it if it is not running: the project bound at /workspace, its own layer
// kept across starts until cove rm.
func ensureWorkspace(c *cli.Context, e *env, dir string) (*container.State, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	name := workspaceName(abs)
	states := e.states()
	if st, err := states.Load(name); err == nil {
		if st.Status() == container.Running {
			if !c.Bool("fresh") {
				return st, nil
			}
			if err := st.Stop(10 * time.Second); err != nil {
				return nil, err
			}
		}
		states.Delete(name) // stopped: start again on the same layer
	}
	if c.Bool("fresh") {
		if err := os.RemoveAll(filepath.Join(e.layout.Data, "workspaces", name)); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	limits, conf, err := limitsFrom(c)
	if err != nil {
		return nil, err
	}
	dc, err := devcontainer.Load(abs)
	if err != nil {
		return nil, err
	}
	ref := c.String("image")
	if ref == "" && dc != nil {
		ref = dc.Image
	}
	if ref == "" {
		ref = DefaultImage
	}
	specs, notes, err := dc.PortSpecs()
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		fmt.Fprintf(c.App.ErrWriter, "cove: note: %s\n", termtext.Visible(n))
	}
	var ports []container.Port
	for _, s := range specs {
		p, err := container.ParsePort(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dc.Path, err)
		}
		if p.HostIP != "127.0.0.1" {
			// The project is the workspace's to write: it may ask for a
			// port, never to open one to the network.
			fmt.Fprintf(c.App.ErrWriter, "cove: note: %s asks for host port %s; the project's ports are forwarded on 127.0.0.1 only\n", dc.Path, termtext.Visible(p.String()))
			p.HostIP = "127.0.0.1"
		}
		ports = append(ports, p)
	}
	if len(ports) > 0 && conf.Net != container.NetPrivate {
		// The workspace shares the host's network (or has none): its
		// ports need no forwarding, or cannot have it.
		ports = nil
	}
	sockDir := workspaceSocketDir(e, name)
	// A fresh directory each start: nothing the last workspace left there
	// (it could write it all) is kept.
	if err := os.RemoveAll(sockDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, err
	}
	l := launch{
		Ref: ref, Policy: image.PullMissing, Name: name,
		// The workload is the IDE server, on a socket in a directory bound
		// from the host's runtime dir that holds nothing else (the
		// launcher's record, log and token stay out of the workspace's
		// sight): the only way in, through the proxy.
		Args:    []string{"/.cove/cove", "ide", "serve", "--socket", "/.cove/run/ide.sock", "--dir", "/workspace"},
		Workdir: "/workspace", Env: dc.Env(),
		Binds:  []container.Bind{{Source: abs, Target: "/workspace"}, {Source: sockDir, Target: "/.cove/run"}},
		Limits: limits, Net: conf.Net, Ports: ports, NoSeccomp: conf.NoSeccomp, Detach: true, Quiet: true,
		Dir: filepath.Join(e.layout.Data, "workspaces", name),
	}
	if _, err := e.launch(c, l); err != nil {
		return nil, fmt.Errorf("start the workspace of %s: %w", abs, err)
	}
	st, err := states.Load(name)
	if err != nil {
		return nil, err
	}
	// The server is usually up within tens of milliseconds: ask often at
	// first (the wait is most of a warm start), then less.
	sock := workspaceSocket(e, name)
	for start := time.Now(); ; {
		if conn, err := ide.DialSocket(c.Context, sock); err == nil {
			conn.Close()
			return st, postCreate(c, e, st, dc, l.Dir)
		}
		waited := time.Since(start)
		if waited > 10*time.Second || st.Status() != container.Running {
			log, _ := os.ReadFile(filepath.Join(l.Dir, "log"))
			return nil, fmt.Errorf("the workspace's IDE server did not start: %s", strings.TrimSpace(string(log)))
		}
		if waited < 500*time.Millisecond {
			time.Sleep(2 * time.Millisecond)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// postCreate runs devcontainer.json's postCreateCommand in the workspace,
// once: a marker in the workspace's own files says it ran (cove rm, or a
// new layer, runs it again).
func postCreate(c *cli.Context, e *env, st *container.State, dc *devcontainer.Config, dir string) error {
	argv, err := dc.PostCreate()
	if err != nil || argv == nil {
		return err
	}
	marker := filepath.Join(dir, "post-create-done")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	fmt.Fprintf(c.App.ErrWriter, "cove: postCreateCommand: %s\n", termtext.Visible(strings.Join(argv, " ")))
	// Pipes, never the host's terminal: the command is the workspace's,
	// and its output is shown, never obeyed by the terminal.
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(termtext.NewWriter(c.App.ErrWriter), pr)
		pr.Close()
		close(copied)
	}()
	code, err := container.Exec(filepath.Join(e.states().Dir(st.Name), "ctl.sock"),
		container.ExecRequest{Args: argv, Cwd: "/workspace"}, [3]*os.File{null, pw, pw}, nil)
	pw.Close()
	select {
	case <-copied:
	case <-time.After(time.Second):
		pr.Close() // a job it left in the background keeps the pipe: no more of it is shown
	}
	if err != nil || code != 0 {
		fmt.Fprintf(c.App.ErrWriter, "cove: warning: postCreateCommand failed (%v, status %d); it runs again next start\n", err, code)
		return nil
	}
	return os.WriteFile(marker, nil, 0o600)
}

// dirArg is the command's DIR argument, absolute; the current directory
// when there is none.
func dirArg(c *cli.Context) (string, error) {
	dir := c.Args().First()
	if dir == "" {
		dir = "."
	}
	return filepath.Abs(dir)
}

// workspaceRunDir holds a workspace's runtime files on the host side: the
// launcher's record and log, never bound into the workspace.
func workspaceRunDir(e *env, name string) string {
	return filepath.Join(e.layout.Runtime, "workspaces", name)
}

// workspaceSocketDir is the one directory of the host's the workspace
// sees (at /.cove/run): it holds the IDE server's socket and nothing
// else, and the workspace may write anything there.
func workspaceSocketDir(e *env, name string) string {
	return filepath.Join(workspaceRunDir(e, name), "sock")
}

// workspaceSocket is the IDE server's socket on the host side.
func workspaceSocket(e *env, name string) string {
	return filepath.Join(workspaceSocketDir(e, name), "ide.sock")
}

func shellCommand() *cli.Command {
	return &cli.Command{
		Name:      "shell",
		Usage:     "a shell in DIR's workspace (started if needed)",
		ArgsUsage: "[DIR]",
		Flags:     workspaceFlags(),
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			dir, err := dirArg(c)
			if err != nil {
				return err
			}
			st, err := ensureWorkspace(c, e, dir)
			if err != nil {
				return err
			}
			req := container.ExecRequest{Args: []string{"/bin/sh", "-c", "command -v bash >/dev/null && exec bash -l; exec sh -l"}, Cwd: "/workspace", Terminal: true}
			return e.exec(st.Name, req, [3]*os.File{})
		},
	}
}

// ideCommand runs the in-container IDE server (the workspace's workload).
func ideCommand() *cli.Command {
	return &cli.Command{
		Name:   "ide",
		Usage:  "the IDE server inside a workspace",
		Hidden: true,
		Subcommands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve the project's files and terminals on a Unix socket",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "socket", Required: true, Usage: "listen on `PATH`"},
				&cli.StringFlag{Name: "dir", Value: "/workspace", Usage: "the project `DIR`"},
			},
			Action: func(c *cli.Context) error {
				ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
				defer stop()
				return ide.Serve(ctx, c.String("socket"), c.String("dir"))
			},
		}},
	}
}

// idleCommand is a workspace's workload until its IDE server takes that
// place: it waits for the stop signal.
func idleCommand() *cli.Command {
	return &cli.Command{
		Name:   "idle",
		Usage:  "wait for the stop signal (a workspace's workload)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			sigs := make(chan os.Signal, 1)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			<-sigs
			return nil
		},
	}
}
