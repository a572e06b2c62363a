// Command cove is a daemonless container workspace launcher.
package main

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/inside"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func main() {
	// What runs inside a container (its init, the IDE server, …) is
	// cove-inside's (package inside), which this binary answers too when
	// it was built without it: before the CLI (or anything else).
	inside.Main(os.Args)
	if len(os.Args) > 1 && os.Args[1] == userns.HelperArg {
		userns.Main(os.Args[2:], helperTasks())
	}
	// The caller's descriptors beyond stdio (a shell's 5>&1, a process
	// substitution's 63) are not ours to hand on: whatever cove starts and
	// leaves running (a detached server, pasta, the network helper, a
	// container) would hold them open, and the caller's reader would never
	// see its end. What cove passes on, it passes on by name (ExtraFiles).
	closeInherited()
	// compose-go warns through logrus's global logger (an obsolete
	// version key, …), with what a project's Compose file says: shown as
	// cove's notes, control characters made visible.
	logrus.SetFormatter(noteFormatter{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// noteFormatter writes a logrus entry as one of cove's notes.
type noteFormatter struct{}

func (noteFormatter) Format(e *logrus.Entry) ([]byte, error) {
	return []byte("cove: note: " + termtext.Visible(e.Message) + "\n"), nil
}

// closeInherited marks every descriptor from 3 up close-on-exec: this
// process keeps them, nothing it starts gets them.
func closeInherited() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one by one.
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// helperTasks are the jobs the user namespace helper does for a rootless
// user with subordinate ids (internal/userns).
func helperTasks() map[string]userns.Task {
	return map[string]userns.Task{
		image.ExtractTask: image.Extract,
		build.LayerTask:   build.Layer,
		build.StageTask:   build.Stage,
		image.KeepIDTask:  image.CopyKeepID,
	}
}
