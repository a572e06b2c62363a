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

// placeholder is the page at / until the web UI lands: it says where the
// API is, so that the URL cove prints is not a blank page.
const placeholder = `<!doctype html><html><head><meta charset="utf-8"><title>Cove</title>
<meta name="color-scheme" content="dark light"></head><body style="font:15px system-ui;margin:3em">
<h1>Cove workspace</h1><p>The workspace runs. Its editor and terminal UI is on its way; the API is up:
<code>/api/tree</code>, <code>/api/file?path=</code>, <code>/api/term/new</code> (WebSocket).</p></body></html>`

// Serve runs the in-container server on the Unix socket path for the
// project in dir until ctx ends. Shell is the terminals' shell: bash if
// the image has it, else sh.
func Serve(ctx context.Context, socket, dir string) error {
	d, err := projectfs.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	shell := []string{"/bin/sh", "-l"}
	if p, err := exec.LookPath("bash"); err == nil {
		shell = []string{p, "-l"}
	}
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	os.Chmod(socket, 0o600) // the host side (the same user) is the only client
	mux := http.NewServeMux()
	mux.Handle("/api/", NewHandler(d, shell))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(placeholder))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
