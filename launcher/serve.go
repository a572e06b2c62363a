package launcher

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/workspace"
)

// Windows is what a launcher watches of the windows on it: how long none
// has been open (an *ide.Proxy's).
type Windows interface {
	Unattended() time.Duration
}

// WaitOptions say when a launcher stops serving on its own.
type WaitOptions struct {
	// Grace: once no window has been open this long (a reload does not
	// count), it ends; 0, or Detached: never.
	Grace    time.Duration
	Detached bool
	// Every is how often it looks at its windows (default a second).
	Every time.Duration
	// Stderr hears why it ends, when it ends on its own.
	Stderr io.Writer
}

// Wait serves until ctx ends (Ctrl-C, SIGTERM), the last window is gone
// for o.Grace, or the workspace stopped under it (cove stop: stopped is
// closed), and says whether it was the last. A detached launcher has no
// timer: idle, it sleeps until one of them happens.
func Wait(ctx context.Context, windows Windows, stopped <-chan struct{}, o WaitOptions) bool {
	var look <-chan time.Time
	if o.Grace > 0 && !o.Detached {
		every := o.Every
		if every <= 0 {
			every = time.Second
		}
		tick := time.NewTicker(every)
		defer tick.Stop()
		look = tick.C
	}
	for {
		select {
		case <-ctx.Done():
			return false
		case <-stopped:
			return true
		case <-look:
			if windows.Unattended() > o.Grace {
				if o.Stderr != nil {
					fmt.Fprintln(o.Stderr, "cove: the last window closed")
				}
				return false
			}
		}
	}
}

// Serving is a launcher serving one workspace: the proxy the windows
// reach it through, its HTTP server, and the workspace.
type Serving struct {
	Proxy     *ide.Proxy
	Server    *http.Server
	Workspace workspace.Workspace
	// Stderr hears what the launcher does as it ends.
	Stderr io.Writer
}

// Stopped ends a launcher whose workspace stopped under it: the windows
// say so and keep what is unsaved in them.
func (s *Serving) Stopped() {
	farewell(s.Proxy, ide.Farewell{Reason: "the workspace was stopped"})
	s.Server.Close()
	s.Workspace.Close()
}

// End ends a launcher stopped by its user (Ctrl-C, the last window
// gone): app windows close themselves (those with unsaved changes stay,
// saying why), the workspace is let go (on a cluster the last round of
// the sync first, so that what was saved there is here), and, unless the
// launcher was detached, b stops the workspace (its files and layer
// stay), waiting up to stopGrace for it to end on its own.
func (s *Serving) End(b workspace.Backend, detached bool, stopGrace time.Duration) error {
	bye := ide.Farewell{Reason: "cove up was stopped", Close: true}
	if detached {
		bye = ide.Farewell{Reason: "its launcher was stopped", Close: true, Running: true}
	}
	farewell(s.Proxy, bye)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.Server.Shutdown(sctx)
	if b.Copies() {
		fmt.Fprintln(s.Stderr, "cove: synchronising the files")
	}
	if err := s.Workspace.Close(); err != nil {
		fmt.Fprintf(s.Stderr, "cove: %v\n", err)
	}
	if detached {
		return nil
	}
	if name := s.Workspace.Name(); b.KeepsRunning(name) {
		fmt.Fprintf(s.Stderr, "cove: the workspace %s keeps running (its devcontainer.json's shutdownAction is none): cove stop %s stops it and its services\n", name, name)
		return nil
	}
	fmt.Fprintln(s.Stderr, "cove: stopping the workspace")
	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	return b.Stop(stopCtx, s.Workspace.Name(), stopGrace)
}

// farewell tells the launcher's windows that it ends, waiting a little
// for them to hear it.
func farewell(proxy *ide.Proxy, bye ide.Farewell) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	proxy.Stopping(ctx, bye)
}

// Publish writes rec at path as the record of this process's launcher
// (pid), and returns what removes it when the launcher ends: only if it
// is still ours, since a newer launcher may have taken the workspace over.
func (rec Record) Publish(path string, pid int) (func(), error) {
	rec.Launcher.Created = time.Now().UTC()
	if err := rec.Launcher.Track(pid); err != nil {
		return nil, fmt.Errorf("the launcher's record %s: %w", path, err)
	}
	if err := rec.Write(path); err != nil {
		return nil, fmt.Errorf("the launcher's record %s: %w", path, err)
	}
	return func() {
		if cur, ok := Read(path); !ok || cur.Launcher.Pid == pid {
			os.Remove(path)
		}
	}, nil
}
