package ide

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/cove-sh/cove/internal/projectfs"
)

// Serve runs the in-container server on the Unix socket path for the
// project in dir until ctx ends. Shell is the terminals' shell: bash if
// the image has it, else sh.
func Serve(ctx context.Context, socket, dir string) error {
	return ServeOn(ctx, "unix", socket, dir)
}

// ServeOn is Serve on any listening address: a Unix socket, or for a
// workspace reached by port-forward (a Kubernetes Pod), a TCP address on
// the workspace's own loopback.
func ServeOn(ctx context.Context, network, addr, dir string) error {
	d, err := projectfs.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	shell := []string{"/bin/sh", "-l"}
	if p, err := exec.LookPath("bash"); err == nil {
		shell = []string{p, "-l"}
	}
	if network == "unix" {
		os.Remove(addr)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	if network == "unix" {
		// The host side is the only client. As the workspace's root it
		// is the same user; as another user (a devcontainer.json's
		// remoteUser), a rootless launcher is not that user on the host,
		// and must still connect: the socket is everyone's, and the
		// launcher's 0700 runtime directory keeps the host's other users
		// from it.
		mode := os.FileMode(0o600)
		if os.Getuid() != 0 {
			mode = 0o666
		}
		os.Chmod(addr, mode)
	}
	// Only the API: the UI is the launcher's to serve, from its own binary.
	every := keepaliveEvery
	if network == "unix" {
		every = noKeepalive
	}
	srv := &http.Server{Handler: newHandler(d, shell, every), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
