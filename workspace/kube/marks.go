package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cove-sh/cove/internal/kubeclient"
)

// markPrefix is where cove's marks on a workspace's volume claim are: in
// the API, where the Pod (no service-account token) cannot write them.
const markPrefix = "cove.sh/"

// Marked says whether the workspace's volume carries the mark key (its
// create commands ran on it, for one).
func (k *Cluster) Marked(ctx context.Context, workspace, key string) (bool, error) {
	c, err := k.claims().Get(ctx, objectName(workspace))
	if err != nil {
		return false, fmt.Errorf("read the volume claim of %s: %w", workspace, err)
	}
	_, ok := c.Metadata.Annotations[markPrefix+key]
	return ok, nil
}

// Mark puts the mark key on the workspace's volume claim, with value.
// It goes with the volume (cove rm --kube).
func (k *Cluster) Mark(ctx context.Context, workspace, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{markPrefix + key: value}}})
	if err := k.claims().Patch(ctx, objectName(workspace), patch); err != nil {
		return fmt.Errorf("mark the volume claim of %s: %w", workspace, err)
	}
	return nil
}

// Gone says whether the workspace's Pod is gone or going (deleted: cove
// stop --kube, or by hand). An error is an API server that did not say.
func (k *Cluster) Gone(ctx context.Context, workspace string) (bool, error) {
	p, err := k.pods().Get(ctx, objectName(workspace))
	if kubeclient.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return p.Metadata.DeletionTimestamp != nil || p.Metadata.Labels[LabelWorkspace] != workspace, nil
}
