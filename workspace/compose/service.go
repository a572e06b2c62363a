package compose

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
)

// serviceKeys are the service keys Cove does something with (service
// below), or that change nothing a workspace sees; any other key a
// service sets is refused by name.
var serviceKeys = map[string]bool{
	"image": true, "build": true, "command": true, "entrypoint": true,
	"environment": true, "env_file": true, "user": true, "working_dir": true,
	"volumes": true, "ports": true, "expose": true, "depends_on": true,
	"healthcheck": true, "restart": true, "hostname": true, "extra_hosts": true,
	"networks": true, "cap_drop": true, "stop_grace_period": true,
	"profiles": true, "extends": true, // the loader's
	// Names and metadata: Cove names its containers itself.
	"container_name": true, "labels": true, "annotations": true,
	// Cove's init is always PID 1; a service has no terminal of its own
	// (cove exec -t gives one).
	"init": true, "tty": true, "stdin_open": true,
	"pull_policy": true, "scale": true,
	"network_mode": true, // service:NAME only (service below)
}

// why says, for keys refused, what Cove would have had to do.
var why = map[string]string{
	"privileged":     "a privileged container has the host's devices and capabilities",
	"pid":            "a service has a PID namespace of its own",
	"ipc":            "a service has an IPC namespace of its own",
	"uts":            "a service has a UTS namespace of its own",
	"cap_add":        "no capability beyond a workspace's",
	"devices":        "no host device in a workspace",
	"userns_mode":    "a workspace's user namespace is Cove's",
	"security_opt":   "a workspace's confinement is Cove's",
	"cgroup":         "a service has a cgroup of its own",
	"cgroup_parent":  "a service's cgroup is under the workspace's",
	"sysctls":        "no sysctl from a project file",
	"volumes_from":   "mounts are named per service",
	"secrets":        "no secrets store",
	"configs":        "no configs store",
	"use_api_socket": "no container engine's socket in a workspace",
	"runtime":        "one runtime, Cove's",
	"gpus":           "no host device in a workspace",
}

// refusedKeys names the keys s sets that Cove does not do.
func refusedKeys(s types.ServiceConfig) []string {
	b, err := json.Marshal(s)
	if err != nil {
		return []string{fmt.Sprintf("service %s: %v", s.Name, err)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return []string{fmt.Sprintf("service %s: %v", s.Name, err)}
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := string(m[k])
		if serviceKeys[k] || v == "null" || v == "false" || v == "0" || v == `""` || v == "[]" || v == "{}" {
			continue
		}
		msg := fmt.Sprintf("service %s: %s", s.Name, k)
		if r := why[k]; r != "" {
			msg += " (" + r + ")"
		} else {
			msg += " (not supported by cove)"
		}
		out = append(out, msg)
	}
	return out
}

// refusedTop names the project's top-level settings Cove does not do.
func refusedTop(p *types.Project) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(p.Networks)) {
		nw := p.Networks[n]
		if bool(nw.External) {
			out = append(out, fmt.Sprintf("networks.%s: external (a workspace's services have one network, their own)", n))
		} else if (nw.Driver != "" && nw.Driver != "bridge") || len(nw.DriverOpts) > 0 || len(nw.Ipam.Config) > 0 || nw.Ipam.Driver != "" || bool(nw.Internal) && false {
			out = append(out, fmt.Sprintf("networks.%s: driver/ipam (a workspace's services have one network, their own)", n))
		}
	}
	for _, n := range slices.Sorted(maps.Keys(p.Volumes)) {
		v := p.Volumes[n]
		if bool(v.External) {
			out = append(out, fmt.Sprintf("volumes.%s: external (volumes are the workspace's own directories)", n))
		} else if (v.Driver != "" && v.Driver != "local") || len(v.DriverOpts) > 0 {
			out = append(out, fmt.Sprintf("volumes.%s: driver/driver_opts (volumes are the workspace's own directories; a bind mount says where else)", n))
		}
	}
	if len(p.Secrets) > 0 {
		out = append(out, "secrets (no secrets store)")
	}
	if len(p.Configs) > 0 {
		out = append(out, "configs (no configs store)")
	}
	return out
}

// service makes s Cove's; the second result names what it refuses.
func service(o Options, s types.ServiceConfig) (Service, []string) {
	var refused []string
	say := func(f string, a ...any) {
		refused = append(refused, fmt.Sprintf("service %s: ", s.Name)+fmt.Sprintf(f, a...))
	}
	out := Service{
		Name: s.Name, Image: s.Image, User: s.User, WorkingDir: s.WorkingDir, Hostname: s.Hostname,
		Restart: s.Restart, CapDrop: s.CapDrop,
	}
	// types.ShellCommand is nil when unset (the image's stays) and empty,
	// not nil, for [] or "" (Compose resets the image's to nothing).
	out.Entrypoint = shellCommand(s.Entrypoint)
	out.Command = shellCommand(s.Command)
	if s.StopGracePeriod != nil {
		out.StopGrace = int(time.Duration(*s.StopGracePeriod).Seconds())
	}
	if sc := s.GetScale(); sc != 1 {
		say("scale %d (one container per service)", sc)
	}
	switch s.PullPolicy {
	case "", types.PullPolicyMissing, types.PullPolicyIfNotPresent, types.PullPolicyBuild:
	default:
		say("pull_policy %s (cove pulls what is missing)", s.PullPolicy)
	}
	switch s.Restart {
	case "", "no", "always", "unless-stopped", "on-failure":
	default:
		if !strings.HasPrefix(s.Restart, "on-failure:") {
			say("restart %s", s.Restart)
		}
	}
	networkMode(s, say)
	build(o, s, &out, say)
	env(o, s, &out, say)
	mounts(o, s, &out, say)
	ports(s, &out, say)
	for _, n := range slices.Sorted(maps.Keys(s.Networks)) {
		if nc := s.Networks[n]; nc != nil {
			if nc.Ipv4Address != "" || nc.Ipv6Address != "" || nc.MacAddress != "" || len(nc.LinkLocalIPs) > 0 || nc.DriverOpts != nil {
				say("networks.%s: addresses (the services share one network namespace, the workspace's)", n)
			}
			out.Aliases = append(out.Aliases, nc.Aliases...)
		}
	}
	for _, h := range s.ExtraHosts.AsList(":") {
		name, ip, ok := strings.Cut(h, ":")
		if ok {
			out.ExtraHosts = append(out.ExtraHosts, [2]string{name, ip})
		}
	}
	for _, d := range slices.Sorted(maps.Keys(s.DependsOn)) {
		dep := s.DependsOn[d]
		out.DependsOn = append(out.DependsOn, Dependency{Service: d, Condition: dep.Condition, Required: dep.Required})
	}
	if hc := s.HealthCheck; hc != nil && !hc.Disable && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
		out.Health = health(hc)
	}
	return out, refused
}

// networkMode takes network_mode: service:NAME, which the devcontainer
// templates give the workspace's service to reach the database on
// localhost: a workspace's services share one network namespace already.
// Any other mode (host, none, container:…) is refused.
func networkMode(s types.ServiceConfig, say func(string, ...any)) {
	if m := s.NetworkMode; m != "" && !strings.HasPrefix(m, types.ServicePrefix) {
		say("network_mode %s (a service shares the workspace's network only; service:NAME is what it has)", m)
	}
}

// shellCommand is c as Service has it: nil for unset, empty for an
// explicit [] or "".
func shellCommand(c types.ShellCommand) []string {
	if c == nil {
		return nil
	}
	return append([]string{}, c...)
}

// build checks and records s's build: its context and Dockerfile in the
// project unless trusted; what Cove's builder does not do refused.
func build(o Options, s types.ServiceConfig, out *Service, say func(string, ...any)) {
	b := s.Build
	if b == nil {
		return
	}
	ctx := b.Context
	if !filepath.IsAbs(ctx) {
		ctx = filepath.Join(filepath.Dir(o.Files[0]), ctx)
	}
	if strings.Contains(b.Context, "://") || strings.HasPrefix(b.Context, "git@") {
		say("build.context %s (a remote context; cove builds from the project's files)", b.Context)
		return
	}
	if err := inside(o, ctx, "build.context"); err != nil {
		say("%v", err)
		return
	}
	df := b.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	if !filepath.IsAbs(df) {
		df = filepath.Join(ctx, df)
	}
	if err := inside(o, df, "build.dockerfile"); err != nil {
		say("%v", err)
		return
	}
	for k, v := range map[string]bool{
		"build.dockerfile_inline": b.DockerfileInline != "", "build.ssh": len(b.SSH) > 0, "build.secrets": len(b.Secrets) > 0,
		"build.privileged": b.Privileged, "build.entitlements": len(b.Entitlements) > 0, "build.network": b.Network != "" && b.Network != "default",
		"build.additional_contexts": len(b.AdditionalContexts) > 0, "build.platforms": len(b.Platforms) > 0,
	} {
		if v {
			say("%s (not supported by cove build)", k)
		}
	}
	out.Build = &Build{Context: ctx, Dockerfile: df, Target: b.Target, Args: map[string]string{}}
	for k, v := range b.Args {
		if v != nil {
			out.Build.Args[k] = *v
		}
	}
}

// health is hc as Cove runs it, times in seconds (Compose's defaults:
// 30s interval, 30s timeout, 3 retries).
func health(hc *types.HealthCheckConfig) *Health {
	h := &Health{Interval: 30, Timeout: 30, Retries: 3}
	switch hc.Test[0] {
	case "CMD":
		h.Test = slices.Clone(hc.Test[1:])
	case "CMD-SHELL":
		h.Test = []string{"/bin/sh", "-c", strings.Join(hc.Test[1:], " ")}
	default:
		h.Test = []string{"/bin/sh", "-c", strings.Join(hc.Test, " ")}
	}
	if hc.Interval != nil {
		h.Interval = time.Duration(*hc.Interval).Seconds()
	}
	if hc.Timeout != nil {
		h.Timeout = time.Duration(*hc.Timeout).Seconds()
	}
	if hc.StartPeriod != nil {
		h.StartPeriod = time.Duration(*hc.StartPeriod).Seconds()
	}
	if hc.Retries != nil {
		h.Retries = int(*hc.Retries)
	}
	return h
}

// env is s's environment: env_file (in the project unless trusted), then
// environment over it, as Compose resolves it.
func env(o Options, s types.ServiceConfig, out *Service, say func(string, ...any)) {
	for _, f := range s.EnvFiles {
		if err := inside(o, f.Path, "env_file"); err != nil {
			say("%v", err)
			return
		}
	}
	p := types.Project{Services: types.Services{s.Name: s}, Environment: types.Mapping{}}
	r, err := p.WithServicesEnvironmentResolved(false)
	if err != nil {
		say("env_file: %v", err)
		return
	}
	e := r.Services[s.Name].Environment
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if v := e[k]; v != nil {
			out.Env = append(out.Env, k+"="+*v)
		}
	}
}

// mounts sorts s's volumes into binds (in the project unless trusted),
// named volumes and tmpfs.
func mounts(o Options, s types.ServiceConfig, out *Service, say func(string, ...any)) {
	for _, v := range s.Volumes {
		switch v.Type {
		case types.VolumeTypeBind:
			src := v.Source
			if !filepath.IsAbs(src) {
				src = filepath.Join(filepath.Dir(o.Files[0]), src)
			}
			if err := inside(o, src, "volumes: bind of"); err != nil {
				if rel, ok := above(o.Project, src); ok {
					// The templates' ../..:/workspaces, untrusted: the
					// project where it would be, none of its siblings.
					t := path.Join(v.Target, filepath.ToSlash(rel))
					out.Binds = append(out.Binds, Bind{Source: o.Project, Target: t, ReadOnly: v.ReadOnly})
					out.Notes = append(out.Notes, fmt.Sprintf("service %s: volumes %s:%s binds the project's parent: only the project is bound, at %s (cove up --trust binds the parent as written)", s.Name, v.Source, v.Target, t))
					continue
				}
				say("%v", err)
				continue
			}
			if v.Bind != nil && v.Bind.Propagation != "" && v.Bind.Propagation != "rprivate" {
				say("volumes %s: bind propagation %s", v.Target, v.Bind.Propagation)
			}
			out.Binds = append(out.Binds, Bind{Source: src, Target: v.Target, ReadOnly: v.ReadOnly})
		case types.VolumeTypeVolume:
			if v.Source == "" {
				// An anonymous volume: one of the service's own.
				out.Volumes = append(out.Volumes, Volume{Name: "anon-" + s.Name + strings.ReplaceAll(v.Target, "/", "-"), Target: v.Target, ReadOnly: v.ReadOnly, NoCopy: v.Volume != nil && v.Volume.NoCopy})
				continue
			}
			if v.Volume != nil && v.Volume.Subpath != "" {
				say("volumes %s: subpath", v.Target)
			}
			out.Volumes = append(out.Volumes, Volume{Name: v.Source, Target: v.Target, ReadOnly: v.ReadOnly, NoCopy: v.Volume != nil && v.Volume.NoCopy})
		case types.VolumeTypeTmpfs:
			out.Tmpfs = append(out.Tmpfs, v.Target)
		default:
			say("volumes %s: type %s", v.Target, v.Type)
		}
	}
	for _, t := range s.Tmpfs {
		out.Tmpfs = append(out.Tmpfs, strings.SplitN(t, ":", 2)[0])
	}
}

// above says whether src is the parent of dir (the project), and the
// project's name in it, symlinks resolved.
func above(dir, src string) (string, bool) {
	if !within(src, dir) {
		return "", false
	}
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false
	}
	sr, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", false
	}
	// Only the project's own parent: what the templates bind; a bind of
	// / or of a home is not narrowed but refused.
	rel, err := filepath.Rel(sr, d)
	if err != nil || rel == "." || rel == ".." || strings.Contains(rel, "/") {
		return "", false
	}
	return rel, true
}

// ports records s's ports (as -p's, forwarded from the host's loopback)
// and what it listens on (ports' container side, expose).
func ports(s types.ServiceConfig, out *Service, say func(string, ...any)) {
	for _, p := range s.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		out.Expose = append(out.Expose, fmt.Sprintf("%d/%s", p.Target, proto))
		if p.Published == "" {
			continue // Compose picks a host port; the workspace's network is reachable through cove's own forwarding
		}
		if p.Mode == "ingress" || p.Mode == "" || p.Mode == "host" {
			ip := p.HostIP
			spec := p.Published + ":" + strconv.Itoa(int(p.Target)) + "/" + proto
			if ip != "" {
				spec = ip + ":" + spec
			}
			out.Ports = append(out.Ports, spec)
		} else {
			say("ports %d: mode %s", p.Target, p.Mode)
		}
	}
	for _, e := range s.Expose {
		if !strings.Contains(e, "/") {
			e += "/tcp"
		}
		out.Expose = append(out.Expose, e)
	}
}

// checkPorts refuses two services that say they listen on one port: in
// the one network namespace they share, the second could not bind it.
func checkPorts(svcs []Service) error {
	who := map[string]string{}
	for _, s := range svcs {
		for _, e := range s.Expose {
			if other, ok := who[e]; ok && other != s.Name {
				return fmt.Errorf("services %s and %s both listen on port %s: a workspace's services share one network (each reaches the others as NAME:PORT on 127.0.0.1), so one port serves one service; change one (its command or environment) or drop it from runServices", other, s.Name, e)
			}
			who[e] = s.Name
		}
	}
	return nil
}
