package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The API cove uses is core/v1 Pods and PersistentVolumeClaims (and their
// exec and portforward): it speaks to it through a REST client with a
// scheme of core/v1 alone. client-go's clientset registers every API group
// there is, and took the static binary from 29 to 82 MB.

// coreClient is a REST client for core/v1 with its parameter codec.
func coreClient(rc *rest.Config) (*rest.RESTClient, runtime.ParameterCodec, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, nil, err
	}
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.APIPath = "/api"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, runtime.NewParameterCodec(s), nil
}

// objects is one kind of namespaced object, with the calls of client-go's
// typed clients that cove makes.
type objects[T, L runtime.Object] struct {
	rc       *rest.RESTClient
	params   runtime.ParameterCodec
	ns       string
	resource string
	newObj   func() T
	newList  func() L
}

func (k *Cluster) pods() objects[*corev1.Pod, *corev1.PodList] {
	return objects[*corev1.Pod, *corev1.PodList]{k.rc, k.params, k.Namespace, "pods",
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} }}
}

func (k *Cluster) claims() objects[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
	return objects[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList]{k.rc, k.params, k.Namespace, "persistentvolumeclaims",
		func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} },
		func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} }}
}

func (o objects[T, L]) Get(ctx context.Context, name string, _ metav1.GetOptions) (T, error) {
	out := o.newObj()
	err := o.rc.Get().Namespace(o.ns).Resource(o.resource).Name(name).Do(ctx).Into(out)
	return out, err
}

func (o objects[T, L]) Create(ctx context.Context, obj T, _ metav1.CreateOptions) (T, error) {
	out := o.newObj()
	err := o.rc.Post().Namespace(o.ns).Resource(o.resource).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (o objects[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return o.rc.Delete().Namespace(o.ns).Resource(o.resource).Name(name).Body(&opts).Do(ctx).Error()
}

func (o objects[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := o.newList()
	err := o.rc.Get().Namespace(o.ns).Resource(o.resource).VersionedParams(&opts, o.params).Do(ctx).Into(out)
	return out, err
}

func (o objects[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return o.rc.Get().Namespace(o.ns).Resource(o.resource).VersionedParams(&opts, o.params).Watch(ctx)
}
