// Command cove is a daemonless container workspace launcher.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cove-sh/cove/build"
	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/userns"
)

func main() {
	// A container's init is this binary re-executed; it must not touch the
	// CLI (or anything else) first.
	if len(os.Args) > 1 && os.Args[1] == container.InitArg {
		container.Init(os.Args[2:])
	}
	if len(os.Args) > 1 && os.Args[1] == userns.HelperArg {
		userns.Main(os.Args[2:], helperTasks())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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
