package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/devcontainer"
	"github.com/cove-sh/cove/internal/termtext"
	v1 "github.com/google/go-containerregistry/pkg/v1"
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
		&cli.StringFlag{Name: "config", Usage: "the project's devcontainer.json at `PATH`, when it has several"},
	}, limitFlags()...)
}

// trustFlag is cove up's and cove shell's --trust (cove agent's trusts its
// own project config).
func trustFlag() cli.Flag {
	return &cli.BoolFlag{Name: "trust", Usage: "trust the project's devcontainer.json as it is now: its initializeCommand runs on this host, its host mounts, runArgs and ${localEnv:…} apply"}
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
		return nil, fmt.Errorf("%s: no such directory", dir)
	}
	name := workspaceName(abs)
	// One start at a time: a cove shell or agent while cove up starts the
	// workspace waits for it, then finds it running.
	if err := os.MkdirAll(workspaceRunDir(e, name), 0o700); err != nil {
		return nil, err
	}
	lock, err := lockFile(filepath.Join(workspaceRunDir(e, name), "start.lock"), 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("start the workspace of %s: %w", abs, err)
	}
	defer lock.Close()
	states := e.states()
	st, loadErr := states.Load(name)
	if loadErr == nil && st.Status() == container.Running && !c.Bool("fresh") {
		if img := c.String("image"); img != "" && img != st.Image {
			fmt.Fprintf(c.App.ErrWriter, "cove: note: the workspace %s runs %s; --image %s takes effect with --fresh (what was installed in it goes)\n",
				st.Name, st.Image, img)
		}
		if attaches(c) {
			attachRunning(c, e, st)
		}
		return st, nil
	}
	// Read before anything stops or starts: a config cove refuses leaves
	// the workspace as it is.
	dc, err := loadDevcontainer(c, abs)
	if err != nil {
		return nil, err
	}
	if loadErr == nil {
		if st.Status() == container.Running { // --fresh
			if err := st.Stop(10 * time.Second); err != nil {
				return nil, err
			}
		}
		states.Delete(name) // stopped: start again on the same layer
	}
	if c.Bool("fresh") {
		if err := e.removeLayer(c.Context, filepath.Join(e.layout.Data, "workspaces", name)); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	limits, conf, err := limitsFrom(c)
	if err != nil {
		return nil, err
	}
	// runArgs' limits and network, where the command line says nothing.
	rt, err := fileRuntime(c, dc, &limits, &conf)
	if err != nil {
		return nil, err
	}
	// initializeCommand comes first, as the spec has it: before the image
	// is pulled or built.
	if err := initializeCommand(c, dc, abs); err != nil {
		return nil, err
	}
	ref := c.String("image")
	built := ""
	if ref == "" && dc != nil {
		ref = dc.Image
		if ref, built, err = buildWorkspaceImage(c, e, dc, abs, name, ref); err != nil {
			return nil, err
		}
	}
	if ref == "" {
		ref = DefaultImage
	}
	feats, err := installWorkspaceFeatures(c, e, dc, ref, name)
	if err != nil {
		return nil, err
	}
	if feats != nil && feats.Digest != "" {
		ref, built = feats.Ref, feats.Digest
	}
	// The kept layer was made on an image: put on another, what it holds
	// (installed packages, their files) would be mixed with the new one.
	layerDir := filepath.Join(e.layout.Data, "workspaces", name)
	if prev, err := os.ReadFile(filepath.Join(layerDir, "image-ref")); err == nil && string(prev) != ref && built != "" {
		// Built or given Features since: the names are cove's own.
		return nil, fmt.Errorf("the workspace %s was made from %s, before %s's build or Features: cove up --fresh starts it anew with them (what was installed in it goes)",
			name, prev, dc.Path)
	} else if err == nil && string(prev) != ref {
		return nil, fmt.Errorf("the workspace %s was made from %s, not %s: cove up --fresh starts it anew from %s (what was installed in it goes), or leave the image as it was",
			name, prev, ref, ref)
	}
	if prev, err := os.ReadFile(filepath.Join(layerDir, "image-built")); err == nil && built != "" && string(prev) != built {
		return nil, fmt.Errorf("the workspace %s was made from an earlier build of its image (%s changed since): cove up --fresh starts it anew from the new one (what was installed in it goes), or undo the change",
			name, dc.Path+"'s build or Features")
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
	folder := dc.Folder()
	binds := []container.Bind{{Source: abs, Target: "/workspace"}, {Source: sockDir, Target: "/.cove/run"}}
	wsMount, err := workspaceMountBind(dc, abs, layerDir)
	if err != nil {
		return nil, err
	}
	if wsMount != nil {
		binds = append(binds, *wsMount)
	}
	if folder != "/workspace" && (wsMount == nil || wsMount.Target != folder) {
		binds = append(binds, container.Bind{Source: abs, Target: folder})
	}
	var mounts []container.Bind
	if dc != nil {
		if mounts, err = workspaceMounts(append(slices.Clone(dc.Mounts), rt.Mounts...), dc.Trusted, layerDir); err != nil {
			return nil, err
		}
	}
	binds = append(binds, mounts...)
	var wsEnv []string // the workspace's environment, for the lifecycle commands' ${containerEnv:…}
	var imageCfg *v1.ConfigFile
	var chown []string // rootless: new volumes for the user (see workspaceUser)
	l := launch{
		Ref: ref, Policy: image.PullMissing, Name: name,
		// The workload is the IDE server, on a socket in a directory bound
		// from the host's runtime dir that holds nothing else (the
		// launcher's record, log and token stay out of the workspace's
		// sight): the only way in, through the proxy.
		Args:    []string{"/.cove/cove", "ide", "serve", "--socket", "/.cove/run/ide.sock", "--dir", folder},
		Workdir: folder,
		Binds:   binds,
		Limits:  limits, Net: conf.Net, Ports: ports, NoSeccomp: conf.NoSeccomp, Detach: true, Quiet: true,
		Dir:      layerDir,
		Hostname: rt.Hostname,
		Prepare: func(cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *launch) error {
			// The server is the workload: the image's ENTRYPOINT is not
			// put in front of it (devcontainer.json's overrideCommand,
			// true for an image).
			proc.Args = []string{"/.cove/cove", "ide", "serve", "--socket", "/.cove/run/ide.sock", "--dir", folder}
			said := 0
			if dc != nil {
				said = len(dc.Notes)
			}
			label := cfg.Config.Labels[devcontainer.MetadataLabel]
			if feats != nil {
				// The Features' part, after the image's, as the spec merges it.
				label = devcontainer.AppendMetadata(label, feats.Metadata...)
			}
			mountsBefore := 0
			if dc != nil {
				mountsBefore = len(dc.Mounts)
			}
			md, err := dc.MergeMetadata(label)
			if err != nil {
				return err
			}
			for _, n := range md.Notes[said:] {
				fmt.Fprintf(c.App.ErrWriter, "cove: note: %s\n", termtext.Visible(n))
			}
			dc = md
			proc.Env = workspaceEnv(dc, append(proc.Env, rt.Env...))
			wsEnv = proc.Env
			if err := applyRuntime(c, dc, l, layerDir, mountsBefore); err != nil {
				return err
			}
			imageCfg = cfg
			return workspaceUser(dc, rootfs, filepath.Join(layerDir, "upper"), sockDir, abs, proc, l.Binds, &chown)
		},
	}
	if _, err := e.launch(c, l); err != nil {
		return nil, fmt.Errorf("start the workspace of %s: %w", abs, err)
	}
	st, err = states.Load(name)
	if err != nil {
		return nil, err
	}
	os.WriteFile(filepath.Join(layerDir, "image-ref"), []byte(ref), 0o600)
	if built != "" {
		os.WriteFile(filepath.Join(layerDir, "image-built"), []byte(built), 0o600)
	}
	// The server is usually up within tens of milliseconds: ask often at
	// first (the wait is most of a warm start), then less.
	sock := workspaceSocket(e, name)
	for start := time.Now(); ; {
		if conn, err := ide.DialSocket(c.Context, sock); err == nil {
			conn.Close()
			break
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
	err = chownVolumes(c, e, st, chown)
	if err == nil {
		err = startEntrypoints(c, e, st, dc, imageCfg)
	}
	if err == nil {
		err = lifecycle(c, e, st, dc, layerDir, wsEnv, true, attaches(c))
	}
	if err != nil {
		// Never a workspace left running by a failed start; its layer
		// stays, and the commands run again next time.
		st.Stop(10 * time.Second)
		return nil, fmt.Errorf("%w; the workspace %s is stopped (its layer is kept: cove up runs the create commands again, --fresh starts from the image)", err, name)
	}
	return st, nil
}

// attaches says whether the command attaches a user to the workspace (the
// spec's postAttachCommand runs then): cove up and cove shell.
func attaches(c *cli.Context) bool {
	name := c.Command.Name
	return (name == "up" || name == "shell" || name == c.App.Name) && !c.Bool("serve")
}

// dirArg is the command's DIR argument, absolute; the current directory
// when there is none.
func dirArg(c *cli.Context) (string, error) {
	dir := c.Args().First()
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// cove upp: a command mistyped reads as a directory.
		if c.Command.Name == c.App.Name && !strings.ContainsRune(dir, '/') {
			if near := nearestCommand(c.App, dir); near != "" {
				return "", fmt.Errorf("unknown command %s (did you mean %s?)", dir, near)
			}
		}
		return "", fmt.Errorf("%s: no such directory", dir)
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s: not a directory (cove works on a project directory)", dir)
	}
	return abs, nil
}

// nearestCommand is the command whose name is within two edits of name,
// "" if none is.
func nearestCommand(app *cli.App, name string) string {
	best, bestDist := "", 3
	for _, cmd := range app.Commands {
		if cmd.Hidden {
			continue
		}
		if d := editDistance(name, cmd.Name); d < bestDist {
			best, bestDist = cmd.Name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
		Flags:     append(append(workspaceFlags(), trustFlag()), kubeFlags()...),
		Action: func(c *cli.Context) error {
			e, err := globalEnv(c)
			if err != nil {
				return err
			}
			dir, err := dirArg(c)
			if err != nil {
				return err
			}
			if c.Bool("kube") {
				return kubeShell(c, dir)
			}
			started := !workspaceRunning(e, dir)
			st, err := ensureWorkspace(c, e, dir)
			if err != nil {
				return err
			}
			defer keptRunningNote(c, e, st, started)
			if !term.IsTerminal(int(os.Stdin.Fd())) {
				// Commands on stdin (echo make | cove shell): a shell
				// reading them, as sh -s does, with no terminal.
				req := container.ExecRequest{Args: []string{"/bin/sh", "-c", "command -v bash >/dev/null && exec bash -s; exec sh -s"}, Cwd: "/workspace"}
				stdio, closeStdio, err := execStdio(c)
				if err != nil {
					return err
				}
				defer closeStdio()
				return e.exec(st.Name, req, stdio)
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
				&cli.StringFlag{Name: "socket", Usage: "listen on `PATH`"},
				&cli.StringFlag{Name: "tcp", Usage: "listen on `ADDR` instead (a Pod's loopback, for port-forward)"},
				&cli.StringFlag{Name: "dir", Value: "/workspace", Usage: "the project `DIR`"},
			},
			Action: func(c *cli.Context) error {
				ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
				defer stop()
				if addr := c.String("tcp"); addr != "" {
					return ide.ServeOn(ctx, "tcp", addr, c.String("dir"))
				}
				if c.String("socket") == "" {
					return errors.New("give --socket or --tcp")
				}
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

// workspaceRunning says whether DIR's workspace runs now.
func workspaceRunning(e *env, dir string) bool {
	st, err := e.states().Load(workspaceName(dir))
	return err == nil && st.Status() == container.Running
}

// keptRunningNote says, when a command that is not the workspace's
// launcher (cove shell, cove agent) started the workspace, that it goes
// on running, and how to stop it.
func keptRunningNote(c *cli.Context, e *env, st *container.State, started bool) {
	if started && st.Status() == container.Running {
		fmt.Fprintf(c.App.ErrWriter, "cove: the workspace %s keeps running (cove stop %s stops it; cove up opens it)\n", st.Name, st.Name)
	}
}

// errLocked says another cove holds a lock.
var errLocked = errors.New("another cove holds the lock")

// lockFile takes an exclusive lock on the file at path (made if need
// be), waiting up to wait for another cove to let go; close the file to
// release it. The kernel releases it when the process ends, however.
func lockFile(path string, wait time.Duration) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(wait); ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, errLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}
