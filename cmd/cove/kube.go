package main

import (
	"cmp"

	"github.com/cove-sh/cove/workspace"
	"github.com/cove-sh/cove/workspace/kube"
	"github.com/urfave/cli/v2"
)

// kubeFlags choose a Kubernetes cluster for the workspace instead of this
// machine.
func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "kube", Usage: "a workspace that runs as a Pod on a Kubernetes cluster (its files stay here, synchronised)"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "with --kube: the kubeconfig `FILE` (default: as kubectl)"},
		&cli.StringFlag{Name: "context", Usage: "with --kube: the kubeconfig's `CONTEXT`"},
		&cli.StringFlag{Name: "namespace", Usage: "with --kube: the `NAMESPACE`"},
	}
}

// kubeBackend is the cluster the flags name (over what the project's
// trusted devcontainer.json chose, if anything), as kubectl reads the
// kubeconfig.
func kubeBackend(c *cli.Context, e *env, chosen *kube.Config) *workspace.Kube {
	bin, _ := e.insideBinary()
	cfg := kube.Config{Kubeconfig: c.String("kubeconfig"), Context: c.String("context"), Namespace: c.String("namespace")}
	if chosen != nil {
		cfg.Context = cmp.Or(cfg.Context, chosen.Context)
		cfg.Namespace = cmp.Or(cfg.Namespace, chosen.Namespace)
	}
	return &workspace.Kube{Config: cfg, Binary: bin, Walk: hostWalkOptions(), Stderr: c.App.ErrWriter, DefaultImage: e.settings.Image}
}

// dirBackend is where DIR's workspace runs: on a cluster with --kube or
// when the project's trusted devcontainer.json chooses one, else here.
func dirBackend(c *cli.Context, e *env, dir string) workspace.Backend {
	if c.Bool("kube") {
		return kubeBackend(c, e, nil)
	}
	if chosen := workspace.KubeChoice(c.App.ErrWriter, workspace.Spec{Dir: dir, Config: c.String("config"), Trust: c.Bool("trust")}); chosen != nil {
		return kubeBackend(c, e, chosen)
	}
	return e.local(c)
}
