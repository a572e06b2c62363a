package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/cove-sh/cove/settings"
)

// Local runs workspaces, and the containers cove run starts, on this
// machine: images from the store flattened under Layout, started with
// package container, found again through their state files.
type Local struct {
	Layout dirs.Layout
	// Binary is cove's static binary, run as each container's init (and
	// bound in it for its IDE server) when Init and Inside give none.
	Binary string
	// Init and Inside, when set, give at each start the programs a
	// container runs: cove-init as its init, cove-inside at /.cove/cove
	// (a workspace's IDE server), each written out again if another
	// cove's cleanup removed it while this process ran (a launcher serves
	// for days; see internal/insideexe).
	Init, Inside func() (string, error)
	// Stdout and Stderr are where the user is: cove run's output; a
	// start's notes, progress and lifecycle commands' output.
	Stdout, Stderr io.Writer
	// Settings are the user's: the default workspace image, the registry
	// mirrors every pull asks first.
	Settings settings.Settings
}

var _ Backend = (*Local)(nil)

func (lo *Local) states() container.StateDir {
	return container.StateDir(filepath.Join(lo.Layout.Runtime, "containers"))
}

func (lo *Local) store() (*image.Store, error) {
	s, err := image.Open(lo.Layout.Images)
	if err == nil {
		s.SetMirrors(lo.Settings.RegistryMirrors)
	}
	return s, err
}

// binary is the program a container runs as its init: cove-init, else
// cove-inside, else cove (each answers init's command line).
func (lo *Local) binary() (string, error) {
	return lo.program(lo.Init, lo.Inside)
}

// tools is the program bound at a container's /.cove/cove: cove-inside,
// else cove.
func (lo *Local) tools() (string, error) {
	return lo.program(lo.Inside)
}

// program is the first of the programs that gives one, else Binary.
func (lo *Local) program(programs ...func() (string, error)) (string, error) {
	for _, p := range programs {
		if p == nil {
			continue
		}
		if bin, err := p(); err == nil {
			return bin, nil
		}
	}
	if lo.Binary == "" {
		return "", errors.New("cove's own binary is not known")
	}
	return lo.Binary, nil
}

// RemoveLayer deletes a container's or workspace's own files (its layer,
// log, volumes). They go to the trash first, so a removal that fails half
// way leaves nothing a later start would take for the layer; what is in
// the trash from an earlier failure goes too.
func (lo *Local) RemoveLayer(ctx context.Context, dir string) error {
	// Often called as a container ends on Ctrl-C: the removal still runs.
	ctx = context.WithoutCancel(ctx)
	trash := filepath.Join(lo.Layout.Data, "trash")
	tomb, err := userns.Retire(dir, trash)
	if err != nil {
		return err
	}
	if err := userns.Sweep(ctx, trash); err != nil {
		if tomb == "" {
			tomb = trash
		}
		return fmt.Errorf("%s is gone, but deleting its files in %s failed: %w (they are deleted the next time cove rm runs)", dir, tomb, err)
	}
	return nil
}

// Ensure returns s.Dir's workspace, running, starting it if it is not.
func (lo *Local) Ensure(ctx context.Context, s Spec) (Workspace, error) {
	st, err := lo.ensure(ctx, s)
	if err != nil {
		return nil, err
	}
	return &LocalWorkspace{lo: lo, State: st}, nil
}

// Open returns the named container if it runs.
func (lo *Local) Open(ctx context.Context, name string) (Workspace, error) {
	st, err := lo.states().Load(name)
	if err != nil {
		return nil, err
	}
	if err := st.Gone(); err != nil {
		if st.Pid == 0 { // its exit was recorded
			return nil, fmt.Errorf("container %s is not running (cove ps --all)", name)
		}
		return nil, fmt.Errorf("container %s is not running: its init %v (cove ps --all)", name, err)
	}
	return &LocalWorkspace{lo: lo, State: st}, nil
}

// Running says whether DIR's workspace runs now.
func (lo *Local) Running(dir string) bool {
	st, err := lo.states().Load(Name(dir))
	return err == nil && st.Status() == container.Running
}

// Attach runs the postAttachCommand of s.Dir's workspace, running, for
// a user who attaches to it as it runs (a second window).
func (lo *Local) Attach(ctx context.Context, s Spec) {
	if st, err := lo.states().Load(Name(s.Dir)); err == nil && st.Status() == container.Running {
		lo.attachRunning(ctx, st)
	}
}

// Key is the workspace's name: this machine has one workspace of a name.
func (lo *Local) Key(name string) string { return name }

// Copies is false: a local workspace binds the project itself.
func (lo *Local) Copies() bool { return false }

// List lists this machine's containers (workspaces and cove run's); all
// includes the ones that exited. A --rm container whose launcher died is
// removed on the way.
func (lo *Local) List(ctx context.Context, all bool) ([]Info, error) {
	list, err := lo.states().List()
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, st := range list {
		status := st.Status()
		if status != container.Running {
			if st.Remove {
				st.Stop(0)
				lo.states().Delete(st.Name)
				lo.RemoveLayer(ctx, st.Dir)
				continue
			}
			if !all {
				continue
			}
		}
		s := string(status)
		pid := st.Pid
		if status != container.Running {
			pid = 0
			if st.ExitCode != nil {
				s = fmt.Sprintf("exited (%d)", *st.ExitCode)
			}
		}
		out = append(out, Info{Name: st.Name, ID: st.ID, Pid: pid, Image: st.Image, Status: s, Where: "here", Created: st.Created, Dir: st.Workdir})
	}
	return out, nil
}

// Stop stops the named container: SIGTERM, then after grace the whole
// tree is killed. Its layer stays.
func (lo *Local) Stop(ctx context.Context, name string, grace time.Duration) error {
	st, err := lo.states().Load(name)
	if err != nil {
		return err
	}
	// Its Compose services first: what they serve goes before the
	// workspace that uses it.
	serr := lo.stopServices(st, grace)
	if err := st.Stop(grace); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return serr
}

// Remove deletes the named container, its layer and the images its
// devcontainer.json made.
func (lo *Local) Remove(ctx context.Context, name string, force bool) error {
	st, err := lo.states().Load(name)
	if err != nil {
		return err
	}
	if st.Status() == container.Running {
		if !force {
			return fmt.Errorf("container %s is running: cove stop %s first, or cove rm -f", name, name)
		}
		if err := lo.stopServices(st, 10*time.Second); err != nil {
			return err
		}
		if err := st.Stop(10 * time.Second); err != nil {
			return err
		}
	}
	// Its Compose services' containers go first; their layers are under
	// its own.
	if err := lo.removeServices(st); err != nil {
		return err
	}
	if err := st.Stop(0); err != nil { // also removes what is left of its cgroup
		return err
	}
	// The layer goes to the trash before the name is forgotten: whatever
	// happens next, no later start reuses a layer that is half deleted.
	trash := filepath.Join(lo.Layout.Data, "trash")
	tomb, err := userns.Retire(st.Dir, trash)
	if err != nil {
		return fmt.Errorf("rm %s: %w", name, err)
	}
	// Its use of its image ends before its own images are forgotten, so
	// that their root filesystems go with their names.
	if store, err := lo.store(); err == nil {
		store.Release(lo.states().Dir(name))
	}
	if err := lo.states().Delete(name); err != nil {
		return fmt.Errorf("rm %s: %w", name, err)
	}
	lo.forgetImages(ctx, name)
	if err := userns.Sweep(ctx, trash); err != nil {
		return fmt.Errorf("rm %s: removed, but deleting its files in %s failed: %w (cove rm deletes them the next time it runs)", name, tomb, err)
	}
	return nil
}

// LocalWorkspace is a workspace (or cove run's container) on this
// machine.
type LocalWorkspace struct {
	lo *Local
	// State is its state file's record.
	State *container.State
}

// Name is the container's name.
func (w *LocalWorkspace) Name() string { return w.State.Name }

// ID tells this run of the workspace from the next.
func (w *LocalWorkspace) ID() string { return w.State.ID }

// Where is "here": this machine.
func (w *LocalWorkspace) Where() string { return "here" }

// Exec runs req in the workspace.
func (w *LocalWorkspace) Exec(ctx context.Context, req container.ExecRequest, stdio [3]*os.File) (int, error) {
	return w.lo.Exec(w.State.Name, req, stdio)
}

// DialIDE connects to the IDE server's socket.
func (w *LocalWorkspace) DialIDE(ctx context.Context) (net.Conn, error) {
	return ide.DialSocket(ctx, w.lo.socket(w.State.Name))
}

// Sync has nothing to do: the project is bound, not copied.
func (w *LocalWorkspace) Sync(context.Context) error { return nil }

// Running says whether it still runs (a recycled pid is not it).
func (w *LocalWorkspace) Running() bool { return w.State.Status() == container.Running }

// Stopped is the kernel's word that its init exited (a pidfd): an idle
// launcher waiting on it makes no system call.
func (w *LocalWorkspace) Stopped(ctx context.Context) <-chan struct{} {
	exited, err := w.State.Exited(ctx)
	if err != nil { // it does not run now
		gone := make(chan struct{})
		close(gone)
		return gone
	}
	return exited
}

// ExecFlags are none: cove exec NAME finds it here.
func (w *LocalWorkspace) ExecFlags() []string { return nil }

// Published are the ports pasta publishes for it (its private network).
func (w *LocalWorkspace) Published() []container.Port { return w.State.Ports }

// Close has nothing to let go of.
func (w *LocalWorkspace) Close() error { return nil }

// Exec runs req in the container name, relaying its terminal if it has
// one, and returns its exit status. A command that could not start gives
// a shell's status (127 not found, 126 not runnable) with the error.
func (lo *Local) Exec(name string, req container.ExecRequest, stdio [3]*os.File) (int, error) {
	rs := &runStdio{copying: make(chan struct{}), tty: req.Terminal, restore: func() {}}
	var console *os.File
	// SIGTERM or SIGHUP ends a terminal session as closing a terminal
	// window does: its master closes, and the shell in it gets SIGHUP.
	hangup := make(chan os.Signal, 1)
	signal.Notify(hangup, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(hangup)
	code, err := container.Exec(filepath.Join(lo.states().Dir(name), "ctl.sock"), req, stdio, func(con *os.File) {
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
		return ee.Code, fmt.Errorf("exec in %s: %w", name, err)
	}
	return code, err
}
