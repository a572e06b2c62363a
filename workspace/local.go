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
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/settings"
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
// across starts until cove rm.
func (lo *Local) ensure(ctx context.Context, s Spec) (st *container.State, err error) {
	dir := s.Dir
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s: no such directory", dir)
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
		if s.Trust {
			if err := TrustRunning(lo.Stderr, s, name); err != nil {
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
	// Read before anything stops or starts: a config cove refuses leaves
	// the workspace as it is.
	dc, err := loadDevcontainer(lo.Stderr, s, abs)
	if err != nil {
		return nil, err
	}
	var madeFrom, made string // the image the kept layer was made on
	if loadErr == nil && !s.Fresh {
		madeFrom, made = st.Image, st.Digest
	}
	if loadErr == nil {
		if st.Status() == container.Running { // --fresh
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
		if err := lo.RemoveLayer(ctx, filepath.Join(lo.Layout.Data, "workspaces", name)); err != nil {
			return nil, fmt.Errorf("--fresh: %w", err)
		}
	}
	limits, conf := s.Limits, s.Confinement
	// runArgs' limits and network, where the command line says nothing.
	rt, err := fileRuntime(dc, &limits, &conf)
	if err != nil {
		return nil, err
	}
	if conf.Net == "" {
		conf.Net = container.NetPrivate
	}
	// runArgs' --shm-size, --ulimit, --add-host, --device, --tmpfs and --env-file, read now:
	// a bad one stops the start before anything runs.
	shaped := Launch{Net: conf.Net}
	if err := runArgsLaunch(lo.Stderr, dc, rt, abs, &shaped); err != nil {
		return nil, err
	}
	// initializeCommand comes first, as the spec has it: before the image
	// is pulled or built.
	if err := initializeCommand(ctx, lo.Stderr, dc, abs, devcontainerOptions(s).Home); err != nil {
		return nil, err
	}
	ref := s.Image
	built := ""
	if ref == "" && dc != nil {
		if err := dc.CheckImage(); err != nil {
			return nil, err
		}
		ref = dc.Image
		if ref, built, err = lo.buildImage(ctx, dc, abs, name, ref); err != nil {
			return nil, err
		}
	}
	// The default image, cove's or the user's setting: when it cannot be
	// pulled, the error says how to choose another.
	defaulted := ref == ""
	if defaulted {
		ref = cmp.Or(lo.Settings.Image, DefaultImage)
	}
	feats, err := lo.installFeatures(ctx, dc, ref, name, s.Fresh)
	if err != nil {
		return nil, err
	}
	if feats != nil && feats.Digest != "" {
		ref, built = feats.Ref, feats.Digest
	}
	// The kept layer was made on an image: put on another, what it holds
	// (installed packages, their files) would be mixed with the new one.
	layerDir := filepath.Join(lo.Layout.Data, "workspaces", name)
	if prev, err := os.ReadFile(filepath.Join(layerDir, "image-ref")); err == nil && string(prev) != ref && defaulted && built == "" {
		// Nothing names an image, and the layer was made on another: the
		// default then (cove's, or the settings' before they changed), or
		// --image before cove remembered it. It starts as it was made.
		fmt.Fprintf(lo.Stderr, "cove: note: the workspace %s was made from %s and starts on it, not on the default image %s (cove up --fresh starts it anew from that; what was installed in it goes)\n",
			name, prev, ref)
		ref, defaulted = string(prev), false
	} else if err == nil && string(prev) != ref && built != "" {
		// Built or given Features since: the names are cove's own.
		return nil, fmt.Errorf("the workspace %s was made from %s, before %s's build or Features: cove up --fresh starts it anew with them (what was installed in it goes)",
			name, prev, dc.Path)
	} else if err == nil && string(prev) != ref && s.Image != "" {
		return nil, fmt.Errorf("the workspace %s was made from %s, not %s: cove up --fresh --image %s starts it anew from that image (what was installed in it goes); cove up without --image starts it as it was",
			name, prev, ref, ref)
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
		fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
	}
	// The command line's -p first: a host port it names is not the
	// project's to take too.
	var ports []container.Port
	for _, p := range s.Ports {
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
	if len(ports) > 0 && conf.Net != container.NetPrivate {
		// The workspace shares the host's network (or has none): its
		// ports need no forwarding, or cannot have pasta's (-p's go
		// through the launcher's tunnel, see Spec.Ports).
		ports = nil
	}
	sockDir := lo.socketDir(name)
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
	if dc != nil && dc.WorkspaceFolder == "" && dc.WorkspaceMount == "" {
		// The spec's own default place too, /workspaces/NAME: a command
		// that names it finds the project there.
		binds = append(binds, container.Bind{Source: abs, Target: "/workspaces/" + filepath.Base(abs)})
	}
	var mounts []container.Bind
	var tmpfs []container.Tmpfs
	if dc != nil {
		if mounts, tmpfs, err = workspaceMounts(append(slices.Clone(dc.Mounts), rt.Mounts...), dc.Trusted, abs, layerDir); err != nil {
			return nil, err
		}
	}
	binds = append(binds, mounts...)
	tmpfs = append(tmpfs, shaped.Tmpfs...)
	if madeFrom != ref {
		made = "" // made from another image: not this one's to stand in for
	}
	var wsEnv []string // the workspace's environment, for the lifecycle commands' ${containerEnv:…}
	var imageCfg *v1.ConfigFile
	var chown []string // rootless: new volumes for the user (see workspaceUser)
	var idMap string   // rootless: how the user namespace maps (see idMapRecord)
	l := Launch{
		Ref: ref, Policy: image.PullMissing, Name: name, Made: made,
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
		ShmSize:  shaped.ShmSize, Ulimits: shaped.Ulimits, ExtraHosts: shaped.ExtraHosts, Devices: shaped.Devices, Tmpfs: tmpfs,
		Prepare: func(cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *Launch) error {
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
				fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
			}
			dc = md
			proc.Env = workspaceEnv(dc, append(proc.Env, rt.Env...))
			wsEnv = proc.Env
			if err := lo.applyRuntime(dc, l, abs, layerDir, mountsBefore); err != nil {
				return err
			}
			imageCfg = cfg
			note := func(n string) { fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n)) }
			l.KeepID, err = workspaceUser(dc, rootfs, filepath.Join(layerDir, "upper"), sockDir, abs, proc, l.Binds, &chown, name, note)
			if err == nil && os.Geteuid() != 0 {
				idMap = idMapRecord(l.KeepID)
				checkIDMap(layerDir, idMap, name, note)
			}
			return err
		},
	}
	if _, err := lo.Run(ctx, l); err != nil {
		if pe := (*image.PullError)(nil); defaulted && errors.As(err, &pe) && pe.Ref == ref {
			err = fmt.Errorf("%w; %s", err, lo.defaultImageAdvice(ref))
		}
		return nil, fmt.Errorf("start the workspace of %s: %w", abs, err)
	}
	st, err = states.Load(name)
	if err != nil {
		return nil, err
	}
	os.WriteFile(filepath.Join(layerDir, "image-ref"), []byte(ref), 0o600)
	if err := s.Made.write(layerDir); err != nil {
		fmt.Fprintf(lo.Stderr, "cove: warning: %v (a plain cove up may not start it as it was started now)\n", err)
	}
	if idMap != "" {
		os.WriteFile(filepath.Join(layerDir, "id-map"), []byte(idMap), 0o600)
	}
	if built != "" {
		os.WriteFile(filepath.Join(layerDir, "image-built"), []byte(built), 0o600)
	}
	// The server is usually up within tens of milliseconds: ask often at
	// first (the wait is most of a warm start), then less.
	sock := lo.socket(name)
	for start := time.Now(); ; {
		if conn, err := ide.DialSocket(ctx, sock); err == nil {
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
	err = lo.chownVolumes(ctx, st, chown)
	if err == nil {
		err = lo.startEntrypoints(ctx, st, dc, imageCfg)
	}
	if err == nil {
		err = lo.lifecycle(ctx, st, dc, layerDir, wsEnv, true, s.Attach)
	}
	if err != nil {
		// Never a workspace left running by a failed start; its layer
		// stays, and the commands run again next time.
		st.Stop(10 * time.Second)
		return nil, fmt.Errorf("%w; the workspace %s is stopped (its layer is kept: cove up runs the create commands again, --fresh starts from the image)", err, name)
	}
	return st, nil
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
