// Package kube runs a cove workspace as a Pod on a Kubernetes cluster: the
// launcher, the app window, the agent and the keys stay on the user's
// machine; the workspace's processes run in the Pod, reached through the
// API server (exec for commands, port-forward for the IDE's server).
//
// The cluster and the credentials come from the kubeconfig as kubectl
// reads it. The Pod is locked down: no service-account token, no host
// namespaces, not privileged, seccomp RuntimeDefault, and the capabilities
// of cove's local runtime.
package kube

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Config says which cluster to use; its zero value is kubectl's choice.
type Config struct {
	Kubeconfig string // "": $KUBECONFIG, or ~/.kube/config
	Context    string // "": the kubeconfig's current context
	Namespace  string // "": the context's namespace, or "default"
}

// Cluster is a connection to one namespace of a cluster.
type Cluster struct {
	Namespace string
	rest      *rest.Config
	rc        *rest.RESTClient // core/v1 (api.go)
	params    runtime.ParameterCodec
}

// Connect reads the kubeconfig as kubectl does and returns a client for
// the namespace cfg names. It does not talk to the cluster yet.
func Connect(cfg Config) (*Cluster, error) {
	// client-go logs through klog, to standard error by default: a
	// broken exec or port-forward stream would print its "Unhandled
	// Error" lines over the user's terminal. cove says what happened
	// itself (a Session's Link), so they go. klog's logger is the
	// process's; setting it again is harmless.
	klog.SetLogger(logr.Discard())
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	overrides.Context.Namespace = cfg.Namespace
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w (cove reads it as kubectl does: --kubeconfig, $KUBECONFIG or ~/.kube/config)", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.UserAgent = "cove"
	core, params, err := coreClient(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{Namespace: ns, rest: rc, rc: core, params: params}, nil
}

// Server is the API server's address, for messages.
func (k *Cluster) Server() string { return k.rest.Host }
