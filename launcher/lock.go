package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"os"

	"github.com/cove-sh/cove/workspace"
)

// Claim is one cove's claim to be the launcher of a workspace: one
// launcher a workspace, so a second cove up while the first starts it
// waits for the first and opens a window on it.
type Claim struct {
	// Dir holds the launcher's lock and record (this machine's runtime
	// dir, never the workspace's to see).
	Dir string
	// Backend and Name say which workspace.
	Backend workspace.Backend
	Name    string
	// Fresh: a launcher that serves the workspace is not joined; its
	// workspace is stopped (and so it leaves) and this one takes over.
	Fresh bool
	// Stderr hears that it waits.
	Stderr io.Writer
	// Poll is how often it looks again (default 50 ms); Patience how long
	// it waits for a cove that neither serves nor lets go (default two
	// minutes).
	Poll, Patience time.Duration
}

// LockPath and RecordPath are where the lock and the record are.
func (c Claim) LockPath() string   { return filepath.Join(c.Dir, "launcher.lock") }
func (c Claim) RecordPath() string { return filepath.Join(c.Dir, "launcher.json") }

// LockOrWait takes the workspace's launcher lock; while another cove
// holds it (starting the workspace, or a launcher on its way out), it
// waits: for that cove to serve (then it returns no lock and its URL), or
// to let go (then the lock is ours).
func (c Claim) LockOrWait(ctx context.Context) (*os.File, string, error) {
	poll, patience := c.Poll, c.Patience
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	if patience <= 0 {
		patience = 2 * time.Minute
	}
	said := false
	for deadline := time.Now().Add(patience); time.Now().Before(deadline); {
		lock, err := workspace.LockFile(c.LockPath(), 0)
		if !errors.Is(err, workspace.ErrLocked) {
			return lock, "", err
		}
		if url, err := c.served(ctx); url != "" || err != nil {
			return nil, url, err
		}
		if !said {
			fmt.Fprintf(c.Stderr, "cove: another cove is starting the workspace %s; waiting for it\n", c.Name)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(poll):
		}
	}
	return nil, "", fmt.Errorf("another cove has held the workspace %s for %s without serving it; if none runs (cove ps), try again", c.Name, minutes(patience))
}

// served is the URL of the launcher that serves the workspace now, if
// one does (with Fresh, it stops that workspace instead, and that
// launcher leaves).
func (c Claim) served(ctx context.Context) (string, error) {
	rec, ok := Read(c.RecordPath())
	if !ok {
		return "", nil
	}
	ws, err := c.Backend.Open(ctx, c.Name)
	if err != nil || !rec.Serves(ws) {
		return "", nil
	}
	if !c.Fresh {
		return rec.URL, nil
	}
	if err := c.Backend.Stop(ctx, c.Name, 10*time.Second); err != nil {
		return "", fmt.Errorf("--fresh: stop the workspace %s: %w", c.Name, err)
	}
	return "", nil
}

// minutes says d in words when it is whole minutes ("2 minutes").
func minutes(d time.Duration) string {
	if d%time.Minute != 0 {
		return d.String()
	}
	if d == time.Minute {
		return "a minute"
	}
	return fmt.Sprintf("%d minutes", d/time.Minute)
}
