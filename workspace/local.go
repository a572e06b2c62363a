package workspace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/devcontainer/devimage"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/settings"
	"github.com/cove-sh/cove/workspace/compose"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// DefaultImage is the workspace image when neither --image nor the
// project's devcontainer.json names one: Debian, with a shell.
const DefaultImage = "docker.io/library/debian:bookworm"

// Name is the stable, unique name of DIR's workspace: the directory's
// name and a hash of its path.
func Name(dir string) string {
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

// ensure returns the state of s.Dir's running workspace, starting it if
// it is not running: the project bound at /workspace, its own layer kept
// across starts until cove rm. The start goes in named steps (see start).
func (lo *Local) ensure(ctx context.Context, s Spec) (st *container.State, err error) {
	abs, err := filepath.Abs(s.Dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: no such directory", s.Dir)
	}
	name := Name(abs)
	// One start at a time: a cove shell or agent while cove up starts the
	// workspace waits for it, then finds it running.
	if err := os.MkdirAll(lo.runDir(name), 0o700); err != nil {
		return nil, err
	}
	lock, err := LockFile(filepath.Join(lo.runDir(name), "start.lock"), 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("start the workspace of %s: %w", abs, err)
	}
	defer lock.Close()
	states := lo.states()
	st, loadErr := states.Load(name)
	if loadErr == nil && st.Status() == container.Running && !s.Fresh {
		return lo.reuseRunning(ctx, s, st)
	}
	// Read before anything stops or starts: a config cove refuses leaves
	// the workspace as it is.
	dc, err := loadDevcontainer(lo.Stderr, s, abs)
	if err != nil {
		return nil, err
	}
	w := &start{s: s, dc: dc, abs: abs, name: name, layerDir: filepath.Join(lo.Layout.Data, "workspaces", name)}
	if loadErr == nil {
		if !s.Fresh {
			w.madeFrom, w.made = st.Image, st.Digest // the image the kept layer was made on
		}
		if st.Status() == container.Running { // --fresh
			if err := lo.stopServices(st, 10*time.Second); err != nil {
				return nil, err
			}
			if err := st.Stop(10 * time.Second); err != nil {
				return nil, err
			}
		}
		// Stopped: start again on the same layer. Whatever fails from
		// here on, the workspace is still listed (cove ps --all) and
		// removable (cove rm): its record comes back.
		states.Delete(name)
		prev := st
		defer func() {
			if _, loadErr := states.Load(name); err != nil && loadErr != nil {
				lo.restoreState(prev)
			}
		}()
	}
	if s.Fresh {
		if err := lo.RemoveLayer(ctx, w.layerDir); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	return lo.startWorkspace(ctx, w)
}

// start is one start of a workspace, as its steps fill it in.
type start struct {
	s              Spec
	dc             *devcontainer.Config
	abs, name      string
	layerDir       string
	madeFrom, made string // the image the kept layer was made on, and its digest

	limits  container.Limits
	conf    Confinement
	rt      *devcontainer.Runtime
	shaped  Launch // runArgs' --shm-size, --ulimit, --add-host, --device, --tmpfs
	ref     string
	built   string // the digest of the image cove built or put Features on, if it did
	dflt    bool   // ref is the default image: nothing named one
	feats   *devimage.FeatureResult
	sockDir string
	origin  string // the project whose git objects it shares (Spec.Origin)

	wsEnv    []string // the workspace's environment, for the lifecycle commands' ${containerEnv:…}
	imageCfg *v1.ConfigFile
	chown    []string // rootless: new volumes for the user (see workspaceUser)
	idMap    string   // rootless: how the user namespace maps (see idMapRecord)
	keepID   *container.KeepID

	// A Compose workspace (see compose.go): the project, the service
	// that is the workspace, and the others it runs, in start order.
	compose  *compose.Project
	main     *compose.Service
	services []compose.Service
	// warned are the warnings said in this start: its containers share
	// a host, so its warnings once.
	warned map[string]bool
}

// warnOnce says msg on lo's stderr unless this start already has.
func (w *start) warnOnce(lo *Local) func(msg string) {
	return func(msg string) {
		if !w.warned[msg] {
			if w.warned == nil {
				w.warned = map[string]bool{}
			}
			w.warned[msg] = true
			fmt.Fprintf(lo.Stderr, "cove: warning: %s\n", msg)
		}
	}
}

// reuseRunning is ensure's answer for a workspace already running: what
// the command line asks that it cannot change now is said.
func (lo *Local) reuseRunning(ctx context.Context, s Spec, st *container.State) (*container.State, error) {
	if s.Trust {
		if err := TrustRunning(lo.Stderr, s, st.Name); err != nil {
			return nil, err
		}
	}
	if img := s.Image; img != "" && img != st.Image {
		fmt.Fprintf(lo.Stderr, "cove: note: the workspace %s runs %s; --image %s takes effect with --fresh (what was installed in it goes)\n",
			st.Name, st.Image, img)
	}
	if s.Attach {
		lo.attachRunning(ctx, st)
	}
	return st, nil
}

// startWorkspace starts w's workspace, stopped or never started: its
// configuration and image first, then the container, then its IDE server
// and lifecycle commands.
func (lo *Local) startWorkspace(ctx context.Context, w *start) (*container.State, error) {
	note := newWaitNote(lo.Stderr, 4*time.Second)
	defer note.stop()
	note.step("initializeCommand, on this machine")
	if err := lo.configure(ctx, w); err != nil {
		return nil, err
	}
	note.step("the workspace's image (its build or pull, its Features)")
	if err := lo.resolveImage(ctx, w); err != nil {
		return nil, err
	}
	if err := lo.checkLayerImage(w); err != nil {
		return nil, err
	}
	ports, err := lo.workspacePorts(w)
	if err != nil {
		return nil, err
	}
	l, err := lo.workspaceLaunch(w, ports)
	if err != nil {
		return nil, err
	}
	note.step("the image " + w.ref + " (pull and extraction) and the workspace's container")
	if _, err := lo.Run(ctx, l); err != nil {
		if pe := (*image.PullError)(nil); w.dflt && errors.As(err, &pe) && pe.Ref == w.ref {
			err = fmt.Errorf("%w; %s", err, lo.defaultImageAdvice(w.ref))
		}
		return nil, fmt.Errorf("start the workspace of %s: %w", w.abs, err)
	}
	st, err := lo.states().Load(w.name)
	if err != nil {
		return nil, err
	}
	lo.recordLayer(w)
	note.step("the IDE server in the workspace")
	if err := lo.waitServer(ctx, st, w.layerDir); err != nil {
		return nil, err
	}
	note.step("the Compose services")
	err = lo.startServices(ctx, w, st)
	if err == nil {
		err = lo.chownVolumes(ctx, st, w.chown)
	}
	if err == nil {
		note.step("the entrypoint (and the service's command)")
		err = lo.startEntrypoints(ctx, st, w.dc, w.imageCfg)
	}
	if err == nil && w.s.Prepare != nil {
		note.step("the project's files in the workspace (a task's branch and checkout)")
		err = w.s.Prepare(ctx, &LocalWorkspace{lo: lo, State: st})
	}
	note.step("the lifecycle commands (onCreate, postCreate, postStart)")
	if err == nil {
		err = lo.lifecycle(ctx, st, w.dc, w.layerDir, w.wsEnv, true, w.s.Attach)
	}
	if err != nil {
		// Never a workspace left running by a failed start; its layer
		// stays, and the commands run again next time.
		lo.stopServices(st, 10*time.Second)
		st.Stop(10 * time.Second)
		return nil, fmt.Errorf("%w; the workspace %s is stopped (its layer is kept: cove up runs the create commands again, --fresh starts from the image)", err, w.name)
	}
	return st, nil
}

// configure reads what shapes the container from the command line and
// runArgs (limits, network, runArgs' --shm-size, --ulimit, --add-host,
// --device, --tmpfs and --env-file): a bad one stops the start before
// anything runs. Then initializeCommand runs, as the spec has it: before
// the image is pulled or built.
func (lo *Local) configure(ctx context.Context, w *start) error {
	w.limits, w.conf = w.s.Limits, w.s.Confinement
	// runArgs' limits and network, where the command line says nothing.
	rt, err := fileRuntime(w.dc, &w.limits, &w.conf)
	if err != nil {
		return err
	}
	w.rt = rt
	if w.conf.Net == "" {
		w.conf.Net = container.NetPrivate
	}
	w.shaped = Launch{Net: w.conf.Net}
	if err := runArgsLaunch(lo.Stderr, w.dc, rt, w.abs, &w.shaped); err != nil {
		return err
	}
	if err := lo.loadCompose(ctx, w); err != nil {
		return err
	}
	return initializeCommand(ctx, lo.Stderr, w.dc, w.abs, devcontainerOptions(w.s).Home)
}

// resolveImage settles the image the workspace starts on: --image, the
// devcontainer.json's image or build, the default; with its Features.
func (lo *Local) resolveImage(ctx context.Context, w *start) error {
	dc := w.dc
	w.ref = w.s.Image
	if w.ref == "" && w.main != nil {
		var err error
		if w.ref, w.built, err = lo.composeImage(ctx, w, w.main); err != nil {
			return err
		}
	} else if w.ref == "" && dc != nil {
		if err := dc.CheckImage(); err != nil {
			return err
		}
		var err error
		if w.ref, w.built, err = lo.buildImage(ctx, dc, w.abs, w.name, dc.Image); err != nil {
			return err
		}
	}
	// The default image, cove's or the user's setting: when it cannot be
	// pulled, the error says how to choose another.
	w.dflt = w.ref == ""
	if w.dflt {
		w.ref = cmp.Or(lo.Settings.Image, DefaultImage)
	}
	feats, err := lo.installFeatures(ctx, dc, w.ref, w.name, w.s.Fresh)
	if err != nil {
		return err
	}
	w.feats = feats
	if feats != nil && feats.Digest != "" {
		w.ref, w.built = feats.Ref, feats.Digest
	}
	return nil
}

// checkLayerImage compares the image with the one the kept layer was
// made on: put on another, what it holds (installed packages, their
// files) would be mixed with the new one.
func (lo *Local) checkLayerImage(w *start) error {
	name, ref, dc := w.name, w.ref, w.dc
	prev, err := os.ReadFile(filepath.Join(w.layerDir, "image-ref"))
	if err == nil && string(prev) != ref && w.dflt && w.built == "" {
		// Nothing names an image, and the layer was made on another: the
		// default then (cove's, or the settings' before they changed), or
		// --image before cove remembered it. It starts as it was made.
		fmt.Fprintf(lo.Stderr, "cove: note: the workspace %s was made from %s and starts on it, not on the default image %s (cove up --fresh starts it anew from that; what was installed in it goes)\n",
			name, prev, ref)
		w.ref, w.dflt = string(prev), false
	} else if err == nil && string(prev) != ref && w.built != "" {
		// Built or given Features since: the names are cove's own.
		return fmt.Errorf("the workspace %s was made from %s, before %s's build or Features: cove up --fresh starts it anew with them (what was installed in it goes)",
			name, prev, dc.Path)
	} else if err == nil && string(prev) != ref && w.s.Image != "" {
		return fmt.Errorf("the workspace %s was made from %s, not %s: cove up --fresh --image %s starts it anew from that image (what was installed in it goes); cove up without --image starts it as it was",
			name, prev, ref, ref)
	} else if err == nil && string(prev) != ref {
		return fmt.Errorf("the workspace %s was made from %s, not %s: cove up --fresh starts it anew from %s (what was installed in it goes), or leave the image as it was",
			name, prev, ref, ref)
	}
	if prev, err := os.ReadFile(filepath.Join(w.layerDir, "image-built")); err == nil && w.built != "" && string(prev) != w.built {
		return fmt.Errorf("the workspace %s was made from an earlier build of its image (%s changed since): cove up --fresh starts it anew from the new one (what was installed in it goes), or undo the change",
			name, dc.Path+"'s build or Features")
	}
	return nil
}

// workspacePorts are the ports forwarded into the workspace: the command
// line's -p first (a host port it names is not the project's to take
// too), then forwardPorts, on 127.0.0.1 only.
func (lo *Local) workspacePorts(w *start) ([]container.Port, error) {
	dc := w.dc
	specs, notes, err := dc.PortSpecs()
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
	}
	var ports []container.Port
	for _, p := range w.s.Ports {
		p.Source = "-p"
		ports = append(ports, p)
	}
	for _, s := range specs {
		p, err := container.ParsePort(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dc.Path, err)
		}
		p.Source = "forwardPorts"
		if slices.ContainsFunc(ports, p.Overlaps) {
			continue
		}
		if p.HostIP != "127.0.0.1" {
			// The project is the workspace's to write: it may ask for a
			// port, never to open one to the network.
			fmt.Fprintf(lo.Stderr, "cove: note: %s asks for host port %s; the project's ports are forwarded on 127.0.0.1 only\n", dc.Path, termtext.Visible(p.String()))
			p.HostIP = "127.0.0.1"
		}
		ports = append(ports, p)
	}
	if w.main != nil {
		more, err := lo.composePorts(w, ports)
		if err != nil {
			return nil, err
		}
		ports = append(ports, more...)
	}
	if len(ports) > 0 && w.conf.Net != container.NetPrivate {
		// The workspace shares the host's network (or has none): its
		// ports need no forwarding, or cannot have pasta's (-p's go
		// through the launcher's tunnel, see Spec.Ports).
		ports = nil
	}
	return ports, nil
}

// workspaceBinds are what the workspace sees of the host: the project
// (at /workspace, the workspaceFolder, the spec's default place), the
// socket directory (made afresh: nothing the last workspace left there,
// which it could write, is kept), and the devcontainer.json's mounts.
func (lo *Local) workspaceBinds(w *start) ([]container.Bind, []container.Tmpfs, error) {
	dc, abs := w.dc, w.abs
	w.sockDir = lo.socketDir(w.name)
	if err := os.RemoveAll(w.sockDir); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(w.sockDir, 0o700); err != nil {
		return nil, nil, err
	}
	folder := dc.Folder()
	binds := []container.Bind{{Source: abs, Target: "/workspace"}, {Source: w.sockDir, Target: "/.cove/run"}}
	wsMount, err := workspaceMountBind(dc, abs, w.layerDir)
	if err != nil {
		return nil, nil, err
	}
	if wsMount != nil {
		binds = append(binds, *wsMount)
	}
	if b := lo.originBind(w); b != nil {
		binds = append(binds, *b)
	}
	if folder != "/workspace" && (wsMount == nil || wsMount.Target != folder) {
		binds = append(binds, container.Bind{Source: abs, Target: folder})
	}
	if dc != nil && dc.WorkspaceFolder == "" && dc.WorkspaceMount == "" {
		// The spec's own default place too, /workspaces/NAME: a command
		// that names it finds the project there.
		binds = append(binds, container.Bind{Source: abs, Target: "/workspaces/" + filepath.Base(abs)})
	}
	var mounts []container.Bind
	var tmpfs []container.Tmpfs
	if dc != nil {
		if mounts, tmpfs, err = workspaceMounts(append(slices.Clone(dc.Mounts), w.rt.Mounts...), dc.Trusted, abs, w.layerDir); err != nil {
			return nil, nil, err
		}
	}
	if w.main != nil {
		b, t, err := serviceMounts(w, w.main)
		if err != nil {
			return nil, nil, err
		}
		mounts, tmpfs = append(mounts, b...), append(tmpfs, t...)
	}
	return append(binds, mounts...), append(tmpfs, w.shaped.Tmpfs...), nil
}

// originFile, beside a task's workspace's layer, names the project whose
// git objects it shares (Spec.Origin), for its later starts.
const originFile = "origin"

// originBind shares the git objects of the project a task's workspace was
// made from (Spec.Origin, else as its last start had it) read-only. The
// project is the other workspace's to write: the objects directory is
// opened beneath it following no symlink (container.Bind.Beneath). A
// project that has no objects directory now (its .git gone, or made a
// worktree's file) is said, and the workspace starts without it: the
// task's git then names the missing history.
func (lo *Local) originBind(w *start) *container.Bind {
	w.origin = w.s.Origin
	if w.origin == "" {
		b, _ := os.ReadFile(filepath.Join(w.layerDir, originFile))
		w.origin = string(b)
	}
	if w.origin == "" || !filepath.IsAbs(w.origin) {
		w.origin = ""
		return nil
	}
	if fi, err := os.Lstat(filepath.Join(w.origin, ".git", "objects")); err != nil || !fi.IsDir() {
		fmt.Fprintf(lo.Stderr, "cove: warning: the task's project %s has no .git/objects directory now: its history is not shared with the workspace %s\n", w.origin, w.name)
		return nil
	}
	return &container.Bind{Beneath: w.origin, Source: ".git/objects", Target: OriginObjects, ReadOnly: true}
}

// workspaceLaunch is the workspace's container: the IDE server as its
// workload, on a socket in a directory bound from the host's runtime dir
// that holds nothing else (the launcher's record, log and token stay out
// of the workspace's sight): the only way in, through the proxy.
func (lo *Local) workspaceLaunch(w *start, ports []container.Port) (Launch, error) {
	binds, tmpfs, err := lo.workspaceBinds(w)
	if err != nil {
		return Launch{}, err
	}
	made := w.made
	if w.madeFrom != w.ref {
		made = "" // made from another image: not this one's to stand in for
	}
	folder := w.dc.Folder()
	shaped := w.shaped
	if w.main != nil {
		shaped.ExtraHosts = append(slices.Clone(shaped.ExtraHosts), composeHosts(w, w.main)...)
	}
	return Launch{
		Ref: w.ref, Policy: image.PullMissing, Name: w.name, Made: made,
		Args:    serverArgs(folder),
		Workdir: folder,
		Binds:   binds,
		Limits:  w.limits, Net: w.conf.Net, Ports: ports, NoSeccomp: w.conf.NoSeccomp, Detach: true, Quiet: true,
		// The IDE server needs no network to answer the page (its shells
		// start when the page asks, well after), and what the lifecycle
		// commands send before pasta is up waits for it in the
		// interface's queue (Spec.NetLate, container.Tap).
		NetLate:  true,
		Dir:      w.layerDir,
		Hostname: w.rt.Hostname,
		ShmSize:  shaped.ShmSize, Ulimits: shaped.Ulimits, ExtraHosts: shaped.ExtraHosts, Devices: shaped.Devices, Tmpfs: tmpfs,
		Prepare: func(cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *Launch) error {
			return lo.prepareWorkspace(w, cfg, rootfs, proc, l)
		},
		Warn: w.warnOnce(lo),
	}, nil
}

// serverArgs run the IDE server, the workspace's workload.
func serverArgs(folder string) []string {
	return []string{"/.cove/cove", "ide", "serve", "--socket", "/.cove/run/ide.sock", "--dir", folder}
}

// prepareWorkspace is the workspace launch's Prepare: the image's
// metadata merged into the devcontainer.json, then its environment,
// runtime settings and user.
func (lo *Local) prepareWorkspace(w *start, cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *Launch) error {
	dc := w.dc
	// The server is the workload: the image's ENTRYPOINT is not put in
	// front of it (devcontainer.json's overrideCommand, true for an
	// image).
	proc.Args = serverArgs(dc.Folder())
	said := 0
	if dc != nil {
		said = len(dc.Notes)
	}
	label := cfg.Config.Labels[devcontainer.MetadataLabel]
	if w.feats != nil {
		// The Features' part, after the image's, as the spec merges it.
		label = devcontainer.AppendMetadata(label, w.feats.Metadata...)
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
		fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
	}
	w.dc = md
	if w.main != nil {
		proc.Env = append(proc.Env, w.main.Env...) // the service's, under containerEnv
	}
	proc.Env = workspaceEnv(md, append(proc.Env, w.rt.Env...))
	w.wsEnv = proc.Env
	if err := lo.applyRuntime(md, l, w.abs, w.layerDir, mountsBefore); err != nil {
		return err
	}
	w.imageCfg = composeCommand(cfg, w.main)
	note := func(n string) { fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n)) }
	l.KeepID, err = workspaceUser(md, rootfs, filepath.Join(w.layerDir, "upper"), w.sockDir, w.abs, proc, l.Binds, &w.chown, w.name, note)
	w.keepID = l.KeepID
	if err == nil && os.Geteuid() != 0 {
		w.idMap = idMapRecord(l.KeepID)
		checkIDMap(w.layerDir, w.idMap, w.name, note)
	}
	return err
}

// recordLayer writes, beside the kept layer, what it was made from and
// how: the next start checks them (checkLayerImage, checkIDMap).
func (lo *Local) recordLayer(w *start) {
	os.WriteFile(filepath.Join(w.layerDir, "image-ref"), []byte(w.ref), 0o600)
	if err := w.s.Made.write(w.layerDir); err != nil {
		fmt.Fprintf(lo.Stderr, "cove: warning: %v (a plain cove up may not start it as it was started now)\n", err)
	}
	if w.idMap != "" {
		os.WriteFile(filepath.Join(w.layerDir, "id-map"), []byte(w.idMap), 0o600)
	}
	if w.origin != "" {
		os.WriteFile(filepath.Join(w.layerDir, originFile), []byte(w.origin), 0o600)
	}
	if w.built != "" {
		os.WriteFile(filepath.Join(w.layerDir, "image-built"), []byte(w.built), 0o600)
	}
	keep := filepath.Join(w.layerDir, keepRunningFile)
	if w.dc != nil && w.dc.ShutdownAction == "none" {
		os.WriteFile(keep, nil, 0o600)
	} else {
		os.Remove(keep)
	}
}

// keepRunningFile, beside a workspace's layer, says its devcontainer.json's
// shutdownAction is none: closing its last window leaves it running.
const keepRunningFile = "shutdown-none"

// KeepsRunning says whether the workspace name stays up when its last
// window closes (shutdownAction none).
func (lo *Local) KeepsRunning(name string) bool {
	st, err := lo.states().Load(name)
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(st.Dir, keepRunningFile))
	return err == nil
}

// waitServer waits for the workspace's IDE server to answer on its
// socket. It is usually up within tens of milliseconds: ask often at
// first (the wait is most of a warm start), then less.
func (lo *Local) waitServer(ctx context.Context, st *container.State, layerDir string) error {
	sock := lo.socket(st.Name)
	for start := time.Now(); ; {
		if conn, err := ide.DialSocket(ctx, sock); err == nil {
			conn.Close()
			return nil
		}
		waited := time.Since(start)
		gone := st.Gone()
		if waited > 10*time.Second || gone != nil {
			why := fmt.Sprintf("no answer on %s after %s", sock, waited.Round(time.Millisecond))
			if gone != nil {
				why = fmt.Sprintf("the workspace's init %v", gone)
			}
			log, _ := os.ReadFile(filepath.Join(layerDir, "log"))
			return fmt.Errorf("the workspace's IDE server did not start (%s): %s", why, strings.TrimSpace(string(log)))
		}
		if waited < 500*time.Millisecond {
			time.Sleep(2 * time.Millisecond)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// restoreState puts back the record of a stopped workspace that a failed
// start dropped, so that nothing is lost from cove ps --all.
func (lo *Local) restoreState(prev *container.State) {
	states := lo.states()
	if err := states.Create(prev.Name); err != nil {
		return // someone else's now
	}
	if err := states.Save(prev); err != nil {
		fmt.Fprintf(lo.Stderr, "cove: warning: the workspace %s's record could not be put back: %v (its layer is kept in %s)\n", prev.Name, err, prev.Dir)
	}
}

// defaultImageAdvice says, for a default image ref that could not be
// pulled, where it came from and how to choose another: --image for one
// workspace, the settings file for all, or a registry mirror.
func (lo *Local) defaultImageAdvice(ref string) string {
	path := cmp.Or(lo.Settings.Path, settings.FileName)
	from := "cove's default workspace image"
	if lo.Settings.Image != "" {
		from = "the workspace image your settings choose (" + path + ")"
	}
	return fmt.Sprintf("%s is %s: choose another with --image REF, or for every project with {\"image\": \"REF\"} in %s; a registry mirror goes there too ({\"registryMirrors\": {\"docker.io\": [\"HOST:PORT\"]}})",
		ref, from, path)
}

// runDir holds a workspace's runtime files on the host side: the
// launcher's record and log, never bound into the workspace.
func (lo *Local) runDir(name string) string {
	return filepath.Join(lo.Layout.Runtime, "workspaces", name)
}

// socketDir is the one directory of the host's the workspace
// sees (at /.cove/run): it holds the IDE server's socket and nothing
// else, and the workspace may write anything there.
func (lo *Local) socketDir(name string) string {
	return filepath.Join(lo.runDir(name), "sock")
}

// socket is the IDE server's socket on the host side.
func (lo *Local) socket(name string) string {
	return filepath.Join(lo.socketDir(name), "ide.sock")
}

// ErrLocked says another cove holds a lock.
var ErrLocked = errors.New("another cove holds the lock")

// LockFile takes an exclusive lock on the file at path (made if need
// be), waiting up to wait for another cove to let go; close the file to
// release it. The kernel releases it when the process ends, however.
func LockFile(path string, wait time.Duration) (*os.File, error) {
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
			return nil, ErrLocked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idMapRecord names how a rootless workspace's user namespace maps, as
// its layer's id-map file records it: "root" (the user is root inside),
// or "keep-id UID:GID".
func idMapRecord(k *container.KeepID) string {
	if k == nil {
		return "root"
	}
	return fmt.Sprintf("keep-id %d:%d", k.UID, k.GID)
}

// checkIDMap says, once, when a rootless workspace's kept layer was made
// under another mapping than now (a layer without a record was made with
// the user as root, before keep-id): its files' ids read differently
// inside, so the workspace's user may find its own files another's.
func checkIDMap(layerDir, now, name string, note func(string)) {
	prev := "root"
	if b, err := os.ReadFile(filepath.Join(layerDir, "id-map")); err == nil {
		prev = string(b)
	}
	if prev == now {
		return
	}
	if entries, err := os.ReadDir(filepath.Join(layerDir, "upper")); err != nil || len(entries) == 0 {
		return // nothing made under the old one
	}
	note(fmt.Sprintf("the workspace %s's kept layer was made with another user namespace mapping (%s, now %s): the files made in it show under other ids now; if its user cannot write them, cove up --fresh starts it anew (what was installed in it goes)", name, prev, now))
}
