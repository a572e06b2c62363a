package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/kubeclient"
)

// Labels on everything cove makes in a cluster.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelWorkspace = "cove.sh/workspace"
)

// WorkspaceDir is where the project's copy lives in the Pod, on the
// workspace's volume.
const WorkspaceDir = "/workspace"

// coveDir holds cove's own binary in the Pod (an emptyDir): cove brings
// itself in, so any image with /bin/sh will do.
const coveDir = "/.cove"

// Spec is a workspace to run as a Pod.
type Spec struct {
	Name   string // the workspace's name; the Pod and its volume are cove-NAME
	Image  string
	Env    []string // KEY=VALUE
	Limits container.Limits
	// Volume is the size of the volume that outlives the Pod (the
	// project's copy, and what the workspace keeps); 0 means 10 GiB.
	Volume int64
	// HostAliases are /etc/hosts entries, a name and its IP each
	// (docker run's --add-host).
	HostAliases [][2]string
	// ShmSize, if set, is /dev/shm's size, a volume in memory (a Pod's is
	// the runtime's 64 MiB otherwise).
	ShmSize int64
	// Tmpfs are volumes in memory, empty at each start (their mode and
	// exec options are the cluster's).
	Tmpfs []container.Tmpfs
}

// objectName is the name of the Pod and its volume claim.
func objectName(workspace string) string { return "cove-" + workspace }

// pod is the locked-down Pod for s.
func pod(s Spec, ns string) *podObject {
	no := false
	keepalive := "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"
	runtimeDefault := &seccompProfile{Type: "RuntimeDefault"}
	c := containerSpec{
		Name:            "workspace",
		Image:           s.Image,
		Command:         []string{"/bin/sh", "-c", keepalive},
		WorkingDir:      WorkspaceDir,
		ImagePullPolicy: "IfNotPresent",
		SecurityContext: &securityContext{
			Privileged:     &no,
			Capabilities:   &capabilities{Drop: []string{"ALL"}, Add: container.Capabilities()},
			SeccompProfile: runtimeDefault,
		},
		VolumeMounts: []volumeMount{
			{Name: "workspace", MountPath: WorkspaceDir},
			{Name: "cove", MountPath: coveDir},
		},
	}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, envVar{Name: k, Value: v})
	}
	limits := map[string]string{}
	if s.Limits.Memory > 0 {
		limits["memory"] = strconv.FormatInt(s.Limits.Memory, 10)
	}
	if s.Limits.CPUs > 0 {
		limits["cpu"] = strconv.FormatInt(int64(s.Limits.CPUs*1000), 10) + "m"
	}
	if len(limits) > 0 {
		// Requests as the limits: the scheduler places the Pod where they
		// fit, and the Pod is not the first evicted.
		c.Resources = &resources{Limits: limits, Requests: limits}
	}
	volumes := []volume{
		{Name: "workspace", PersistentVolumeClaim: &claimSource{ClaimName: objectName(s.Name)}},
		{Name: "cove", EmptyDir: &emptyDir{}},
	}
	inMemory := func(name, at string, size int64, ro bool) {
		v := &emptyDir{Medium: "Memory"}
		if size > 0 {
			v.SizeLimit = strconv.FormatInt(size, 10)
		}
		volumes = append(volumes, volume{Name: name, EmptyDir: v})
		c.VolumeMounts = append(c.VolumeMounts, volumeMount{Name: name, MountPath: at, ReadOnly: ro})
	}
	if s.ShmSize > 0 {
		inMemory("shm", "/dev/shm", s.ShmSize, false)
	}
	for i, t := range s.Tmpfs {
		inMemory(fmt.Sprintf("tmpfs-%d", i), t.Target, t.Size, t.ReadOnly)
	}
	var aliases []hostAlias
	for _, h := range s.HostAliases {
		i := slices.IndexFunc(aliases, func(a hostAlias) bool { return a.IP == h[1] })
		if i < 0 {
			aliases = append(aliases, hostAlias{IP: h[1]})
			i = len(aliases) - 1
		}
		aliases[i].Hostnames = append(aliases[i].Hostnames, h[0])
	}
	grace := int64(5)
	return &podObject{
		APIVersion: "v1",
		Kind:       "Pod",
		Metadata: objectMeta{
			Name:      objectName(s.Name),
			Namespace: ns,
			Labels:    labels(s.Name),
		},
		Spec: podSpec{
			Hostname:                      hostname(s.Name),
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			RestartPolicy:                 "Always",
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               &podSecurityContext{SeccompProfile: runtimeDefault},
			Containers:                    []containerSpec{c},
			Volumes:                       volumes,
			HostAliases:                   aliases,
		},
	}
}

func labels(workspace string) map[string]string {
	return map[string]string{LabelManagedBy: "cove", LabelWorkspace: workspace}
}

// hostname is the workspace's name as a DNS label, as locally.
func hostname(name string) string {
	h := strings.ToLower(name)
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.Trim(h, "-.")
}

func claim(s Spec, ns string) *claimObject {
	size := s.Volume
	if size <= 0 {
		size = 10 << 30
	}
	return &claimObject{
		APIVersion: "v1",
		Kind:       "PersistentVolumeClaim",
		Metadata:   objectMeta{Name: objectName(s.Name), Namespace: ns, Labels: labels(s.Name)},
		Spec: claimSpec{
			AccessModes: []string{"ReadWriteOnce"},
			Resources:   resources{Requests: map[string]string{"storage": strconv.FormatInt(size, 10)}},
		},
	}
}

// Pod is a running workspace Pod.
type Pod struct {
	Name      string
	Namespace string
	// Created says whether Ensure made it (a first start) or found it.
	Created bool
	cluster *Cluster
}

// Ensure returns the workspace's Pod once it runs, creating its volume
// claim and the Pod as needed. A Pod of that name that is not cove's
// workspace is an error, not something to take over.
func (k *Cluster) Ensure(ctx context.Context, s Spec) (*Pod, error) {
	name := objectName(s.Name)
	pvcs := k.claims()
	if _, err := pvcs.Create(ctx, claim(s, k.Namespace)); err != nil && !kubeclient.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create the volume claim %s/%s: %w", k.Namespace, name, err)
	}
	pods := k.pods()
	created := false
	p, err := pods.Get(ctx, name)
	switch {
	case kubeclient.IsNotFound(err):
		if p, err = pods.Create(ctx, pod(s, k.Namespace)); err != nil {
			return nil, fmt.Errorf("create the Pod %s/%s: %w", k.Namespace, name, err)
		}
		created = true
	case err != nil:
		return nil, fmt.Errorf("get the Pod %s/%s: %w", k.Namespace, name, err)
	case p.Metadata.Labels[LabelManagedBy] != "cove" || p.Metadata.Labels[LabelWorkspace] != s.Name:
		return nil, fmt.Errorf("the Pod %s/%s exists and is not this workspace's (choose another name)", k.Namespace, name)
	case p.Metadata.DeletionTimestamp != nil:
		// A stop still under way: wait for it, then start afresh.
		if err := k.waitGone(ctx, name); err != nil {
			return nil, err
		}
		return k.Ensure(ctx, s)
	}
	if err := k.waitRunning(ctx, p); err != nil {
		return nil, err
	}
	return &Pod{Name: name, Namespace: k.Namespace, Created: created, cluster: k}, nil
}

// waitRunning waits until the Pod's container runs, or says why it
// cannot (an image that cannot be pulled, a claim that is not bound, a
// Pod that does not fit).
func (k *Cluster) waitRunning(ctx context.Context, p *podObject) error {
	name := p.Metadata.Name
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	events, errs, err := k.pods().Watch(wctx, name, p.Metadata.ResourceVersion)
	if err != nil {
		return fmt.Errorf("watch the Pod %s: %w", name, err)
	}
	lastWhy := ""
	for {
		if ok, why, err := podReady(p); err != nil {
			return fmt.Errorf("the Pod %s/%s: %w", k.Namespace, name, err)
		} else if ok {
			return nil
		} else if why != "" {
			lastWhy = why
		}
		select {
		case <-ctx.Done():
			if lastWhy != "" {
				return fmt.Errorf("the Pod %s/%s did not start: %s", k.Namespace, name, lastWhy)
			}
			return fmt.Errorf("the Pod %s/%s did not start: %w", k.Namespace, name, ctx.Err())
		case ev, open := <-events:
			if !open {
				select {
				case err := <-errs:
					if !kubeclient.IsGone(err) {
						return fmt.Errorf("watch the Pod %s: %w", name, err)
					}
					// Too old to watch from: read the Pod again.
					if p, err = k.pods().Get(ctx, name); err != nil {
						return fmt.Errorf("get the Pod %s/%s: %w", k.Namespace, name, err)
					}
				default:
				}
				// Watches end; start another from where this one was.
				return k.waitRunning(ctx, p)
			}
			if ev.Type == "DELETED" {
				return fmt.Errorf("the Pod %s/%s was deleted while it started", k.Namespace, name)
			}
			var np podObject
			if json.Unmarshal(ev.Object, &np) == nil && np.Metadata.Name == name {
				p = &np
			}
		}
	}
}

// podReady says whether p's container runs; if not, why (for the user),
// or an error when it never will.
func podReady(p *podObject) (bool, string, error) {
	switch p.Status.Phase {
	case "Failed", "Succeeded":
		return false, "", fmt.Errorf("it ended (%s): %s", p.Status.Phase, p.Status.Message)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			return true, "", nil
		}
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError":
				return false, "", fmt.Errorf("%s: %s", w.Reason, w.Message)
			}
			return false, w.Reason + ": " + w.Message, nil
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "PodScheduled" && c.Status == "False" {
			return false, "not scheduled: " + c.Message, nil
		}
	}
	return false, "", nil
}

// waitGone waits until the Pod name no longer exists.
func (k *Cluster) waitGone(ctx context.Context, name string) error {
	pods := k.pods()
	for {
		_, err := pods.Get(ctx, name)
		if kubeclient.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get the Pod %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Pod %s/%s is still there: %w", k.Namespace, name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop deletes the workspace's Pod and waits until it is gone; its volume
// stays for the next start.
func (k *Cluster) Stop(ctx context.Context, workspace string) error {
	name := objectName(workspace)
	err := k.pods().Delete(ctx, name)
	if kubeclient.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete the Pod %s/%s: %w", k.Namespace, name, err)
	}
	return k.waitGone(ctx, name)
}

// Remove stops the workspace and deletes its volume claim.
func (k *Cluster) Remove(ctx context.Context, workspace string) error {
	if err := k.Stop(ctx, workspace); err != nil {
		return err
	}
	name := objectName(workspace)
	claims := k.claims()
	err := claims.Delete(ctx, name)
	if kubeclient.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete the volume claim %s/%s: %w", k.Namespace, name, err)
	}
	// A claim goes once nothing uses it (its protection finalizer): wait,
	// so that rm means gone.
	for {
		if _, err := claims.Get(ctx, name); kubeclient.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("get the volume claim %s/%s: %w", k.Namespace, name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the volume claim %s/%s is still there: %w", k.Namespace, name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Workspace is one of cove's workspaces in the namespace.
type Workspace struct {
	Name    string
	Phase   string // the Pod's phase, or "stopped" (only the volume is left)
	Image   string // the Pod's image; "" when stopped
	Started time.Time
}

// List returns cove's workspaces in the namespace: those with a Pod, and
// those stopped, with only their volume left.
func (k *Cluster) List(ctx context.Context) ([]Workspace, error) {
	sel := LabelManagedBy + "=cove"
	pods, err := k.pods().List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list Pods in %s: %w", k.Namespace, err)
	}
	claims, err := k.claims().List(ctx, sel)
	if err != nil {
		return nil, fmt.Errorf("list volume claims in %s: %w", k.Namespace, err)
	}
	var out []Workspace
	seen := map[string]bool{}
	for _, p := range pods {
		w := Workspace{Name: p.Metadata.Labels[LabelWorkspace], Phase: p.Status.Phase}
		if len(p.Spec.Containers) > 0 {
			w.Image = p.Spec.Containers[0].Image
		}
		if p.Status.StartTime != nil {
			w.Started = *p.Status.StartTime
		}
		seen[w.Name] = true
		out = append(out, w)
	}
	for _, c := range claims {
		if n := c.Metadata.Labels[LabelWorkspace]; !seen[n] {
			out = append(out, Workspace{Name: n, Phase: "stopped"})
		}
	}
	return out, nil
}

// Pod returns the running Pod of the workspace, or an error saying it is
// not running (or not cove's).
func (k *Cluster) Pod(ctx context.Context, workspace string) (*Pod, error) {
	name := objectName(workspace)
	p, err := k.pods().Get(ctx, name)
	if kubeclient.IsNotFound(err) {
		return nil, fmt.Errorf("the workspace %s is not running in %s (cove up --kube starts it)", workspace, k.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("get the Pod %s/%s: %w", k.Namespace, name, err)
	}
	if p.Metadata.Labels[LabelManagedBy] != "cove" || p.Metadata.Labels[LabelWorkspace] != workspace {
		return nil, fmt.Errorf("the Pod %s/%s is not a cove workspace", k.Namespace, name)
	}
	if ok, why, err := podReady(p); !ok {
		if err == nil {
			err = fmt.Errorf("not running yet: %s", why)
		}
		return nil, fmt.Errorf("the workspace %s: %w", workspace, err)
	}
	return &Pod{Name: name, Namespace: k.Namespace, cluster: k}, nil
}
