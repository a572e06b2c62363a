// Package workspace is a project's workspace: started from the project's
// image and devcontainer.json, its commands run, its IDE server reached,
// its files kept in step, stopped and removed — on a backend: this machine
// (Local, with package container) or a Kubernetes cluster (Kube, with
// package workspace/kube). cmd/cove only wires flags to it.
package workspace

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
)

// A Backend runs workspaces somewhere. Another place (an SSH host) is
// another Backend.
type Backend interface {
	// Ensure returns s.Dir's workspace, running, starting it if it is not.
	Ensure(ctx context.Context, s Spec) (Workspace, error)
	// Open returns the named workspace if it runs.
	Open(ctx context.Context, name string) (Workspace, error)
	// List says which workspaces there are and where they run; all
	// includes the ones that stopped.
	List(ctx context.Context, all bool) ([]Info, error)
	// Stop stops the named workspace, waiting up to grace for it to end
	// on its own; what it keeps stays.
	Stop(ctx context.Context, name string, grace time.Duration) error
	// Remove deletes the named workspace and what it kept; a running one
	// only with force.
	Remove(ctx context.Context, name string, force bool) error
	// Running says whether s.Dir's workspace runs with nothing left to
	// start for this command (a cluster's never does: its files' sync
	// runs in the launcher).
	Running(dir string) bool
	// Attach runs the postAttachCommand of s.Dir's running workspace for a
	// user who attaches to it as it runs (a second window).
	Attach(ctx context.Context, s Spec)
	// MadeWith is how DIR's workspace was made (the flags that define
	// it), nil when nothing is remembered.
	MadeWith(dir string) (Made, error)
	// Key names the named workspace among every backend's on this
	// machine, for the launcher's records (a Pod of the same project on
	// another cluster is another workspace).
	Key(name string) string
	// Copies says whether its workspaces work on a copy of the project
	// kept in step (a cluster's), which a launcher's last sync brings home.
	Copies() bool
	// KeepsRunning says whether the named workspace stays up when its
	// last window closes (devcontainer.json's shutdownAction none).
	KeepsRunning(name string) bool
}

// A Workspace is one project's workspace, running.
type Workspace interface {
	// Name is its name: Name(the project's directory).
	Name() string
	// ID tells this run of it from the next (a launcher serves one).
	ID() string
	// Where says where it runs, for cove ps and the messages.
	Where() string
	// Exec runs req in it and returns its exit status. stdio are the
	// command's streams (nil: none); with req.Terminal it gets a
	// terminal of its own, relayed to this process's.
	Exec(ctx context.Context, req container.ExecRequest, stdio [3]*os.File) (int, error)
	// DialIDE connects to its IDE server.
	DialIDE(ctx context.Context) (net.Conn, error)
	// Sync carries what was saved on either side to the other now (before
	// a command runs: the agent's edit is there). Local: nothing to do.
	Sync(ctx context.Context) error
	// Running says whether it still runs.
	Running() bool
	// Stopped is closed once it stops under its launcher (cove stop, its
	// init killed), or when it does not run now; never after ctx ends.
	Stopped(ctx context.Context) <-chan struct{}
	// ExecFlags are cove exec's flags that reach it from another process
	// (the agent's commands run as cove exec NAME …).
	ExecFlags() []string
	// Published are the ports its backend publishes on this machine by
	// itself (-p, forwardPorts): the others of Spec.Ports the launcher
	// forwards through the IDE server.
	Published() []container.Port
	// Close lets go of it: it runs on (a last sync round first).
	Close() error
}

// Spec says which workspace to ensure and how to start it: the flags of
// cove up, cove shell and cove agent.
type Spec struct {
	Dir    string // the project, absolute
	Image  string // "": devcontainer.json's, else DefaultImage
	Fresh  bool   // start from the image again, dropping what was installed
	Config string // devcontainer.json's path, when the project has several
	Trust  bool   // trust the project's devcontainer.json as it is now
	// Limits and Confinement are the command line's; zero is not given
	// (devcontainer.json's runArgs may say).
	Limits      container.Limits
	Confinement Confinement
	// Attach says a user attaches (cove up, cove shell): the spec's
	// postAttachCommand runs.
	Attach bool
	// Made are the flags that define the workspace as this command has
	// them (given, else remembered: MadeWith), kept with it when it
	// starts.
	Made Made
	// Ports are cove up's -p: published from this machine as cove run's
	// are (a backend that cannot leaves them to the launcher's tunnel).
	Ports []container.Port
	// Origin is the project a task's workspace was made from (package
	// task): its git object store is shared with the workspace read-only
	// at OriginObjects, where the task's repository finds the project's
	// history (alternates) instead of a copy of it. A backend that cannot
	// share it (a cluster's) leaves it out: the task copies the history.
	// Kept with the workspace: a later start shares it again.
	Origin string
	// Prepare, when set, runs on a start that makes the workspace run
	// (not when it runs already), once its container and IDE server are
	// up and before its lifecycle commands: a task's checkout, which
	// onCreateCommand and postCreateCommand then find, as they find the
	// project's files in its own workspace. Its error stops the start as
	// a lifecycle command's does. A backend that cannot (a cluster's)
	// leaves it to the caller.
	Prepare func(ctx context.Context, ws Workspace) error `json:"-"`
}

// OriginObjects is where a task's workspace sees its project's git
// objects (Spec.Origin), read-only.
const OriginObjects = "/.cove/origin/objects"

// Info is one workspace as cove ps shows it.
type Info struct {
	Name, ID string
	Pid      int
	Image    string
	Status   string // running, exited (N), a Pod's phase
	Where    string
	Created  time.Time
	Dir      string
}

// Confinement is how a container is kept in beyond its limits.
type Confinement struct {
	Net       string // container.NetPrivate (also ""), NetHost or NetNone
	NoSeccomp bool
}

// NameArg is the workspace an argument of cove exec, stop or rm names:
// a directory's when it looks like a path (it has a / or is . or ..; a
// container name never does), else the name itself. A bare word that
// names no workspace or container (known says which do) but is a
// directory here is that directory's workspace: the name is tried first,
// so that a name never changes meaning because of the current directory.
func NameArg(arg string, known func(name string) bool) (string, error) {
	if !strings.ContainsRune(arg, '/') && arg != "." && arg != ".." {
		if known(arg) {
			return arg, nil
		}
		if fi, err := os.Stat(arg); err != nil || !fi.IsDir() {
			return arg, nil // the name's own error follows
		}
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s: no such directory (a workspace is named by its directory, with a /, or by its name: cove ps --all)", arg)
	}
	return Name(abs), nil
}
