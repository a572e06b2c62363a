package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/projectwalk"
	"github.com/cove-sh/cove/launcher"
	"github.com/cove-sh/cove/settings"
	"github.com/cove-sh/cove/task"
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
	claim := launcher.Claim{Dir: launcherDir(e, b, name), Backend: b, Name: name, Fresh: c.Bool("fresh"), Stderr: c.App.ErrWriter}
	if err := os.MkdirAll(claim.Dir, 0o700); err != nil {
		return err
	}
	if rec, ok := launcher.Read(claim.RecordPath()); ok && !c.Bool("fresh") {
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
		return detachUp(c, b, dir, claim.RecordPath(), notes)
	}
	lock, url, err := claim.LockOrWait(c.Context)
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
		keptNotes(notes, claim.RecordPath())
	}
	return serveUp(c, e, b, dir, claim.RecordPath(), notes)
}

// serveUp is the launcher: it starts DIR's workspace, serves it and
// records that it does, and shows the URL; until Ctrl-C (or SIGTERM),
// the last window gone for --grace, or the workspace stopped under it
// (cove stop), when there is nothing left to serve.
func serveUp(c *cli.Context, e *env, b workspace.Backend, dir, recPath string, notes *ide.Notes) error {
	ws, _, err := ensure(c, b, dir)
	if err != nil {
		return err
	}
	panel := &agentPanel{root: c.String("root"), layout: e.layout, target: ws, dir: dir, ctx: c.Context}
	defer panel.Close()
	tasks := &taskPanel{m: &task.Manager{Project: dir, Data: e.layout.Data}, b: b, main: ws, layout: e.layout, root: c.String("root"), shape: shapeArgs(c), where: backendArgs(c)}
	proxy, srv, err := serveLauncher(c, ws.DialIDE, dir, panel, tasks)
	if err != nil {
		ws.Close()
		return err
	}
	launcherNotes(proxy, notes)
	defer servePorts(c, proxy, ws).Close()
	rec := launcher.Record{URL: proxy.URL(), Workspace: ws.ID(), Name: workspace.Name(dir), Where: ws.Where(), Dir: dir}
	unpublish, err := rec.Publish(recPath, os.Getpid())
	if err != nil {
		ws.Close()
		return err
	}
	defer unpublish()
	if c.Bool("serve") {
		fmt.Fprintln(c.App.Writer, rec.URL)
	} else if err := showURL(c, e.layout, rec.URL); err != nil {
		ws.Close()
		return err
	}
	s := &launcher.Serving{Proxy: proxy, Server: srv, Workspace: ws, Stderr: c.App.ErrWriter}
	wait := launcher.WaitOptions{Grace: c.Duration("grace"), Detached: c.Bool("detach"), Stderr: c.App.ErrWriter}
	if launcher.Wait(c.Context, proxy, ws.Stopped(c.Context), wait) {
		s.Stopped()
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s stopped\n", ws.Name())
		return nil
	}
	return s.End(b, c.Bool("detach"), 10*time.Second)
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
// host-side routes, the agent panel and the Tasks view.
func serveLauncher(c *cli.Context, dial func(context.Context) (net.Conn, error), dir string, panel *agentPanel, tasks ide.TaskBackend) (*ide.Proxy, *http.Server, error) {
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
	ide.Tasks{Backend: tasks}.Handle(proxy)
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	// The settings' held requests end when the server shuts down, which
	// would otherwise wait out its grace for them.
	stop, stopped := context.WithCancel(context.Background())
	srv.RegisterOnShutdown(stopped)
	home, _ := os.UserHomeDir()
	proxy.Handle("/api/settings", settings.EditorHandler(stop, settings.Path(home), time.Second, 50*time.Second))
	go srv.Serve(l)
	return proxy, srv, nil
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

// detachUp starts DIR's workspace here, then runs `cove up --serve` in
// its own session in the background, and prints its URL.
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
	bg := launcher.Background{Binary: bin, Args: serveArgs(c, dir), RecordPath: recPath, Env: os.Environ()}
	if c.String("root") != "" {
		bg.Env = append(bg.Env, "COVE_ROOT="+c.String("root"))
	}
	rec, err := bg.Start(c.Context)
	if err != nil {
		return err
	}
	detachedNote(c, ws)
	fmt.Fprintln(c.App.Writer, rec.URL)
	return nil
}

// serveArgs are the background server's arguments: cove up --serve with
// the flags that shape the workspace and how it is served.
func serveArgs(c *cli.Context, dir string) []string {
	args := append([]string{"up", "--serve", "--detach", "--port", fmt.Sprint(c.Int("port"))}, shapeArgs(c)...)
	for _, p := range c.StringSlice("publish") {
		args = append(args, "--publish", p)
	}
	return append(args, dir)
}

// shapeArgs are the command's flags that shape a workspace (its image,
// config, limits, cluster), for another cove that makes one as this
// would: the background server, a task's agent.
func shapeArgs(c *cli.Context) []string {
	var args []string
	if img := c.String("image"); img != "" {
		args = append(args, "--image", img)
	}
	if cfg := c.String("config"); cfg != "" {
		args = append(args, "--config", cfg)
	}
	for _, f := range []string{"memory", "pids", "cpus", "net"} {
		if c.IsSet(f) {
			args = append(args, "--"+f, fmt.Sprint(c.Value(f)))
		}
	}
	for _, opt := range c.StringSlice("security-opt") {
		args = append(args, "--security-opt", opt)
	}
	return append(args, backendArgs(c)...)
}

// backendArgs are the command's flags that say where its workspaces are
// (a cluster, its context and namespace): another cove that opens one of
// them, as a task's own IDE does, finds it there.
func backendArgs(c *cli.Context) []string {
	var args []string
	for _, f := range []string{"kubeconfig", "context", "namespace"} {
		if c.IsSet(f) {
			args = append(args, "--"+f, fmt.Sprint(c.Value(f)))
		}
	}
	if c.Bool("kube") {
		args = append(args, "--kube")
	}
	return args
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
