// Command cove is a daemonless container workspace launcher.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/nsremove"
)

func main() {
	// A container's init is this binary re-executed; it must not touch the
	// CLI (or anything else) first.
	if len(os.Args) > 1 && os.Args[1] == container.InitArg {
		container.Init(os.Args[2:])
	}
	if len(os.Args) > 1 && os.Args[1] == nsremove.HelperArg {
		nsremove.Helper(os.Args[2:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
