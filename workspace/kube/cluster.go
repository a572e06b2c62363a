// Package kube runs a cove workspace as a Pod on a Kubernetes cluster: the
// launcher, the app window, the agent and the keys stay on the user's
// machine; the workspace's processes run in the Pod, reached through the
// API server (exec for commands, port-forward for the IDE's server).
//
// The cluster and the credentials come from the kubeconfig as kubectl
// reads it (internal/kubeclient). The Pod is locked down: no
// service-account token, no host namespaces, not privileged, seccomp
// RuntimeDefault, and the capabilities of cove's local runtime.
package kube

import (
	"fmt"

	"github.com/cove-sh/cove/internal/kubeclient"
)

// Config says which cluster to use; its zero value is kubectl's choice.
type Config = kubeclient.Options

// Cluster is a connection to one namespace of a cluster.
type Cluster struct {
	Namespace string
	api       *kubeclient.Client
}

// Connect reads the kubeconfig as kubectl does and returns a client for
// the namespace cfg names. It does not talk to the cluster yet.
func Connect(cfg Config) (*Cluster, error) {
	c, err := kubeclient.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (cove reads it as kubectl does: --kubeconfig, $KUBECONFIG or ~/.kube/config)", err)
	}
	return &Cluster{Namespace: c.Namespace, api: c}, nil
}

// Server is the API server's address, for messages.
func (k *Cluster) Server() string { return k.api.Server }
