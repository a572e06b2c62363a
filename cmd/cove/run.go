package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

func limitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "memory", Usage: "at most `SIZE` of memory, e.g. 512m or 2g (swap off)"},
		&cli.Int64Flag{Name: "pids", Usage: "at most `N` processes and threads"},
		&cli.Float64Flag{Name: "cpus", Usage: "at most `F` CPUs of time"},
		&cli.StringFlag{Name: "net", Aliases: []string{"network"}, Value: container.NetPrivate, Usage: "the network, `MODE`: private, a network of its own through pasta (apt install passt): outbound TCP, UDP and DNS, nothing on your loopback or your own addresses, only -p ports in; " +
			"host: YOUR network, so every service on your loopback (databases, dev servers, Docker's and other APIs bound to 127.0.0.1) is reachable from inside; none: loopback only"},
		&cli.StringSliceFlag{Name: "security-opt", Usage: "`seccomp=unconfined`: without the seccomp filter (for containers, perf or bpf tools inside)"},
	}
}

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command in a new container",
		ArgsUsage: "REF [CMD [ARG...]]",
		Description: `The exit status is the command's (128+signal when it was killed); 127 when
the command is not found and 126 when it cannot be run (as podman and Docker say); 125
when cove could not start the container.`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "rm", Usage: "remove the container (and what it wrote) when it exits"},
			&cli.StringFlag{Name: "name", Usage: "the container's `NAME` (default: generated)"},
			&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "run in the background and print the name"},
			&cli.BoolFlag{Name: "tty", Aliases: []string{"t"}, Usage: "give the command a terminal"},
			&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "keep standard input open"},
			&cli.StringSliceFlag{Name: "volume", Aliases: []string{"v"}, Usage: "bind `HOST:CTR[:ro]`"},
			&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "set `K=V` (K alone takes it from here)"},
			&cli.StringFlag{Name: "workdir", Aliases: []string{"w"}, Usage: "working `DIR` inside"},
			&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "`UID[:GID]` or name[:group] inside"},
			&cli.StringFlag{Name: "hostname", Usage: "host `NAME` inside (default: the container name)"},
			&cli.StringFlag{Name: "pull", Value: "missing", Usage: "`POLICY`: missing, always or never"},
			&cli.StringFlag{Name: "shm-size", Usage: "the `SIZE` of /dev/shm (default 64m; it counts as memory)"},
			&cli.StringSliceFlag{Name: "ulimit", Usage: "a resource limit, `NAME=SOFT[:HARD]` (nofile=1024:4096; -1 is none)"},
			&cli.StringSliceFlag{Name: "add-host", Usage: "add `NAME:IP` to /etc/hosts"},
			&cli.StringSliceFlag{Name: "tmpfs", Usage: "an empty file system in memory at `PATH[:OPTIONS]` (size=64m,mode=1777,exec)"},
			&cli.StringSliceFlag{Name: "device", Usage: "give the container a device of this machine, `HOST[:CONTAINER]` (as /dev/fuse)"},
			&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "forward `PORTS` from the host: [ADDR:]HOSTPORT:CONTAINERPORT[/udp] (on 127.0.0.1 unless ADDR is given; --net private)"},
		}, limitFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 {
				return fmt.Errorf("run takes an image reference (see cove run --help)")
			}
			code, err := runContainer(c)
			var se *container.StartError
			if errors.As(err, &se) && se.Code != 0 {
				return &exitError{code: se.Code, err: err} // as podman and Docker: 127, 126
			}
			if err != nil {
				return &exitError{code: 125, err: err}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}

// limitsFrom reads limitFlags. What is not given is zero (Net ""): a
// workspace's devcontainer.json may say it.
func limitsFrom(c *cli.Context) (container.Limits, workspace.Confinement, error) {
	mem, err := container.ParseSize(c.String("memory"))
	if err != nil {
		return container.Limits{}, workspace.Confinement{}, fmt.Errorf("--memory: %w", err)
	}
	var conf workspace.Confinement
	if c.IsSet("net") {
		conf.Net = c.String("net")
	}
	if conf.Net != "" && conf.Net != container.NetPrivate && conf.Net != container.NetHost && conf.Net != container.NetNone {
		return container.Limits{}, workspace.Confinement{}, fmt.Errorf("--net %q: use private, host or none", conf.Net)
	}
	for _, opt := range c.StringSlice("security-opt") {
		if opt != "seccomp=unconfined" {
			return container.Limits{}, workspace.Confinement{}, fmt.Errorf("--security-opt %q: the one cove knows is seccomp=unconfined", opt)
		}
		conf.NoSeccomp = true
	}
	return container.Limits{Memory: mem, PIDs: c.Int64("pids"), CPUs: c.Float64("cpus")}, conf, nil
}

// coveBinary is the static binary bound into containers as their init.
func coveBinary() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(exe)
}

func runContainer(c *cli.Context) (int, error) {
	e, err := globalEnv(c)
	if err != nil {
		return 0, err
	}
	limits, conf, err := limitsFrom(c)
	if err != nil {
		return 0, err
	}
	policy, err := image.ParsePolicy(c.String("pull"))
	if err != nil {
		return 0, err
	}
	l := workspace.Launch{
		Ref: c.Args().First(), Policy: policy, Name: c.String("name"), Hostname: c.String("hostname"),
		Args: c.Args().Tail(), Env: envFlags(c), Workdir: c.String("workdir"), User: c.String("user"),
		Limits: limits, Net: conf.Net, NoSeccomp: conf.NoSeccomp, Remove: c.Bool("rm"), Detach: c.Bool("detach"),
		TTY: c.Bool("tty"), Interactive: c.Bool("interactive"),
	}
	for _, v := range c.StringSlice("publish") {
		p, err := container.ParsePort(v)
		if err != nil {
			return 0, fmt.Errorf("-p: %w", err)
		}
		l.Ports = append(l.Ports, p)
	}
	if l.ShmSize, err = container.ParseSize(c.String("shm-size")); err != nil {
		return 0, fmt.Errorf("--shm-size: %w", err)
	}
	for _, v := range c.StringSlice("ulimit") {
		u, err := container.ParseUlimit(v)
		if err != nil {
			return 0, fmt.Errorf("--%w", err)
		}
		l.Ulimits = append(l.Ulimits, u)
	}
	for _, v := range c.StringSlice("add-host") {
		name, ip, err := container.ParseHostEntry(v)
		if err == nil && ip == "host-gateway" {
			// Only the host's own network reaches this machine's services.
			ip = "127.0.0.1"
			if conf.Net != container.NetHost {
				err = fmt.Errorf("%s:host-gateway: a private network does not reach this machine's own services; --net host shares its network", name)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("--add-host: %w", err)
		}
		l.ExtraHosts = append(l.ExtraHosts, [2]string{name, ip})
	}
	for _, v := range c.StringSlice("tmpfs") {
		t, err := container.ParseTmpfs(v)
		if err != nil {
			return 0, fmt.Errorf("--%w", err)
		}
		l.Tmpfs = append(l.Tmpfs, t)
	}
	for _, v := range c.StringSlice("device") {
		d, err := container.ParseDevice(v)
		if err != nil {
			return 0, fmt.Errorf("--%w", err)
		}
		l.Devices = append(l.Devices, d)
	}
	for _, v := range c.StringSlice("volume") {
		b, err := container.ParseBind(v)
		if err != nil {
			return 0, err
		}
		if b.Source, err = filepath.Abs(b.Source); err != nil {
			return 0, err
		}
		l.Binds = append(l.Binds, b)
	}
	return e.local(c).Run(c.Context, l)
}

func envFlags(c *cli.Context) []string {
	var env []string
	for _, kv := range c.StringSlice("env") {
		if !strings.Contains(kv, "=") {
			v, ok := os.LookupEnv(kv)
			if !ok {
				continue // unset here: left out, as podman and Docker do
			}
			kv += "=" + v
		}
		env = append(env, kv)
	}
	return env
}
