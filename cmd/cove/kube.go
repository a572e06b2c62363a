package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/cove-sh/cove/agent"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace/filesync"
	"github.com/cove-sh/cove/workspace/kube"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// kubeFlags choose a Kubernetes cluster for the workspace instead of this
// machine.
func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "kube", Usage: "a workspace that runs as a Pod on a Kubernetes cluster (its files stay here, synchronised)"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "with --kube: the kubeconfig `FILE` (default: as kubectl)"},
		&cli.StringFlag{Name: "context", Usage: "with --kube: the kubeconfig's `CONTEXT`"},
		&cli.StringFlag{Name: "namespace", Usage: "with --kube: the `NAMESPACE`"},
	}
}

func kubeCluster(c *cli.Context) (*kube.Cluster, error) {
	return kube.Connect(kube.Config{Kubeconfig: c.String("kubeconfig"), Context: c.String("context"), Namespace: c.String("namespace")})
}

// startKube runs DIR's workspace as a Pod on the flags' cluster, with
// the project synchronised, until the Session is closed.
func startKube(c *cli.Context, dir string) (*kube.Cluster, *kube.Session, string, error) {
	k, err := kubeCluster(c)
	if err != nil {
		return nil, nil, "", err
	}
	limits, _, err := limitsFrom(c)
	if err != nil {
		return nil, nil, "", err
	}
	img := c.String("image")
	if img == "" {
		img = DefaultImage
	}
	bin, err := coveBinary()
	if err != nil {
		return nil, nil, "", err
	}
	name := workspaceName(dir)
	errw := c.App.ErrWriter
	fmt.Fprintf(errw, "cove: starting %s as a Pod in %s on %s\n", name, k.Namespace, k.Server())
	ctx, cancel := context.WithTimeout(c.Context, 5*time.Minute)
	defer cancel()
	se, err := k.Start(ctx, kube.Spec{Name: name, Image: img, Limits: limits}, kube.SessionOptions{
		Dir: dir, Binary: bin, Walk: hostWalkOptions(),
		Report: func(r filesync.Report, err error) { syncNotes(errw, r, err) },
	})
	return k, se, name, err
}

// kubeExecFlags are the flags that make cove exec reach the same Pod.
func kubeExecFlags(c *cli.Context) []string {
	flags := []string{"--kube"}
	for _, f := range []string{"kubeconfig", "context", "namespace"} {
		if v := c.String(f); v != "" {
			flags = append(flags, "--"+f, v)
		}
	}
	return flags
}

// kubeAgent is cove agent --kube: the agent here, its commands in the
// workspace's Pod, the project synchronised around each one.
func kubeAgent(c *cli.Context, e *env, dir string, cfg agent.Config) error {
	_, se, name, err := startKube(c, dir)
	if err != nil {
		return err
	}
	defer func() {
		se.Close() // a last round: what the agent's commands wrote is here
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s keeps running in the cluster (cove stop --kube %s stops it)\n", name, name)
	}()
	return runAgent(c, e, execTarget{Name: name, Flags: kubeExecFlags(c), Sync: se.Flush}, dir, cfg)
}

// kubeUp is cove up --kube: the workspace runs as a Pod, the launcher,
// the window and the files stay here.
func kubeUp(c *cli.Context, e *env, dir string) error {
	k, se, name, err := startKube(c, dir)
	if err != nil {
		return err
	}
	errw := c.App.ErrWriter
	panel := &agentPanel{root: c.String("root"), layout: e.layout, dir: dir, ctx: c.Context,
		target: execTarget{Name: name, Flags: kubeExecFlags(c), Sync: se.Flush}}
	defer panel.Close()
	proxy, srv, err := serveLauncher(c, se.DialIDE, dir, panel)
	if err != nil {
		se.Close()
		return err
	}
	if err := showURL(c, proxy.URL()); err != nil {
		se.Close()
		return err
	}
	// A Pod deleted under the launcher is seen by the next sync round and
	// said there; the launcher serves until Ctrl-C or the grace period.
	serveUntilDone(c, proxy, func() bool { return false })
	farewell(proxy, ide.Farewell{Reason: "cove up was stopped", Close: true})
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	srv.Shutdown(sctx)
	scancel()
	// The last round first: what was saved in the Pod is here before it
	// goes.
	fmt.Fprintln(errw, "cove: synchronising the files, then stopping the Pod")
	if err := se.Close(); err != nil {
		fmt.Fprintf(errw, "cove: %v\n", err)
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	return k.Stop(stopCtx, name)
}

// syncNotes says what a sync round did that the user should know: a file
// changed on both sides (both kept), files too large to carry, a failure.
func syncNotes(w io.Writer, r filesync.Report, err error) {
	for _, cf := range r.Conflicts {
		if cf.Kept != "" {
			fmt.Fprintf(w, "cove: %s changed here and in the workspace: yours stays, the workspace's is %s\n", termtext.Visible(cf.Path), termtext.Visible(cf.Kept))
		} else {
			fmt.Fprintf(w, "cove: %s was deleted on one side and changed on the other: the change is kept\n", termtext.Visible(cf.Path))
		}
	}
	for _, p := range r.TooLarge {
		fmt.Fprintf(w, "cove: %s is over %d MiB and is not synchronised\n", termtext.Visible(p), filesync.MaxFileSize>>20)
	}
	if err != nil {
		fmt.Fprintf(w, "cove: sync: %s (tried again)\n", termtext.Visible(err.Error()))
	}
}

// kubeExec is cove exec --kube NAME CMD…: the command runs in the
// workspace's Pod, through the API server, with its exit status as
// cove's.
func kubeExec(c *cli.Context, name string, argv []string) error {
	k, err := kubeCluster(c)
	if err != nil {
		return err
	}
	pod, err := k.Pod(c.Context, name)
	if err != nil {
		return err
	}
	if c.String("user") != "" {
		return fmt.Errorf("exec --kube runs as the Pod's user: --user is not supported there")
	}
	if wd := c.String("workdir"); wd != "" || len(envFlags(c)) > 0 {
		// exec has no working directory or environment of its own in
		// Kubernetes: env and cd do it, as kubectl users do.
		pre := []string{"env"}
		pre = append(pre, envFlags(c)...)
		if wd != "" {
			argv = append([]string{"/bin/sh", "-c", `cd "$0" && exec "$@"`, wd}, argv...)
		}
		argv = append(pre, argv...)
	}
	return podExec(c, pod, argv, c.Bool("interactive"), c.Bool("tty"))
}

// podExec runs argv in pod with cove's streams (stdin if interactive; a
// terminal, raw, that follows the window's size, if tty) and returns its
// exit status as cove's.
func podExec(c *cli.Context, pod *kube.Pod, argv []string, interactive, tty bool) error {
	o := kube.ExecOptions{Stdout: c.App.Writer, Stderr: c.App.ErrWriter, TTY: tty}
	if interactive {
		o.Stdin = os.Stdin
	}
	if o.TTY {
		fd := int(os.Stdin.Fd())
		if !term.IsTerminal(fd) {
			return fmt.Errorf("exec -t: standard input is not a terminal")
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return err
		}
		defer term.Restore(fd, old)
		sizes := make(chan kube.TermSize, 1)
		if w, h, err := term.GetSize(fd); err == nil {
			sizes <- kube.TermSize{Width: uint16(w), Height: uint16(h)}
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(fd); err == nil {
					select {
					case sizes <- kube.TermSize{Width: uint16(w), Height: uint16(h)}:
					default:
					}
				}
			}
		}()
		o.Resize = sizes
	}
	code, err := pod.Exec(c.Context, argv, o)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// kubeList is cove ps --kube: the workspaces in the namespace, where they
// run and their state.
func kubeList(c *cli.Context) error {
	k, err := kubeCluster(c)
	if err != nil {
		return err
	}
	list, err := k.List(c.Context)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWHERE\tSTATUS\tSTARTED")
	for _, w := range list {
		started := ""
		if !w.Started.IsZero() {
			started = w.Started.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", w.Name, k.Namespace+" on "+k.Server(), strings.ToLower(w.Phase), started)
	}
	return tw.Flush()
}

// kubeStopOrRemove is cove stop --kube / cove rm --kube: the Pods go; rm
// takes their volumes too (and refuses a running one without -f).
func kubeStopOrRemove(c *cli.Context, remove bool) error {
	k, err := kubeCluster(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()
	for _, name := range c.Args().Slice() {
		if !remove {
			if err := k.Stop(ctx, name); err != nil {
				return err
			}
			continue
		}
		if !c.Bool("force") {
			if _, err := k.Pod(ctx, name); err == nil {
				return fmt.Errorf("the workspace %s is running: cove stop --kube %s first, or cove rm --kube -f", name, name)
			}
		}
		if err := k.Remove(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// kubeShell is cove shell --kube: a shell in the workspace's Pod, the
// project synchronised while it lasts (and once more at its end).
func kubeShell(c *cli.Context, dir string) error {
	_, se, name, err := startKube(c, dir)
	if err != nil {
		return err
	}
	defer func() {
		se.Close()
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s keeps running in the cluster (cove stop --kube %s stops it)\n", name, name)
	}()
	script := "cd " + kube.WorkspaceDir + " && { command -v bash >/dev/null && exec bash -l; exec sh -l; }"
	tty := term.IsTerminal(int(os.Stdin.Fd()))
	if !tty {
		// Commands on stdin, as sh -s reads them.
		script = "cd " + kube.WorkspaceDir + " && { command -v bash >/dev/null && exec bash -s; exec sh -s; }"
	}
	return podExec(c, se.Pod, []string{"/bin/sh", "-c", script}, true, tty)
}
