package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/cove-sh/cove/settings"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

// exitError carries an exit status other than 1 up to run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

// newApp builds the command tree. Output goes to stdout and stderr so that
// tests can run the CLI in-process.
func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                   "cove",
		Usage:                  "a safe, instant container workspace for you and your coding agent",
		UsageText:              "cove [global options] command [command options] [arguments...]",
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideVersion:            true,
		UseShortOptionHandling: true, // -it, as docker and podman take it
		// As docker and podman: -e A=1,2 sets A to "1,2", and build's
		// --secret id=X,src=F is one value, not two.
		DisableSliceFlagSeparator: true,
		EnableBashCompletion:      true,
		ExitErrHandler:            func(*cli.Context, error) {}, // run reports errors, once
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "root", EnvVars: []string{"COVE_ROOT"}, Usage: "keep all state (images, workspaces, runtime) under `DIR`"},
			&cli.BoolFlag{Name: "debug", Usage: "verbose logs on stderr"},
		}, upFlags()...),
		// cove [DIR] is cove up [DIR].
		Action: upAction,
		Commands: []*cli.Command{
			upCommand(),
			runCommand(),
			psCommand(),
			execCommand(),
			shellCommand(),
			agentCommand(),
			tasksCommand(),
			taskCommand(),
			logsCommand(),
			stopCommand(),
			rmCommand(),
			pullCommand(),
			buildCommand(),
			pushCommand(),
			imagesCommand(),
			rmiCommand(),
			pruneCommand(),
			systemCommand(),
			doctorCommand(),
			versionCommand(),
		},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%w (cove --help lists them)", err)
		},
	}
	quietUsageErrors(app.Commands)
	cli.FlagStringer = flagLine // urfave/cli's hook for how help shows a flag
	return app
}

// quietUsageErrors makes a mistyped flag say what is wrong in one line,
// last, where it is seen, instead of under a screenful of help.
func quietUsageErrors(cmds []*cli.Command) {
	for _, cmd := range cmds {
		name := cmd.Name
		cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return fmt.Errorf("%w (cove %s --help lists them)", err, name)
		}
		quietUsageErrors(cmd.Subcommands)
	}
}

// run runs the CLI and maps its error to the one stderr line and exit
// status the command-line contract promises (one line naming the thing
// and what to do; 125 when cove run fails before its command starts).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, args)
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code // the container's own status: nothing to say
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "cove: interrupted")
		return 130
	}
	// An error may carry the workspace's words (a log, a tool's stderr):
	// shown, never obeyed by the terminal.
	msg := termtext.Visible(strings.ReplaceAll(err.Error(), "\n", " "))
	fmt.Fprintf(stderr, "cove: %s\n", msg)
	return code
}

// env is what every command needs from the global flags.
type env struct {
	layout   dirs.Layout
	log      *slog.Logger
	settings settings.Settings
}

func globalEnv(c *cli.Context) (*env, error) {
	layout, err := dirs.Resolve(dirs.FromOS(c.String("root")))
	if err != nil {
		return nil, err
	}
	// Before anything is made below them: no other user reaches a
	// layer's setuid program, an image or a socket (existing installs
	// made them 0755).
	if err := layout.Secure(); err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if c.Bool("debug") {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
	if c.Command != nil {
		switch c.Command.Name {
		case "pull", "build", "up", "run", "shell", "agent":
			noSubIDsNote(c.App.ErrWriter, layout)
		}
	}
	home, _ := os.UserHomeDir()
	set, err := settings.Load(settings.Path(home))
	if err != nil {
		return nil, err
	}
	return &env{layout: layout, log: log, settings: set}, nil
}

// noSubIDsNote says, once for this user's state, what running rootless
// without subordinate ids costs and how to have them (cove doctor says it
// every time).
func noSubIDsNote(w io.Writer, layout dirs.Layout) {
	if m := userns.Current(); m.UID == 0 || m.Ranged {
		return
	}
	said := filepath.Join(layout.Data, ".said-no-subids")
	if _, err := os.Lstat(said); err == nil {
		return
	}
	if os.MkdirAll(layout.Data, 0o700) != nil || os.WriteFile(said, nil, 0o600) != nil {
		return
	}
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	fmt.Fprintf(w, "cove: note (said once): %s\n", userns.Advice(name))
}

// local is this machine's workspace backend, speaking to c's streams
// (nil: stderr only).
func (e *env) local(c *cli.Context) *workspace.Local {
	// cove-init and cove-inside are asked for at each start (Init,
	// Inside); cove itself is the fallback.
	bin, _ := coveBinary()
	lo := &workspace.Local{Layout: e.layout, Binary: bin, Init: e.initBinary, Inside: e.insideBinary, Stdout: os.Stdout, Stderr: os.Stderr, Settings: e.settings}
	if c != nil {
		lo.Stdout, lo.Stderr = c.App.Writer, c.App.ErrWriter
	}
	return lo
}

// backend is where the command's workspace runs: a cluster with --kube,
// else this machine.
func (e *env) backend(c *cli.Context) workspace.Backend {
	if c.Bool("kube") {
		return kubeBackend(c, e, nil)
	}
	return e.local(c)
}

func (e *env) store() (*image.Store, error) {
	s, err := image.Open(e.layout.Images)
	if err == nil {
		s.SetMirrors(e.settings.RegistryMirrors)
	}
	return s, err
}
