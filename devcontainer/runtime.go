package devcontainer

import (
	"fmt"
	"strings"

	"github.com/cove-sh/cove/container"
)

// Runtime is what the file (and the image's metadata, with its Features')
// asks of the runtime beyond the image: capabilities, security options,
// an init, limits, the network, the host name, more mounts. What reaches
// outside the workspace was dropped when the file was read untrusted
// (Untrusted says what); what cove cannot do is in Notes.
type Runtime struct {
	CapAdd, CapDrop []string
	NoNewPrivileges bool
	NoSeccomp       bool
	Env             []string // K=V, from runArgs' -e
	Memory          string   // runArgs' --memory, as written
	CPUs            string
	PIDs            string
	Net             string // "host", "none", "private", or "" (not said)
	Hostname        string
	Mounts          []Mount
	// ExtraHosts are runArgs' --add-host entries, NAME and IP (or
	// host-gateway) each.
	ExtraHosts [][2]string
	ShmSize    string   // runArgs' --shm-size, as written
	Ulimits    []string // runArgs' --ulimit, NAME=SOFT[:HARD] as written
	// EnvFiles are runArgs' --env-file paths, as written: relative ones
	// are the project's.
	EnvFiles []string
	Devices  []string // runArgs' --device, as written
	Tmpfs    []string // runArgs' --tmpfs, PATH[:OPTIONS] as written
	// Entrypoints run, in order, before the workspace's server (the
	// metadata's entrypoint: a Feature starting its daemon).
	Entrypoints []string
	Notes       []string
}

// Runtime gathers capAdd, securityOpt, init and runArgs of the file and
// of the merged metadata (after MergeMetadata). An option cove refuses
// outright (--privileged, capability ALL) is an error.
func (c *Config) Runtime() (*Runtime, error) {
	rt := &Runtime{}
	if c == nil {
		return rt, nil
	}
	rt.CapAdd = append(append(rt.CapAdd, c.metaCapAdd...), c.CapAdd...)
	rt.Entrypoints = append(rt.Entrypoints, c.metaEntrypoints...)
	for _, o := range append(append([]string{}, c.metaSecurityOpt...), c.SecurityOpt...) {
		if err := rt.securityOpt(o); err != nil {
			return nil, fmt.Errorf("%s: securityOpt: %w", c.Path, err)
		}
	}
	if err := rt.runArgs(c.RunArgs); err != nil {
		return nil, fmt.Errorf("%s: runArgs: %w", c.Path, err)
	}
	for _, n := range append(append([]string{}, rt.CapAdd...), rt.CapDrop...) {
		if strings.EqualFold(strings.TrimPrefix(strings.ToUpper(n), "CAP_"), "ALL") {
			return nil, fmt.Errorf("%s: capAdd/runArgs: capability ALL: that is a privileged workspace, which cove does not run; name the capabilities the tools need", c.Path)
		}
	}
	return rt, nil
}

func (rt *Runtime) securityOpt(o string) error {
	switch k, v, _ := strings.Cut(o, "="); {
	case o == "no-new-privileges" || o == "no-new-privileges=true" || o == "no-new-privileges:true":
		rt.NoNewPrivileges = true
	case o == "no-new-privileges=false" || o == "no-new-privileges:false":
	case k == "seccomp" && v == "unconfined":
		rt.NoSeccomp = true
	case k == "apparmor" || k == "label":
		rt.Notes = append(rt.Notes, fmt.Sprintf("securityOpt %s: cove uses no AppArmor or SELinux profile; nothing to change", o))
	default:
		return fmt.Errorf("%q: cove knows no-new-privileges and seccomp=unconfined (a seccomp profile file is not supported: cove's filter is Docker's default profile); remove it, or use seccomp=unconfined to run without the filter", o)
	}
	return nil
}

// runArgs maps the docker run options cove has an equivalent for; the
// rest are named in Notes, and --privileged is refused.
func (rt *Runtime) runArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, val, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") && len(a) > 2 {
			// -eK=V, -m512m: the short form with its value attached.
			switch a[:2] {
			case "-e", "-m", "-v", "-h":
				flag, val, hasVal = a[:2], a[2:], true
			}
		}
		value := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) {
				return "", fmt.Errorf("%s wants a value", flag)
			}
			i++
			return args[i], nil
		}
		switch {
		case runArgTakesValue[flag]:
			v, err := value()
			if err != nil {
				return err
			}
			if err := rt.runArg(flag, v); err != nil {
				return err
			}
		case flag == "--init":
			// cove's own init is PID 1 in every workspace: it reaps and
			// forwards signals, what --init adds to Docker's.
		case flag == "--rm" || flag == "-it" || flag == "-t" || flag == "-i" || flag == "--interactive" || flag == "--tty" || flag == "-d" || flag == "--detach":
		case flag == "--privileged":
			return fmt.Errorf("--privileged: cove does not run privileged workspaces (every capability and device of the host, and no filter); name the capabilities needed with --cap-add")
		default:
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s is not supported by cove; it is ignored", a))
		}
	}
	return nil
}

// runArgTakesValue are the docker run options read with a value (the
// next argument, or after =).
var runArgTakesValue = map[string]bool{
	"--cap-add": true, "--cap-drop": true, "-e": true, "--env": true, "--security-opt": true, "-m": true, "--memory": true,
	"--cpus": true, "--pids-limit": true, "--network": true, "--net": true, "--hostname": true, "-h": true, "-v": true,
	"--volume": true, "--mount": true, "--name": true, "-u": true, "--user": true, "--add-host": true, "--device": true,
	"--ulimit": true, "--shm-size": true, "--label": true, "-l": true, "--runtime": true, "--gpus": true, "--userns": true,
	"--ipc": true, "--pid": true, "--workdir": true, "-w": true, "--entrypoint": true, "--env-file": true, "--tmpfs": true,
}

// runArgInside are the docker run options whose effect stays inside the
// workspace (an environment variable, a host name, the size of its
// /dev/shm, what cove does anyway): an untrusted file has them, as it has
// containerEnv. The rest (capabilities, security options, host paths,
// the host's network, a host file read, limits the host may be unable to
// enforce) wait for trust.
var runArgInside = map[string]bool{
	"-e": true, "--env": true, "--init": true, "--hostname": true, "-h": true,
	"--shm-size": true, "--tmpfs": true, "--name": true, "--label": true, "-l": true,
	"--rm": true, "-it": true, "-t": true, "-i": true, "--interactive": true, "--tty": true, "-d": true, "--detach": true,
}

// splitRunArgs parts runArgs into the options whose effect stays inside
// the workspace and the others, each option with its value.
func splitRunArgs(args []string) (inside, outside []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		flag, _, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "--") && len(a) > 2 {
			switch a[:2] {
			case "-e", "-m", "-v", "-h":
				flag, hasVal = a[:2], true
			}
		}
		group := []string{a}
		if runArgTakesValue[flag] && !hasVal && i+1 < len(args) {
			i++
			group = append(group, args[i])
		}
		if runArgInside[flag] && (flag != "-e" && flag != "--env" || strings.Contains(group[len(group)-1], "=")) {
			inside = append(inside, group...)
		} else {
			outside = append(outside, group...)
		}
	}
	return inside, outside
}

func (rt *Runtime) runArg(flag, v string) error {
	switch flag {
	case "--cap-add":
		rt.CapAdd = append(rt.CapAdd, strings.Split(v, ",")...)
	case "--cap-drop":
		rt.CapDrop = append(rt.CapDrop, strings.Split(v, ",")...)
	case "-e", "--env":
		if !strings.Contains(v, "=") {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s %s: a variable taken from the host's environment is not passed; write %s=VALUE (or ${localEnv:%s})", flag, v, v, v))
			return nil
		}
		rt.Env = append(rt.Env, v)
	case "--security-opt":
		return rt.securityOpt(v)
	case "-m", "--memory":
		rt.Memory = v
	case "--cpus":
		rt.CPUs = v
	case "--pids-limit":
		rt.PIDs = v
	case "--network", "--net":
		switch v {
		case "host", "none":
			rt.Net = v
		case "bridge", "default", "private", "pasta", "slirp4netns":
			rt.Net = "private"
		default:
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s %s: cove has the networks private (its default), host and none; the workspace gets its default", flag, v))
		}
	case "--hostname", "-h":
		rt.Hostname = v
	case "--add-host":
		name, ip, err := container.ParseHostEntry(v)
		if err != nil {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs --add-host %s: not NAME:IP (or NAME:host-gateway); it is ignored", v))
			return nil
		}
		rt.ExtraHosts = append(rt.ExtraHosts, [2]string{name, ip})
	case "--shm-size":
		rt.ShmSize = v
	case "--userns":
		if v != "keep-id" {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs --userns %s is not supported by cove; it is ignored (cove maps the project's files to the workspace's user itself)", v))
		}
		// keep-id, podman's way to have the project's files be the
		// user's inside, is what cove does for a user who is not root.
	case "--ulimit":
		rt.Ulimits = append(rt.Ulimits, v)
	case "--env-file":
		rt.EnvFiles = append(rt.EnvFiles, v)
	case "--device":
		rt.Devices = append(rt.Devices, v)
	case "--tmpfs":
		rt.Tmpfs = append(rt.Tmpfs, v)
	case "-v", "--volume":
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s %s: not SOURCE:TARGET[:ro]; it is ignored", flag, v))
			return nil
		}
		m := Mount{Type: "volume", Source: parts[0], Target: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"}
		if strings.HasPrefix(m.Source, "/") {
			m.Type = "bind"
		}
		if err := m.check(); err != nil {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s %s: %v; it is ignored", flag, v, err))
			return nil
		}
		rt.Mounts = append(rt.Mounts, m)
	case "--mount":
		m, err := ParseMount(v)
		if err != nil {
			rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs --mount %s: %v; it is ignored", v, err))
			return nil
		}
		rt.Mounts = append(rt.Mounts, m)
	default:
		rt.Notes = append(rt.Notes, fmt.Sprintf("runArgs %s %s is not supported by cove; it is ignored", flag, v))
	}
	return nil
}
