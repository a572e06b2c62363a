package devcontainer

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// KubeChoice is customizations.cove.kube: the project's workspace runs on
// a Kubernetes cluster, in the user's kubeconfig's Context and Namespace
// ("" for the kubeconfig's own). It is the project's wish: it takes
// effect only when the user trusted the file (it sends the project's
// files to that cluster).
type KubeChoice struct {
	Context   string `json:"context"`
	Namespace string `json:"namespace"`
}

// coveCustomizations is customizations.cove.
type coveCustomizations struct {
	// Kube is true, or {context, namespace}.
	Kube json.RawMessage `json:"kube"`
}

// Kube is the cluster customizations.cove.kube chooses, nil when it
// chooses none.
func (c *Config) Kube() (*KubeChoice, error) {
	if c == nil || len(c.Customizations["cove"]) == 0 {
		return nil, nil
	}
	var cc coveCustomizations
	if err := json.Unmarshal(c.Customizations["cove"], &cc); err != nil {
		return nil, fmt.Errorf("%s: customizations.cove: want an object ({\"kube\": …}); write it so, or remove it", c.Path)
	}
	switch s := strings.TrimSpace(string(cc.Kube)); s {
	case "", "null", "false":
		return nil, nil
	case "true":
		return &KubeChoice{}, nil
	}
	var k KubeChoice
	if err := json.Unmarshal(cc.Kube, &k); err != nil {
		return nil, fmt.Errorf("%s: customizations.cove.kube: %s: write true, or {\"context\": …, \"namespace\": …} (strings)", c.Path, strings.TrimSpace(string(cc.Kube)))
	}
	return &k, nil
}

// otherCustomizations names the tools other than cove the file has
// customizations for, sorted.
func (c *Config) otherCustomizations() []string {
	var names []string
	for k := range c.Customizations {
		if k != "cove" {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return names
}
