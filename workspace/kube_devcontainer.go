package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace/kube"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// kubeDevcontainer reads the project's devcontainer.json for a Pod. A Pod
// takes its image, its environment (containerEnv, remoteEnv) and its
// lifecycle commands, and the trusted file's initializeCommand runs here
// as locally. What a cluster cannot do from here is refused before
// anything starts: a build or Features make an image on this machine, and
// a cluster pulls its image from a registry. The rest is said once.
func (b *Kube) devcontainer(ctx context.Context, s Spec) (*devcontainer.Config, error) {
	dc, err := loadDevcontainer(b.Stderr, s, s.Dir)
	if err != nil || dc == nil {
		return dc, err
	}
	ib, err := dc.ImageBuild()
	if err != nil {
		return nil, err
	}
	features, err := dc.Features()
	if err != nil {
		return nil, err
	}
	made := ""
	switch {
	case ib != nil:
		made = "builds its image (build)"
	case len(features) > 0:
		made = "installs Features into its image"
	}
	if made != "" {
		if s.Image == "" {
			return nil, fmt.Errorf("%s %s, which cove does on this machine, and a cluster pulls its image from a registry: build it and push it where the cluster pulls from (cove build -t REGISTRY/NAME --push …, or cove up --detach then cove push), then cove up --kube --image REGISTRY/NAME", dc.Path, made)
		}
		fmt.Fprintf(b.Stderr, "cove: note: %s %s: on the cluster, --image %s is used instead\n", dc.Path, made, termtext.Visible(s.Image))
	}
	var skipped []string
	for _, k := range []struct {
		key string
		set bool
	}{
		{"mounts", len(dc.Mounts) > 0}, {"workspaceMount", dc.WorkspaceMount != ""},
		{"workspaceFolder", dc.WorkspaceFolder != "" && dc.WorkspaceFolder != kube.WorkspaceDir},
		{"capAdd", len(dc.CapAdd) > 0}, {"securityOpt", len(dc.SecurityOpt) > 0},
		{"privileged", dc.Privileged != nil && *dc.Privileged}, {"init", dc.Init != nil && *dc.Init},
		{"forwardPorts", len(dc.ForwardPorts) > 0}, {"appPort", len(dc.AppPort) > 0 && string(dc.AppPort) != "null"},
		{"remoteUser", dc.RemoteUser != ""}, {"containerUser", dc.ContainerUser != ""},
		{"overrideCommand", dc.OverrideCommand != nil && !*dc.OverrideCommand},
	} {
		if k.set {
			skipped = append(skipped, k.key)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(b.Stderr, "cove: note: %s: on a cluster, %s not applied: the Pod is cove's locked-down Pod, runs as the image's user, has the project at %s and publishes no ports (forward them in the IDE's Ports view, or with cove up -p)\n",
			dc.Path, strings.Join(skipped, ", ")+map[bool]string{true: " is", false: " are"}[len(skipped) == 1], kube.WorkspaceDir)
	}
	if err := initializeCommand(ctx, b.Stderr, dc, s.Dir, devcontainerOptions(s).Home); err != nil {
		return nil, err
	}
	return dc, nil
}

// podRuntime shapes spec as devcontainer.json's runArgs ask, where a Pod
// can have it: -e and --env-file (the Pod's env), --add-host (its
// hostAliases), --shm-size and --tmpfs (volumes in memory), --memory and
// --cpus (its resources, where the command line says nothing). What a
// Pod cannot have (capabilities, devices, limits of its processes, other
// networks, binds of this machine's paths) is said.
func (b *Kube) podRuntime(dc *devcontainer.Config, dir string, spec *kube.Spec) error {
	if dc == nil {
		return nil
	}
	var conf Confinement
	rt, err := fileRuntime(dc, &spec.Limits, &conf)
	if err != nil {
		return err
	}
	var not []string
	if hosts := slices.DeleteFunc(slices.Clone(rt.ExtraHosts), func(h [2]string) bool { return h[1] == "host-gateway" }); len(hosts) < len(rt.ExtraHosts) {
		not = append(not, "--add-host …:host-gateway (a Pod has no way to this machine)")
		rt.ExtraHosts = hosts
	}
	var shaped Launch
	if err := runArgsLaunch(b.Stderr, dc, rt, dir, &shaped); err != nil {
		return err
	}
	spec.Env = append(spec.Env, rt.Env...)
	spec.HostAliases, spec.ShmSize, spec.Tmpfs = shaped.ExtraHosts, shaped.ShmSize, shaped.Tmpfs
	if slices.ContainsFunc(shaped.Tmpfs, func(t container.Tmpfs) bool { return t.Mode != 0 }) {
		not = append(not, "--tmpfs mode= (an emptyDir's mode is the cluster's)")
	}
	// What a Pod cannot have, as the file wrote it (the rest of runArgs
	// cove has no use for was said as the file was read).
	for _, a := range dc.RunArgs {
		flag, _, _ := strings.Cut(a, "=")
		if len(flag) > 2 && !strings.HasPrefix(flag, "--") {
			flag = flag[:2] // -vSRC:DST, -hNAME
		}
		if notOnPod[flag] && !slices.Contains(not, flag) {
			not = append(not, flag)
		}
	}
	if len(not) > 0 {
		fmt.Fprintf(b.Stderr, "cove: note: %s: runArgs on a cluster: %s not applied (the Pod is cove's locked-down Pod)\n", dc.Path, termtext.Visible(strings.Join(not, ", ")))
	}
	return nil
}

// notOnPod are the runArgs cove applies on this machine that a Pod does
// not take: cove's Pod is locked down, has the cluster's network, and no
// path or device of this machine is there.
var notOnPod = map[string]bool{
	"--cap-add": true, "--cap-drop": true, "--security-opt": true, "--network": true, "--net": true,
	"--hostname": true, "-h": true, "--pids-limit": true, "--ulimit": true, "--device": true,
	"-v": true, "--volume": true, "--mount": true,
}

// imageMetadata merges into dc the image's devcontainer.metadata label,
// as a local start does: its env and lifecycle commands apply on the Pod
// too (what does not is said). The host reads the image's config from
// the registry, as a pull would (no layer): an image it cannot reach
// from here is said, and its label not applied.
func (b *Kube) imageMetadata(ctx context.Context, dc *devcontainer.Config, ref string) (*devcontainer.Config, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	img, done, err := image.OpenImage(ctx, ref)
	var cfg *v1.ConfigFile
	if err == nil {
		defer done()
		cfg, err = img.ConfigFile()
	}
	if err != nil {
		fmt.Fprintf(b.Stderr, "cove: note: the image's devcontainer.metadata label could not be read from here (%s): its users, env and commands are not applied\n", termtext.Visible(err.Error()))
		return dc, nil
	}
	label := cfg.Config.Labels[devcontainer.MetadataLabel]
	if label == "" {
		return dc, nil
	}
	said := 0
	if dc != nil {
		said = len(dc.Notes)
	}
	md, err := dc.MergeMetadata(label)
	if err != nil {
		return nil, err
	}
	for _, n := range md.Notes[said:] {
		fmt.Fprintf(b.Stderr, "cove: note: %s\n", termtext.Visible(n))
	}
	if md.User() != "" && dc.User() == "" { // the file's own user was said already
		fmt.Fprintf(b.Stderr, "cove: note: the image's devcontainer.metadata names a user (%s): on a cluster the Pod runs as the image's user\n", termtext.Visible(md.User()))
	}
	return md, nil
}

// podEnv writes the workspace's environment to the Pod's EnvFile:
// devcontainer.json's containerEnv and remoteEnv resolved against the
// environment the Pod's image gives. It returns that environment, for the
// lifecycle commands' ${containerEnv:…}. What the Pod answers is the
// workspace's own environment: it shapes nothing but its own processes.
func podEnv(ctx context.Context, pod *kube.Pod, dc *devcontainer.Config) ([]string, error) {
	var out bytes.Buffer
	code, err := pod.Exec(ctx, []string{"/bin/sh", "-c", "env"}, kube.ExecOptions{Stdout: kube.Capped(&out, 256<<10)})
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("read the Pod's environment: %w", err)
	}
	base, script := envScript(dc, out.String())
	if err := writeEnvFile(ctx, pod, script); err != nil {
		return nil, fmt.Errorf("write the workspace's environment in the Pod: %w", err)
	}
	return workspaceEnv(dc, base), nil
}

// writeEnvFile writes script to the Pod's EnvFile. With no output stream
// the exec could end before its input was read (seen: an empty file, one
// run in five): it answers when done. One exec stalled with no answer at
// all (once in CI, for the four minutes left of its start): each try has
// 30 s, and a stalled one, given up, cannot put a part of the file in
// place (each writes its own, and renames it only whole).
func writeEnvFile(ctx context.Context, pod *kube.Pod, script string) error {
	tmp := kube.EnvFile + ".$$"
	sh := "cat >" + tmp + " && [ $(($(wc -c <" + tmp + "))) -eq " + strconv.Itoa(len(script)) + " ] && mv -f " + tmp + " " + kube.EnvFile +
		" && echo written || { rm -f " + tmp + "; exit 1; }"
	var err error
	for try := 1; try <= 3 && ctx.Err() == nil; try++ {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var done bytes.Buffer
		var code int
		code, err = pod.Exec(tctx, []string{"/bin/sh", "-c", sh},
			kube.ExecOptions{Stdin: strings.NewReader(script), Stdout: kube.Capped(&done, 64)})
		cancel()
		if err == nil && code == 0 && done.String() != "written\n" {
			err = fmt.Errorf("the Pod did not say it was written")
		}
		if err == nil && code != 0 {
			return fmt.Errorf("exit status %d", code)
		}
		if err == nil {
			return nil
		}
	}
	return err
}

// envScript is the EnvFile for dc on a Pod whose image's environment is
// env's output (lines K=V; a value's own newlines lose what follows them),
// and that environment as K=V.
func envScript(dc *devcontainer.Config, env string) (base []string, script string) {
	for _, line := range strings.Split(env, "\n") {
		if k, _, ok := strings.Cut(line, "="); ok && validEnvName(k) {
			base = append(base, line)
		}
	}
	set, unset := dc.Env(base)
	var b strings.Builder
	for _, kv := range set {
		k, v, _ := strings.Cut(kv, "=")
		if validEnvName(k) {
			fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(v))
		}
	}
	for _, k := range unset {
		if validEnvName(k) {
			fmt.Fprintf(&b, "unset %s\n", k)
		}
	}
	return base, b.String()
}

// kubeLifecycle runs devcontainer.json's lifecycle commands in the Pod as
// the spec orders them: the create commands once a volume (its claim is
// marked, where the Pod cannot write), postStartCommand when the Pod was
// made, postAttachCommand when a user attaches. A create command's
// failure is an error; the others' are warnings.
func (w *KubeWorkspace) lifecycle(ctx context.Context, dc *devcontainer.Config, env []string, attach bool) error {
	const mark = "created"
	created, err := w.k.Marked(ctx, w.name, mark)
	if err != nil {
		return err
	}
	var keys []string
	if !created {
		keys = append(keys, devcontainer.OnCreate, devcontainer.UpdateContent, devcontainer.PostCreate)
	}
	if w.pod.Created || !created {
		keys = append(keys, devcontainer.PostStart)
	}
	if attach {
		keys = append(keys, devcontainer.PostAttach)
	}
	if err := runLifecycle(ctx, w.b.Stderr, dc, env, keys, w.step); err != nil {
		return err
	}
	if !created {
		return w.k.Mark(ctx, w.name, mark, time.Now().UTC().Format(time.RFC3339))
	}
	return nil
}

// step runs a lifecycle step in the Pod, in /workspace.
func (w *KubeWorkspace) step(ctx context.Context, argv []string, out io.Writer) (int, error) {
	return w.exec(ctx, container.ExecRequest{Args: argv, Cwd: kube.WorkspaceDir}, kube.ExecOptions{Stdout: out, Stderr: out})
}

// validEnvName says whether k can be an exported shell variable.
func validEnvName(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s for sh in single quotes (a quote in s closes them,
// is escaped, and reopens them).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Attach runs the postAttachCommand of s.Dir's workspace, running, for a
// user who attaches to it as it runs (a second window on its launcher):
// devcontainer.json read again (what it says was said at the start), its
// ${containerEnv:…} resolved in the Pod as then.
func (b *Kube) Attach(ctx context.Context, s Spec) {
	dc, err := loadDevcontainer(io.Discard, s, s.Dir)
	if err != nil || dc == nil || len(dc.Lifecycle(devcontainer.PostAttach, nil)) == 0 {
		return
	}
	ws, err := b.Open(ctx, Name(s.Dir))
	if err != nil {
		return
	}
	w := ws.(*KubeWorkspace)
	env, err := podEnv(ctx, w.pod, dc)
	if err != nil {
		fmt.Fprintf(b.Stderr, "cove: warning: postAttachCommand: %v\n", err)
		return
	}
	runLifecycle(ctx, b.Stderr, dc, env, []string{devcontainer.PostAttach}, w.step)
}
