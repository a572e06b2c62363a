package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/devcontainer/devimage"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace/compose"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A devcontainer.json over Docker Compose (dockerComposeFile) makes a
// workspace of several containers: its Service is the workspace's own
// container (the IDE server's, the project at the workspaceFolder), and
// the other services it runs (runServices, by default all, with what
// they depend on) are containers of their own that join its network
// namespace, as a pod's do: each service's name (and aliases) is
// 127.0.0.1 in every /etc/hosts, so postgres://db:5432 reaches the
// database as under Compose, and two services cannot listen on one port
// (refused when expose or ports say so). The services' containers are
// named WORKSPACE.SERVICE, listed beside the workspace's layer (the
// "compose-services" file), stopped and removed with it.

// servicesFile, beside the workspace's layer, names its services'
// containers, one a line.
const servicesFile = "compose-services"

// loadCompose reads the Compose project of w's devcontainer.json, if it
// names one: before anything starts, so that a refusal leaves all as
// it was.
func (lo *Local) loadCompose(ctx context.Context, w *start) error {
	dc := w.dc
	files := dc.ComposeFiles()
	if len(files) == 0 {
		return nil
	}
	if w.conf.Net != container.NetPrivate {
		return fmt.Errorf("%s: a Compose workspace's services share a network of its own; --net %s does not go with dockerComposeFile", dc.Path, w.conf.Net)
	}
	p, err := compose.Load(ctx, compose.Options{Files: files, Project: w.abs, Trusted: dc.Trusted, Env: os.Environ()})
	if err != nil {
		return err
	}
	main, ok := p.Service(dc.Service)
	if !ok {
		return fmt.Errorf("%s: service %q is not a service of %s (it has %s)", dc.Path, dc.Service, strings.Join(files, ", "), strings.Join(serviceNames(p.Services), ", "))
	}
	run, err := selectServices(p, dc)
	if err != nil {
		return err
	}
	w.compose, w.main = p, main
	for _, s := range p.Services {
		if s.Name != main.Name && slices.Contains(run, s.Name) {
			w.services = append(w.services, s)
		}
		if s.Name == main.Name || slices.Contains(run, s.Name) {
			for _, n := range s.Notes {
				fmt.Fprintf(lo.Stderr, "cove: note: %s\n", termtext.Visible(n))
			}
		}
		if s.Name == main.Name && restartOf(s.Restart) != (container.Restart{}) {
			fmt.Fprintf(lo.Stderr, "cove: note: service %s: restart %s is not done for the workspace's own service (it serves the IDE; cove up starts it again)\n", s.Name, s.Restart)
		}
	}
	if dc.ContainerUser == "" {
		dc.ContainerUser = main.User
	}
	if dc.OverrideCommand == nil {
		// The spec's default for Compose: the service's own command runs.
		f := false
		dc.OverrideCommand = &f
	}
	return nil
}

// selectServices are the services to run: runServices (all by default)
// and the workspace's, with everything they depend on, as docker compose
// up starts them.
func selectServices(p *compose.Project, dc *devcontainer.Config) ([]string, error) {
	want := slices.Clone(dc.RunServices)
	if dc.RunServices == nil {
		want = serviceNames(p.Services)
	}
	want = append(want, dc.Service)
	var out []string
	var add func(string) error
	add = func(n string) error {
		if slices.Contains(out, n) {
			return nil
		}
		s, ok := p.Service(n)
		if !ok {
			return fmt.Errorf("%s: runServices names %q, not a service of the Compose project (it has %s)", dc.Path, n, strings.Join(serviceNames(p.Services), ", "))
		}
		out = append(out, n)
		for _, d := range s.DependsOn {
			if err := add(d.Service); err != nil && d.Required {
				return err
			}
		}
		return nil
	}
	for _, n := range want {
		if err := add(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func serviceNames(s []compose.Service) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Name)
	}
	return out
}

// composeImage is the image of the service s: its image, or what cove
// build makes of its build section.
func (lo *Local) composeImage(ctx context.Context, w *start, s *compose.Service) (ref, digest string, err error) {
	if s.Build == nil {
		if s.Image == "" {
			return "", "", fmt.Errorf("service %s has neither image nor build", s.Name)
		}
		return s.Image, "", nil
	}
	store, err := lo.store()
	if err != nil {
		return "", "", err
	}
	bin, err := lo.binary()
	if err != nil {
		return "", "", err
	}
	// Relative to the project, which the build reads confined; a trusted
	// file's context elsewhere is read from the root.
	root := w.abs
	if !within(w.abs, s.Build.Context) || !within(w.abs, s.Build.Dockerfile) {
		root = "/"
	}
	ctxRel, _ := filepath.Rel(root, s.Build.Context)
	dfRel, _ := filepath.Rel(root, s.Build.Dockerfile)
	tag := "cove-devcontainer/" + w.name + ":build-" + s.Name
	fmt.Fprintf(lo.Stderr, "cove: building the image of service %s from %s\n", s.Name, termtext.Visible(s.Build.Dockerfile))
	res, err := devimage.Build(ctx, root, &devcontainer.ImageBuild{Dockerfile: dfRel, Context: ctxRel, Args: s.Build.Args, Target: s.Build.Target}, tag, devimage.Options{
		Store: store, Binary: bin, CacheDir: filepath.Join(lo.Layout.Data, "build"), Output: commandOutput(lo.Stderr),
	})
	if err != nil {
		return "", "", fmt.Errorf("service %s: %w", s.Name, err)
	}
	fmt.Fprintf(lo.Stderr, "cove: built %s (%d of %d layer steps cached)\n", res.Ref, res.Hits, res.Steps)
	return tag, res.Image.Digest.String(), nil
}

func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel) || rel == "."
}

// composeHosts are the /etc/hosts entries of every container of the
// workspace: each service's name and aliases on the loopback they share,
// and the extra_hosts of s.
func composeHosts(w *start, s *compose.Service) [][2]string {
	var out [][2]string
	for _, x := range append([]compose.Service{*w.main}, w.services...) {
		out = append(out, [2]string{x.Name, "127.0.0.1"})
		for _, a := range x.Aliases {
			out = append(out, [2]string{a, "127.0.0.1"})
		}
	}
	return append(out, s.ExtraHosts...)
}

var volumeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })

// serviceMounts are s's binds and named volumes (directories of the
// workspace's own, beside its layer: kept by cove stop, removed by cove
// rm) and tmpfs mounts.
func serviceMounts(w *start, s *compose.Service) ([]container.Bind, []container.Tmpfs, error) {
	var binds []container.Bind
	for _, b := range s.Binds {
		// Checked again now: the project is the workspace's to write, and
		// a path in it may have become a symlink out since it was read.
		if err := stayInProject(w.abs, b.Source); err != nil {
			return nil, nil, fmt.Errorf("service %s: volumes: %w", s.Name, err)
		}
		binds = append(binds, container.Bind{Source: b.Source, Target: b.Target, ReadOnly: b.ReadOnly})
	}
	for _, v := range s.Volumes {
		name := strings.Map(func(r rune) rune {
			if strings.ContainsRune("/\\:", r) {
				return '-'
			}
			return r
		}, v.Name)
		if !volumeName().MatchString(name) {
			return nil, nil, fmt.Errorf("service %s: volume name %q: use letters, digits, _ . - ", s.Name, v.Name)
		}
		dir := filepath.Join(w.layerDir, "volumes", "compose-"+name)
		_, err := os.Lstat(dir)
		fresh := errors.Is(err, os.ErrNotExist)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("service %s: volume %s: %w", s.Name, v.Name, err)
		}
		// A new volume starts with the image's files there (the
		// container's init copies them, if it is still empty), unless
		// nocopy.
		binds = append(binds, container.Bind{Source: dir, Target: v.Target, ReadOnly: v.ReadOnly, Volume: true, CopyUp: fresh && !v.NoCopy})
	}
	var tmpfs []container.Tmpfs
	for _, t := range s.Tmpfs {
		tmpfs = append(tmpfs, container.Tmpfs{Target: t})
	}
	return binds, tmpfs, nil
}

// composePorts are the ports of every service the workspace runs: they
// share its network, so its pasta forwards them all, on 127.0.0.1.
func (lo *Local) composePorts(w *start, have []container.Port) ([]container.Port, error) {
	var out []container.Port
	for _, s := range append([]compose.Service{*w.main}, w.services...) {
		for _, spec := range s.Ports {
			p, err := container.ParsePort(spec)
			if err != nil {
				return nil, fmt.Errorf("service %s: ports %s: %w", s.Name, spec, err)
			}
			p.Source = "ports"
			if slices.ContainsFunc(have, p.Overlaps) || slices.ContainsFunc(out, p.Overlaps) {
				continue
			}
			if p.HostIP != "127.0.0.1" {
				fmt.Fprintf(lo.Stderr, "cove: note: service %s asks for host port %s; the project's ports are forwarded on 127.0.0.1 only\n", s.Name, termtext.Visible(p.String()))
				p.HostIP = "127.0.0.1"
			}
			out = append(out, p)
		}
	}
	return out, nil
}

// composeCommand is the image config the workspace's own service runs
// its command from (see startCommand): Compose's entrypoint and command
// over the image's.
func composeCommand(cfg *v1.ConfigFile, s *compose.Service) *v1.ConfigFile {
	if s == nil || cfg == nil || (s.Entrypoint == nil && s.Command == nil) {
		return cfg
	}
	c := cfg.DeepCopy()
	if s.Entrypoint != nil {
		c.Config.Entrypoint, c.Config.Cmd = s.Entrypoint, nil
	}
	if s.Command != nil {
		c.Config.Cmd = s.Command
	}
	return c
}

// serviceArgv is what service s runs: Compose's entrypoint and command
// over the image's, an empty one resetting it (composeCommand).
func serviceArgv(cfg *v1.ConfigFile, s *compose.Service) []string {
	c := composeCommand(cfg, s).Config
	return append(slices.Clone(c.Entrypoint), c.Cmd...)
}

// serviceContainer is the name of service svc's container in workspace
// ws.
func serviceContainer(ws, svc string) string { return ws + "." + svc }

// startServices starts w's other services, each once what it depends on
// is as its condition asks, in the network of the workspace's container
// st; then waits for what the workspace's own service depends on.
func (lo *Local) startServices(ctx context.Context, w *start, st *container.State) error {
	if w.main == nil {
		return nil
	}
	var names []string
	for _, s := range w.services {
		names = append(names, serviceContainer(w.name, s.Name))
	}
	if err := os.WriteFile(filepath.Join(w.layerDir, servicesFile), []byte(strings.Join(names, "\n")), 0o600); err != nil {
		return err
	}
	for i := range w.services {
		s := &w.services[i]
		if err := lo.waitDeps(ctx, w, s); err != nil {
			return err
		}
		if err := lo.startService(ctx, w, st, s); err != nil {
			return fmt.Errorf("service %s: %w", s.Name, err)
		}
	}
	return lo.waitDeps(ctx, w, w.main)
}

// startService starts s's container, joined to st's network (and,
// rootless, its user namespace: the ids are the workspace's).
func (lo *Local) startService(ctx context.Context, w *start, st *container.State, s *compose.Service) error {
	name := serviceContainer(w.name, s.Name)
	states := lo.states()
	if old, err := states.Load(name); err == nil {
		old.Stop(10 * time.Second)
		states.Delete(name) // stopped: started again on its kept layer
	}
	ref, _, err := lo.composeImage(ctx, w, s)
	if err != nil {
		return err
	}
	binds, tmpfs, err := serviceMounts(w, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(lo.Stderr, "cove: starting service %s (%s)\n", s.Name, termtext.Visible(ref))
	l := Launch{
		Ref: ref, Policy: image.PullMissing, Name: name, Hostname: cmpOr(s.Hostname, s.Name),
		Args: s.Command, Env: s.Env, Workdir: s.WorkingDir, User: s.User,
		Binds: binds, Tmpfs: tmpfs, Net: container.NetJoin, JoinPid: st.Pid, Detach: true, Quiet: true,
		Dir: filepath.Join(w.layerDir, "services", s.Name), ExtraHosts: composeHosts(w, s),
		CapDrop: s.CapDrop, KeepID: w.keepID, Warn: w.warnOnce(lo), Restart: restartOf(s.Restart),
		Prepare: func(cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *Launch) error {
			if s.Entrypoint == nil && s.Command == nil {
				return nil // the image's, as ProcessFromImage made it
			}
			argv := serviceArgv(cfg, s)
			if len(argv) == 0 {
				return fmt.Errorf("entrypoint and command are both empty (entrypoint: [] resets the image's; give the service a command)")
			}
			proc.Args = argv
			return nil
		},
	}
	if s.Entrypoint != nil || s.Command != nil {
		l.Args = []string{"-"} // a placeholder for the image's command check: Prepare sets the command
	}
	if st.Status() != container.Running {
		return errors.New("the workspace stopped while its services started")
	}
	_, err = lo.Run(ctx, l)
	return err
}

// restartOf is Compose's restart (compose.Load refused any other) as
// the service container's init keeps it: without a daemon, always and
// unless-stopped are one (no daemon restart tells them apart), and a
// restart is of the workload in the container it ran in, as Docker's.
func restartOf(r string) container.Restart {
	switch {
	case r == "always" || r == "unless-stopped":
		return container.Restart{Always: true}
	case r == "on-failure":
		return container.Restart{OnFailure: true}
	case strings.HasPrefix(r, "on-failure:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(r, "on-failure:"))
		return container.Restart{OnFailure: true, Max: max(n, 0)}
	}
	return container.Restart{}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// waitDeps waits for what s depends on, as each condition asks; it says
// on stderr what it waits for.
func (lo *Local) waitDeps(ctx context.Context, w *start, s *compose.Service) error {
	for _, d := range s.DependsOn {
		dep, ok := w.compose.Service(d.Service)
		if !ok || d.Service == w.main.Name {
			continue
		}
		st, err := lo.states().Load(serviceContainer(w.name, d.Service))
		if err != nil {
			if !d.Required {
				continue
			}
			return fmt.Errorf("service %s depends on %s, which did not start: %w", s.Name, d.Service, err)
		}
		switch d.Condition {
		case compose.Healthy:
			err = lo.waitHealthy(ctx, st, dep)
		case compose.Completed:
			err = lo.waitCompleted(ctx, st, dep)
		}
		if err != nil {
			return fmt.Errorf("service %s depends on %s: %w", s.Name, d.Service, err)
		}
	}
	return nil
}

// waitHealthy runs s's healthcheck in its container until it passes:
// often at first (50 ms, doubling to a second) (a start should not wait a whole interval for a
// database that is up in a second), failing only after the start period
// and Retries intervals more.
func (lo *Local) waitHealthy(ctx context.Context, st *container.State, s *compose.Service) error {
	h := s.Health
	if h == nil {
		return fmt.Errorf("condition service_healthy, but %s has no healthcheck", s.Name)
	}
	fmt.Fprintf(lo.Stderr, "cove: waiting for service %s to be healthy (%s)\n", s.Name, termtext.Visible(strings.Join(h.Test, " ")))
	limit := time.Duration((h.StartPeriod + float64(h.Retries+1)*(h.Interval+h.Timeout)) * float64(time.Second))
	deadline := time.Now().Add(limit)
	every := min(time.Duration(h.Interval*float64(time.Second)), time.Second)
	wait := min(50*time.Millisecond, every) // doubled up to every: most services are up in well under a second
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Duration(h.Timeout*float64(time.Second)))
		code, err := lo.execPiped(cctx, st, container.ExecRequest{Args: h.Test, Cwd: "/"}, io.Discard)
		cancel()
		if err == nil && code == 0 {
			return nil
		}
		if st.Status() != container.Running {
			return fmt.Errorf("%s exited before it was healthy (cove logs %s)", s.Name, st.Name)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not healthy after %s (its healthcheck %q: exit %d %v; cove logs %s)", s.Name, limit, strings.Join(h.Test, " "), code, err, st.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, every)
	}
}

// waitCompleted waits for s's container to exit, and asks that it did
// with status 0.
func (lo *Local) waitCompleted(ctx context.Context, st *container.State, s *compose.Service) error {
	fmt.Fprintf(lo.Stderr, "cove: waiting for service %s to complete\n", s.Name)
	for st.Status() == container.Running {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if now, err := lo.states().Load(st.Name); err == nil && now.ExitCode != nil && *now.ExitCode != 0 {
		return fmt.Errorf("%s exited with status %d (cove logs %s)", s.Name, *now.ExitCode, st.Name)
	}
	return nil
}

// services are the containers of the Compose services of the workspace
// whose layer is in dir.
func services(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, servicesFile))
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range strings.Split(string(b), "\n") {
		if n != "" && container.ValidName(n) == nil {
			out = append(out, n)
		}
	}
	return out
}

// stopServices stops the services of the workspace st, each within
// grace.
func (lo *Local) stopServices(st *container.State, grace time.Duration) error {
	var errs []error
	for _, n := range services(st.Dir) {
		if s, err := lo.states().Load(n); err == nil {
			if err := s.Stop(grace); err != nil {
				errs = append(errs, fmt.Errorf("stop service %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeServices forgets the service containers of the workspace st
// (their layers are under its own, removed with it) and the images its
// Compose project built (forgetImages).
func (lo *Local) removeServices(st *container.State) error {
	store, _ := lo.store()
	for _, n := range services(st.Dir) {
		s, err := lo.states().Load(n)
		if err != nil {
			continue
		}
		if err := s.Stop(0); err != nil {
			return fmt.Errorf("rm service %s: %w", n, err)
		}
		if store != nil {
			store.Release(lo.states().Dir(n))
		}
		if err := lo.states().Delete(n); err != nil {
			return fmt.Errorf("rm service %s: %w", n, err)
		}
	}
	return nil
}
