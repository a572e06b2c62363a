package main

import (
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

// kubeBackend is the cluster the flags name, as kubectl reads the
// kubeconfig.
func kubeBackend(c *cli.Context) *workspace.Kube {
	bin, _ := coveBinary()
	return &workspace.Kube{
		Config: kube.Config{Kubeconfig: c.String("kubeconfig"), Context: c.String("context"), Namespace: c.String("namespace")},
		Binary: bin, Walk: hostWalkOptions(), Stderr: c.App.ErrWriter,
	}
}
