package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectwalk"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/launcher"
	"github.com/cove-sh/cove/settings"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

func upFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "no-browser", Usage: "print the URL alone on stdout instead of opening a window"},
		&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "keep the workspace and its server running in the background; print the URL"},
		&cli.IntFlag{Name: "port", Usage: "serve on 127.0.0.1:`PORT` (default: a free one)"},
		&cli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "stop the workspace when no window has been open for `DURATION` (a reload does not count); 0: never"},
		trustFlag(),
		publishFlag(),
	}, append(workspaceFlags(), kubeFlags()...)...)
}

func upCommand() *cli.Command {
	return &cli.Command{
		Name:      "up",
		Usage:     "start DIR's workspace and open the IDE on it (what cove alone does)",
		ArgsUsage: "[DIR]",
		Flags:     append(upFlags(), &cli.BoolFlag{Name: "serve", Hidden: true}),
		Action:    upAction,
	}
}

func upAction(c *cli.Context) error {
	e, err := globalEnv(c)
	if err != nil {
		return err
	}
	dir, err := dirArg(c)
	if err != nil {
		return err
	}
	// What the launcher says (the notes, the lifecycle commands' output,
	// on a cluster the sync's notes) goes to the IDE's workspace log too:
	// the backends write to the command's stderr, made a tee first.
	notes := &ide.Notes{}
	defer teeNotes(c, notes)()
	b := dirBackend(c, e, dir)
	name := workspace.Name(dir)
	runDir := launcherDir(e, b, name)
	recPath := filepath.Join(runDir, "launcher.json")
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return err
	}
	if rec, ok := launcher.Read(recPath); ok && !c.Bool("fresh") {
		// Another cove serves this workspace: a new window on it (unless
		// the workspace was stopped and that launcher is on its way out).
		if ws, err := b.Open(c.Context, name); err == nil && rec.Serves(ws) {
			if err := trustRunning(c, dir, name); err != nil {
				return err
			}
			attachRunning(c, b, dir)
			detachedNote(c, ws)
			publishServedNote(c)
			return showURL(c, e.layout, rec.URL)
		}
	}
	if c.Bool("detach") && !c.Bool("serve") {
		return detachUp(c, b, dir, recPath, notes)
	}
	// One launcher a workspace: a second cove up while the first starts
	// waits for it and opens a window on it.
	lock, url, err := lockOrWait(c, b, name, runDir, recPath)
	if err != nil {
		return err
	}
	if lock == nil {
		// The other cove serves it now: this is a user attaching.
		if err := trustRunning(c, dir, name); err != nil {
			return err
		}
		attachRunning(c, b, dir)
		publishServedNote(c)
		return showURL(c, e.layout, url)
	}
	defer lock.Close()
	if c.Bool("serve") {
		keptNotes(notes, recPath)
	}
	ws, _, err := ensure(c, b, dir)
	if err != nil {
		return err
	}
	panel := &agentPanel{root: c.String("root"), layout: e.layout, target: ws, dir: dir, ctx: c.Context}
	defer panel.Close()
	proxy, srv, err := serveLauncher(c, ws.DialIDE, dir, panel)
	if err != nil {
		ws.Close()
		return err
	}
	launcherNotes(proxy, notes)
	defer servePorts(c, proxy, ws).Close()
	rec := launcher.Record{URL: proxy.URL(), Workspace: ws.ID(), Name: name, Where: ws.Where(), Dir: dir}
	rec.Launcher.Created = time.Now().UTC()
	if err := rec.Launcher.Track(os.Getpid()); err != nil {
		ws.Close()
		return err
	}
	if err := rec.Write(recPath); err != nil {
		ws.Close()
		return err
	}
	defer func() {
		// Only ours: a newer launcher may have taken over the workspace.
		if cur, ok := launcher.Read(recPath); !ok || cur.Launcher.Pid == os.Getpid() {
			os.Remove(recPath)
		}
	}()
	if c.Bool("serve") {
		fmt.Fprintln(c.App.Writer, rec.URL)
	} else if err := showURL(c, e.layout, rec.URL); err != nil {
		ws.Close()
		return err
	}
	// The launcher is the parent: until Ctrl-C (or SIGTERM), it serves;
	// then the workspace stops (its files and layer stay). If the
	// workspace stops first (cove stop), there is nothing left to serve.
	if stopped := serveUntilDone(c, proxy, func() bool { return !ws.Running() }); stopped {
		// The windows say so, and keep what is unsaved in them.
		farewell(proxy, ide.Farewell{Reason: "the workspace was stopped"})
		srv.Close()
		ws.Close()
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s stopped\n", name)
		return nil
	}
	// Ended by its user: app windows close themselves (those with unsaved
	// changes stay, saying the workspace stopped).
	bye := ide.Farewell{Reason: "cove up was stopped", Close: true}
	if c.Bool("detach") {
		bye = ide.Farewell{Reason: "its launcher was stopped", Close: true, Running: true}
	}
	farewell(proxy, bye)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if b.Copies() {
		// The last round first: what was saved in the workspace is here
		// before it goes.
		fmt.Fprintln(c.App.ErrWriter, "cove: synchronising the files")
	}
	if err := ws.Close(); err != nil {
		fmt.Fprintf(c.App.ErrWriter, "cove: %v\n", err)
	}
	if c.Bool("detach") {
		return nil
	}
	if keptRunning(c, b, name) {
		return nil
	}
	fmt.Fprintln(c.App.ErrWriter, "cove: stopping the workspace")
	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	return b.Stop(stopCtx, name, 10*time.Second)
}

// keptRunning says, for a workspace whose devcontainer.json's
// shutdownAction is none, that it stays up when its last window closes.
func keptRunning(c *cli.Context, b workspace.Backend, name string) bool {
	k, ok := b.(interface{ KeepsRunning(string) bool })
	if !ok || !k.KeepsRunning(name) {
		return false
	}
	fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s keeps running (its devcontainer.json's shutdownAction is none): cove stop %s stops it and its services\n", name, name)
	return true
}

// trustRunning records --trust for DIR's workspace that runs (served by
// another launcher): it takes effect at the next start.
func trustRunning(c *cli.Context, dir, name string) error {
	if !c.Bool("trust") {
		return nil
	}
	return workspace.TrustRunning(c.App.ErrWriter, workspace.Spec{Dir: dir, Config: c.String("config"), Trust: true}, name)
}

// launcherDir holds the launcher's record and locks of DIR's workspace on
// the command's backend: this machine's runtime dir, never the
// workspace's to see.
func launcherDir(e *env, b workspace.Backend, name string) string {
	return filepath.Join(e.layout.Runtime, "workspaces", b.Key(name))
}

// attachRunning runs the postAttachCommand of DIR's running workspace
// for a user who attaches to it as it runs (a new window).
func attachRunning(c *cli.Context, b workspace.Backend, dir string) {
	if s, err := workspaceSpec(c, dir); err == nil {
		b.Attach(c.Context, s)
	}
}

// serveLauncher serves the launcher's side of a workspace on
// 127.0.0.1:--port: the proxy to the IDE server dial reaches, with the
// host-side routes and the agent panel.
func serveLauncher(c *cli.Context, dial func(context.Context) (net.Conn, error), dir string, panel *agentPanel) (*ide.Proxy, *http.Server, error) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.Int("port")))
	if err != nil {
		return nil, nil, fmt.Errorf("listen on 127.0.0.1:%d: %w (choose another --port)", c.Int("port"), err)
	}
	proxy := ide.NewProxyDial(dial, l.Addr().(*net.TCPAddr).Port)
	proxy.Dir = dir
	proxy.Handle("/api/agent", ide.AgentPanel{Backend: panel})
	routes := ide.ProjectRoutes{Dir: dir, Walk: hostWalkOptions()}
	proxy.Handle("/api/search", routes.Search())
	proxy.Handle("/api/ignored", routes.Ignored())
	proxy.Handle("/api/files", routes.Files())
	proxy.Handle("/api/replace", routes.Replace())
	proxy.Handle("/api/settings", http.HandlerFunc(serveEditorSettings))
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(l)
	return proxy, srv, nil
}

// serveUntilDone waits while the launcher serves: until Ctrl-C (or
// SIGTERM), the last window gone for --grace, or the workspace stopped
// under it (stopped, checked each second), which it reports.
func serveUntilDone(c *cli.Context, proxy *ide.Proxy, stopped func() bool) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.Context.Done():
			return false
		case <-tick.C:
			if grace := c.Duration("grace"); grace > 0 && !c.Bool("detach") && proxy.Unattended() > grace {
				fmt.Fprintln(c.App.ErrWriter, "cove: the last window closed")
				return false
			}
			if stopped() {
				return true
			}
		}
	}
}

// farewell tells the launcher's windows that it ends, waiting a little
// for them to hear it.
func farewell(proxy *ide.Proxy, bye ide.Farewell) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	proxy.Stopping(ctx, bye)
}

// servedElsewhere are the workspaces on other backends (a cluster's Pods)
// that a launcher on this machine serves now, for cove ps.
func servedElsewhere(e *env) []workspace.Info {
	recs, _ := filepath.Glob(filepath.Join(e.layout.Runtime, "workspaces", "kube-*", "launcher.json"))
	var out []workspace.Info
	for _, p := range recs {
		if rec, ok := launcher.Read(p); ok && rec.Name != "" {
			out = append(out, workspace.Info{Name: rec.Name, ID: rec.Workspace, Pid: rec.Launcher.Pid, Status: "running", Where: rec.Where, Dir: rec.Dir, Created: rec.Launcher.Created})
		}
	}
	return out
}

// showURL prints the URL alone on stdout (--no-browser), or opens an app
// window on it and says where it is on stderr.
func showURL(c *cli.Context, layout dirs.Layout, url string) error {
	if c.Bool("no-browser") || c.Bool("detach") {
		fmt.Fprintln(c.App.Writer, url)
		return nil
	}
	fmt.Fprintf(c.App.ErrWriter, "cove: the workspace is at %s\n", url)
	return launcher.OpenWindow(layout, url)
}

// detachUp runs `cove up --serve` in its own session in the background, a
// small per-workspace server (no system daemon), and prints its URL.
func detachUp(c *cli.Context, b workspace.Backend, dir, recPath string, notes *ide.Notes) error {
	bin, err := coveBinary()
	if err != nil {
		return err
	}
	// The workspace starts here, where the user is: its notes, the pull's
	// progress and the lifecycle commands' output go to this stderr, not
	// only to the background server's log; the server finds it running.
	ws, _, err := ensure(c, b, dir)
	if err != nil {
		return err
	}
	// On a cluster, the server holds the sync from here on.
	if err := ws.Close(); err != nil {
		return err
	}
	if err := keepNotes(recPath, notes); err != nil {
		return err
	}
	args := []string{"up", "--serve", "--detach", "--port", fmt.Sprint(c.Int("port"))}
	if img := c.String("image"); img != "" {
		args = append(args, "--image", img)
	}
	if cfg := c.String("config"); cfg != "" {
		args = append(args, "--config", cfg)
	}
	for _, f := range []string{"memory", "pids", "cpus", "net", "kubeconfig", "context", "namespace"} {
		if c.IsSet(f) {
			args = append(args, "--"+f, fmt.Sprint(c.Value(f)))
		}
	}
	for _, opt := range c.StringSlice("security-opt") {
		args = append(args, "--security-opt", opt)
	}
	for _, p := range c.StringSlice("publish") {
		args = append(args, "--publish", p)
	}
	if c.Bool("kube") {
		args = append(args, "--kube")
	}
	args = append(args, dir)
	if err := os.MkdirAll(filepath.Dir(recPath), 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(filepath.Dir(recPath), "launcher.log")
	// O_APPEND: a launcher on its way out may still write its last line.
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "COVE_ROOT="+c.String("root"))
	if c.String("root") == "" {
		cmd.Env = os.Environ()
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if rec, ok := launcher.Read(recPath); ok && rec.Launcher.Pid == cmd.Process.Pid {
			detachedNote(c, ws)
			fmt.Fprintln(c.App.Writer, rec.URL)
			return nil
		}
		select {
		case <-exited:
			// It found another launcher serving the workspace, and left.
			if rec, ok := launcher.Read(recPath); ok {
				detachedNote(c, ws)
				fmt.Fprintln(c.App.Writer, rec.URL)
				return nil
			}
			return fmt.Errorf("the background server stopped (its log: %s): %s", logPath, termtext.Visible(launcher.LogTail(logPath, 8<<10)))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// detachedNote names, on stderr, the workspace cove up --detach leaves
// running, for the commands that take it (stdout has the URL alone).
func detachedNote(c *cli.Context, ws workspace.Workspace) {
	if c.Bool("detach") && !c.Bool("serve") {
		name, flags := ws.Name(), strings.Join(append([]string{""}, ws.ExecFlags()...), " ")
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s runs in the background (cove exec%s %s CMD runs a command in it; cove stop%s %s stops it)\n", name, flags, name, flags, name)
	}
}

// hostWalkOptions is what the host user adds to a project's ignore rules
// for search, quick open and dimming: git's default global excludes file
// in the host user's config (never a file the project's .git/config
// names: that config is the workspace's to write).
func hostWalkOptions() *projectwalk.Options {
	home, _ := os.UserHomeDir()
	return &projectwalk.Options{ExcludesFile: projectwalk.UserExcludesFile(home, os.Getenv("XDG_CONFIG_HOME"))}
}

// lockOrWait takes the workspace's launcher lock; while another cove
// holds it (starting the workspace, or a launcher on its way out), it
// waits: for that cove to serve (then it returns no lock and its URL), or
// to let go (then the lock is ours).
func lockOrWait(c *cli.Context, b workspace.Backend, name, runDir, recPath string) (*os.File, string, error) {
	said := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		lock, err := workspace.LockFile(filepath.Join(runDir, "launcher.lock"), 0)
		if !errors.Is(err, workspace.ErrLocked) {
			return lock, "", err
		}
		if rec, ok := launcher.Read(recPath); ok {
			if ws, err := b.Open(c.Context, name); err == nil && rec.Serves(ws) {
				if !c.Bool("fresh") {
					return nil, rec.URL, nil
				}
				// --fresh: that launcher leaves once its workspace stops.
				if err := b.Stop(c.Context, name, 10*time.Second); err != nil {
					return nil, "", fmt.Errorf("--fresh: stop the workspace %s: %w", name, err)
				}
			}
		}
		if !said {
			fmt.Fprintf(c.App.ErrWriter, "cove: another cove is starting the workspace %s; waiting for it\n", name)
			said = true
		}
		select {
		case <-c.Context.Done():
			return nil, "", c.Context.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, "", fmt.Errorf("another cove has held the workspace %s for 2 minutes without serving it; if none runs (cove ps), try again", name)
}

// serveEditorSettings gives the IDE the editor's settings from the
// user's settings file (~/.config/cove/settings.json), read anew each
// time: the windows ask now and then, and a change applies live. A file
// cove cannot take is said, and the defaults hold.
func serveEditorSettings(w http.ResponseWriter, r *http.Request) {
	home, _ := os.UserHomeDir()
	s, err := settings.Load(settings.Path(home))
	res := map[string]any{"editor": s.Editor, "path": s.Path}
	if err != nil {
		res = map[string]any{"editor": settings.Editor{}, "path": s.Path, "error": err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(res)
}
