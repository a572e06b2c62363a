package kube

import (
	"context"
	"net/http"
	"net/url"

	"github.com/cove-sh/cove/internal/kubeclient"
)

// The API cove uses is core/v1 Pods and PersistentVolumeClaims (and their
// exec and portforward), in the namespace chosen.

// objects is one kind of namespaced object.
type objects[T any] struct {
	api      *kubeclient.Client
	ns       string
	resource string
}

func (k *Cluster) pods() objects[podObject] {
	return objects[podObject]{k.api, k.Namespace, "pods"}
}

func (k *Cluster) claims() objects[claimObject] {
	return objects[claimObject]{k.api, k.Namespace, "persistentvolumeclaims"}
}

func (o objects[T]) path(name string) string {
	p := "/api/v1/namespaces/" + url.PathEscape(o.ns) + "/" + o.resource
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	return p
}

func (o objects[T]) Get(ctx context.Context, name string) (*T, error) {
	out := new(T)
	return out, o.api.Do(ctx, http.MethodGet, o.path(name), nil, nil, out)
}

func (o objects[T]) Create(ctx context.Context, obj *T) (*T, error) {
	out := new(T)
	return out, o.api.Do(ctx, http.MethodPost, o.path(""), nil, obj, out)
}

func (o objects[T]) Delete(ctx context.Context, name string) error {
	return o.api.Do(ctx, http.MethodDelete, o.path(name), nil, nil, nil)
}

// Patch merges patch (JSON) into the object.
func (o objects[T]) Patch(ctx context.Context, name string, patch []byte) error {
	return o.api.Do(ctx, http.MethodPatch, o.path(name), nil, patch, nil)
}

// List lists the objects with the labels of selector (labelSelector's
// syntax).
func (o objects[T]) List(ctx context.Context, selector string) ([]T, error) {
	var out struct {
		Items []T `json:"items"`
	}
	err := o.api.Do(ctx, http.MethodGet, o.path(""), url.Values{"labelSelector": {selector}}, nil, &out)
	return out.Items, err
}

// Watch watches the object name from resourceVersion.
func (o objects[T]) Watch(ctx context.Context, name, resourceVersion string) (<-chan kubeclient.Event, <-chan error, error) {
	q := url.Values{"fieldSelector": {"metadata.name=" + name}}
	if resourceVersion != "" {
		q.Set("resourceVersion", resourceVersion)
	}
	return o.api.Watch(ctx, o.path(""), q)
}
