package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace/filesync"
	"github.com/cove-sh/cove/workspace/kube"
	"github.com/urfave/cli/v2"
)

// kubeFlags choose a Kubernetes cluster for the workspace instead of this
// machine.
func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "kube", Usage: "run the workspace as a Pod on a Kubernetes cluster (your files stay here, synchronised)"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "with --kube: the kubeconfig `FILE` (default: as kubectl)"},
		&cli.StringFlag{Name: "context", Usage: "with --kube: the kubeconfig's `CONTEXT`"},
		&cli.StringFlag{Name: "namespace", Usage: "with --kube: the `NAMESPACE`"},
	}
}

func kubeCluster(c *cli.Context) (*kube.Cluster, error) {
	return kube.Connect(kube.Config{Kubeconfig: c.String("kubeconfig"), Context: c.String("context"), Namespace: c.String("namespace")})
}

// kubeUp is cove up --kube: the workspace runs as a Pod, the launcher,
// the window and the files stay here.
func kubeUp(c *cli.Context, dir string) error {
	k, err := kubeCluster(c)
	if err != nil {
		return err
	}
	limits, _, err := limitsFrom(c)
	if err != nil {
		return err
	}
	img := c.String("image")
	if img == "" {
		img = DefaultImage
	}
	bin, err := coveBinary()
	if err != nil {
		return err
	}
	name := workspaceName(dir)
	errw := c.App.ErrWriter
	fmt.Fprintf(errw, "cove: starting %s as a Pod in %s on %s\n", name, k.Namespace, k.Server())
	ctx, cancel := context.WithTimeout(c.Context, 5*time.Minute)
	se, err := k.Start(ctx, kube.Spec{Name: name, Image: img, Limits: limits}, kube.SessionOptions{
		Dir: dir, Binary: bin, Walk: hostWalkOptions(),
		Report: func(r filesync.Report, err error) { syncNotes(errw, r, err) },
	})
	cancel()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.Int("port")))
	if err != nil {
		se.Close()
		return fmt.Errorf("listen on 127.0.0.1:%d: %w (choose another --port)", c.Int("port"), err)
	}
	proxy := ide.NewProxyDial(se.DialIDE, l.Addr().(*net.TCPAddr).Port)
	proxy.Dir = dir
	routes := ide.ProjectRoutes{Dir: dir, Walk: hostWalkOptions()}
	proxy.Handle("/api/search", routes.Search())
	proxy.Handle("/api/ignored", routes.Ignored())
	proxy.Handle("/api/files", routes.Files())
	proxy.Handle("/api/replace", routes.Replace())
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(l)
	if err := showURL(c, proxy.URL()); err != nil {
		se.Close()
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for running := true; running; {
		select {
		case <-c.Context.Done():
			running = false
		case <-tick.C:
			if grace := c.Duration("grace"); grace > 0 && !c.Bool("detach") && proxy.Unattended() > grace {
				fmt.Fprintln(errw, "cove: the last window closed")
				running = false
			}
		}
	}
	farewell(proxy, ide.Farewell{Reason: "cove up was stopped", Close: true})
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	srv.Shutdown(sctx)
	scancel()
	// The last round first: what was saved in the Pod is here before it
	// goes.
	fmt.Fprintln(errw, "cove: synchronising the files, then stopping the Pod")
	if err := se.Close(); err != nil {
		fmt.Fprintf(errw, "cove: %v\n", err)
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), time.Minute)
	defer stopCancel()
	return k.Stop(stopCtx, name)
}

// syncNotes says what a sync round did that the user should know: a file
// changed on both sides (both kept), files too large to carry, a failure.
func syncNotes(w io.Writer, r filesync.Report, err error) {
	for _, cf := range r.Conflicts {
		if cf.Kept != "" {
			fmt.Fprintf(w, "cove: %s changed here and in the workspace: yours stays, the workspace's is %s\n", termtext.Visible(cf.Path), termtext.Visible(cf.Kept))
		} else {
			fmt.Fprintf(w, "cove: %s was deleted on one side and changed on the other: the change is kept\n", termtext.Visible(cf.Path))
		}
	}
	for _, p := range r.TooLarge {
		fmt.Fprintf(w, "cove: %s is over %d MiB and is not synchronised\n", termtext.Visible(p), filesync.MaxFileSize>>20)
	}
	if err != nil {
		fmt.Fprintf(w, "cove: sync: %s (tried again)\n", termtext.Visible(err.Error()))
	}
}
