package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cove-sh/cove/internal/termtext"
)

// Background is a launcher to run in the background (cove up --detach):
// Binary with Args (cove up --serve …), in a session of its own, its
// output in launcher.log beside RecordPath. It is a small per-workspace
// server, no system daemon.
type Background struct {
	Binary string
	Args   []string
	// Env is its environment (nil: this process's).
	Env        []string
	RecordPath string
	// Poll is how often Start looks for its record (default 50 ms).
	Poll time.Duration
}

// LogPath is where the background launcher's output goes.
func (bg Background) LogPath() string {
	return filepath.Join(filepath.Dir(bg.RecordPath), "launcher.log")
}

// Start starts the background launcher and waits until a launcher
// serves the workspace: it (its record names it), or one that was there
// first (it found that one's record, and left). If it ends without
// either, the error has the end of its log.
func (bg Background) Start(ctx context.Context) (Record, error) {
	poll := bg.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	if err := os.MkdirAll(filepath.Dir(bg.RecordPath), 0o700); err != nil {
		return Record{}, err
	}
	logPath := bg.LogPath()
	// O_APPEND: a launcher on its way out may still write its last line.
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return Record{}, err
	}
	defer log.Close()
	cmd := exec.Command(bg.Binary, bg.Args...)
	cmd.Env = bg.Env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Record{}, fmt.Errorf("start the background server %s: %w", bg.Binary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if rec, ok := Read(bg.RecordPath); ok && rec.Launcher.Pid == cmd.Process.Pid {
			return rec, nil
		}
		select {
		case <-exited:
			if rec, ok := Read(bg.RecordPath); ok {
				return rec, nil
			}
			return Record{}, fmt.Errorf("the background server stopped (its log: %s): %s", logPath, termtext.Visible(LogTail(logPath, 8<<10)))
		case <-ctx.Done():
			// It goes on: it may be about to serve, and is the user's to
			// stop (cove stop), as a detached one is.
			return Record{}, fmt.Errorf("waiting for the background server (its log: %s): %w", logPath, ctx.Err())
		case <-time.After(poll):
		}
	}
}
