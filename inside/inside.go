// Package inside is what cove runs inside a workspace or a container: a
// container's init and its helpers, the workspace's IDE server, the file
// sync's far side for a workspace in a Pod, and the relay to a project's
// HTTP MCP server.
//
// These run on every start, and live as long as the container, so they
// are kept apart from the rest of cove: cmd/cove-inside is a program of
// this package alone, a quarter of cove's size, whose start costs a third
// of cove's (none of the package initialisers of the Kubernetes client,
// the builder, the MCP SDK or the markdown renderer run in it). A
// container's init is smaller still, cmd/cove-init (package container
// alone); cove-inside answers its command line too. The build puts both
// programs inside cove (see internal/insideexe); cove answers the same
// command lines itself when it was built without them.
package inside

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/relay"
	"github.com/cove-sh/cove/internal/shed"
	"github.com/cove-sh/cove/workspace/filesync"
)

// The command lines, as the host side writes them (args[0] is the
// program's name and not looked at):
//
//	cove init …                            container.Init
//	cove ide serve --socket PATH|--tcp ADDR [--dir DIR]
//	cove sync-serve DIR
//	cove mcp-relay HOST:PORT
//	cove idle
//	cove version                           (cove-inside only: cove has its own)
var commands = map[string]func(ctx context.Context, args []string) error{
	"ide":        ideServe,
	"sync-serve": syncServe,
	"mcp-relay":  mcpRelay,
	"idle":       idle,
}

// Main runs args when they are one of the command lines above, and then
// exits; else it returns at once and does nothing.
func Main(args []string) {
	if len(args) < 2 {
		return
	}
	if args[1] == container.InitArg {
		container.Init(args[2:]) // never returns
	}
	run, ok := commands[args[1]]
	if !ok {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	err := run(ctx, args[2:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "cove %s: %v\n", args[1], err)
		os.Exit(1)
	}
	os.Exit(0)
}

// ideServe runs the workspace's IDE server (its workload).
func ideServe(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "serve" {
		return errors.New("say: ide serve --socket PATH|--tcp ADDR [--dir DIR]")
	}
	fs := flag.NewFlagSet("ide serve", flag.ContinueOnError)
	socket := fs.String("socket", "", "listen on `PATH`")
	tcp := fs.String("tcp", "", "listen on `ADDR` instead (a Pod's loopback, for port-forward)")
	dir := fs.String("dir", "/workspace", "the project `DIR`")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// It lives as long as the workspace, in its memory cgroup: what its
	// start touched goes back.
	time.AfterFunc(2*time.Second, shed.Open().Shed)
	if *tcp != "" {
		return ide.ServeOn(ctx, "tcp", *tcp, *dir)
	}
	if *socket == "" {
		return errors.New("give --socket or --tcp")
	}
	return ide.Serve(ctx, *socket, *dir)
}

// syncServe answers the file sync on standard input and output for the
// project copy at DIR (a workspace in a Pod).
func syncServe(_ context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("say DIR")
	}
	d, err := filesync.OpenDir(args[0], nil)
	if err != nil {
		return err
	}
	defer d.Close()
	return filesync.Serve(stdio{os.Stdin, os.Stdout}, d)
}

// stdio is standard input and output as one stream.
type stdio struct {
	io.Reader
	io.WriteCloser
}

// mcpRelay connects standard input and output to HOST:PORT as the
// workspace's network sees it.
func mcpRelay(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("say HOST:PORT")
	}
	return relay.Run(ctx, args[0], os.Stdin, os.Stdout)
}

// Version is what cove-inside says to "version": cove answers it itself.
func Version() {
	fmt.Printf("cove-inside (cove's program for inside workspaces)\n%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	os.Exit(0)
}

// idle waits for the stop signal.
func idle(ctx context.Context, _ []string) error {
	<-ctx.Done()
	return nil
}
