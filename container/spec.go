package container

import (
	"fmt"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Spec is everything the container's init needs. The launcher sends it to
// init as JSON on an inherited pipe, never in argv or the environment.
type Spec struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Hostname string `json:"hostname"`

	// Lower is the flattened image (read-only, shared). Upper, Work and
	// Merged are the container's own overlay directories, under Dir.
	Lower string `json:"lower"`
	// LowerBase, if set, is the directory init starts in, so that Lower
	// may name its directories (a:b:c, top first) relative to it:
	// overlayfs takes its options in one page, and short relative names
	// let a build stack a hundred layers where absolute ones allow forty.
	LowerBase string `json:"lower_base,omitempty"`
	Upper     string `json:"upper"`
	Work      string `json:"work"`
	Merged    string `json:"merged"`
	// Copy is set where overlayfs is missing (Start sets it, or a caller
	// to force it): Merged is then a private copy of Lower, bound as root.
	Copy bool `json:"copy,omitempty"`
	// Volatile says the upper layer is thrown away with the container
	// (--rm): overlayfs's volatile option, so that the unmount when init
	// exits does not sync the host's whole file system under Upper
	// (ovl_sync_fs), which a loaded host pays for in hundreds of
	// milliseconds on every run --rm. Never for a container that is kept.
	Volatile bool `json:"volatile,omitempty"`

	// Binary is the host path of the static program that runs as init
	// (and the host-side helpers): cove-init, or cove itself. It is bound
	// read-only at /.cove/init.
	Binary string `json:"binary"`
	// Tools is the host path of the static program bound read-only at
	// /.cove/cove, for the workload's use: cove-inside, a workspace's IDE
	// server and MCP relay. "" is Binary.
	Tools      string `json:"tools,omitempty"`
	ResolvConf string `json:"resolv_conf"` // host path of the container's resolv.conf
	Hosts      string `json:"hosts"`       // host path of the container's hosts file
	// HostnameFile is the host path of the container's /etc/hostname
	// ("": the image's is left).
	HostnameFile string `json:"hostname_file,omitempty"`

	// Control is the host path of the socket cove exec talks to init on.
	Control string `json:"-"`
	Binds   []Bind `json:"binds,omitempty"`
	// Restart says whether init starts the workload again when it exits.
	Restart Restart `json:"restart,omitempty"`
	Net     string  `json:"net"` // NetPrivate, NetHost, NetNone or NetJoin
	// JoinPid, with NetJoin, is the host pid of the init whose network
	// (and, with UserNS, user) namespace the container joins; the
	// caller checks it is the container it means (State.Status).
	JoinPid int `json:"-"`
	// NetLate, with NetPrivate and Ports, starts the workload (and
	// returns from Start) without waiting for pasta, as a start without
	// ports always does (see Tap): for a workspace's IDE server, which
	// serves a Unix socket and starts shells only when asked. Should pasta
	// fail (a port it cannot bind), the launcher stops the container and
	// says why; without NetLate the start fails.
	NetLate bool `json:"netLate,omitempty"`
	// Ports are forwarded from the host into the container (NetPrivate).
	Ports []Port `json:"ports,omitempty"`
	// Blocked are the host's own addresses (NetPrivate), unreachable from
	// inside: Start fills them in.
	Blocked []string `json:"blocked,omitempty"`
	// Tap is the container's interface (NetPrivate): Start fills it in.
	Tap    *Tap `json:"tap,omitempty"`
	UserNS bool `json:"userns,omitempty"`
	// KeepID, with UserNS, makes the launching user's own uid and gid
	// KeepID's inside instead of root's (podman's --userns=keep-id): the
	// user's files (the image as a rootless store holds it, a project
	// bound in) are that user's inside, and root is the first of the
	// user's subordinate ids, the rest following around the user's ids
	// (the same host ids as without it, so the layer is removed as
	// ever). It needs newuidmap and subordinate ranges (IDMap.Ranged);
	// Start refuses it without them.
	KeepID *KeepID `json:"keep_id,omitempty"`
	// NoSeccomp leaves out the seccomp filter (see seccomp.go), for
	// containers in the container, perf, bpf tools.
	NoSeccomp bool `json:"no_seccomp,omitempty"`
	// CapAdd and CapDrop change the capabilities the processes may have
	// (Docker's default set less MKNOD; see keptCaps), by name as
	// Docker's --cap-add and --cap-drop take them (ParseCap).
	CapAdd  []string `json:"cap_add,omitempty"`
	CapDrop []string `json:"cap_drop,omitempty"`
	// NoNewPrivileges sets no_new_privs for every process: setuid
	// binaries and file capabilities give nothing more.
	NoNewPrivileges bool `json:"no_new_privileges,omitempty"`
	// Tmpfs are file systems in memory, mounted after the binds.
	Tmpfs []Tmpfs `json:"tmpfs,omitempty"`
	// Devices are host devices bound into /dev (ParseDevice).
	Devices []Device `json:"devices,omitempty"`
	// ShmSize is the size of /dev/shm in bytes (it is memory, and counts
	// against the memory limit); 0 gives 64 MiB, as Docker's.
	ShmSize int64 `json:"shm_size,omitempty"`
	// Ulimits are the resource limits the processes start with, as
	// docker run --ulimit sets them (ParseUlimit). A hard limit above the
	// caller's needs CAP_SYS_RESOURCE on the host: Start fails without it.
	Ulimits []Ulimit `json:"ulimits,omitempty"`
	// KeepTmp leaves the image's /tmp as it is instead of mounting a fresh
	// tmpfs there: a build's RUN keeps what it writes in /tmp in its
	// layer, as docker build does.
	KeepTmp bool `json:"keep_tmp,omitempty"`
	// Cgroups are the hierarchies init shows read-only at /sys/fs/cgroup,
	// rooted at the container's own cgroup (a cgroup namespace), so that
	// runtimes that size themselves from the memory limit (the JVM, Node,
	// GOMEMLIMIT tools) find it: "cgroup2" on a v2 host, or each v1
	// hierarchy's controllers ("memory", "cpu,cpuacct"). Start fills it in.
	Cgroups []string `json:"cgroups,omitempty"`
	Process Process  `json:"process"`
}

// KeepID is the user and group a rootless container's launching user is
// inside (Spec.KeepID).
type KeepID struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// Bind is a host path mounted into the container.
type Bind struct {
	Source   string `json:"source"`
	Target   string `json:"target"` // absolute, resolved inside the container's root
	ReadOnly bool   `json:"readonly,omitempty"`
	// MapOwner makes the source's owner root inside (an ID-mapped mount):
	// for root running containers on a user's files, which stay theirs.
	MapOwner bool `json:"map_owner,omitempty"`
	// OwnerUID and OwnerGID are the ids the source's owner has inside
	// with MapOwner: root (0) by default, or a workspace's remoteUser.
	OwnerUID int `json:"owner_uid,omitempty"`
	OwnerGID int `json:"owner_gid,omitempty"`
	// Volume says the source is a volume of cove's (a Compose named
	// volume): its files have the container's ids, never mapped. With
	// CopyUp, a new one, if empty, first gets what the image has at
	// Target (owners, modes, xattrs and times kept), as Docker fills a
	// new named volume.
	Volume bool `json:"volume,omitempty"`
	CopyUp bool `json:"copy_up,omitempty"`
	// Beneath, when set, is a directory a workspace can write (a
	// project) and Source a path relative to it: Source is opened
	// beneath it following no symlink (openat2 RESOLVE_BENEATH and
	// RESOLVE_NO_SYMLINKS) and the bind made from that handle, so that
	// no symlink the workspace put on the way, now or in a race with
	// the start, gives the container a host path outside it.
	Beneath string `json:"beneath,omitempty"`
}

// tools is the program bound at /.cove/cove (Tools, else Binary).
func (s *Spec) tools() string {
	if s.Tools != "" {
		return s.Tools
	}
	return s.Binary
}

// Restart is what init does when the workload exits (a Compose
// service's restart policy): start it again, in the same container,
// after a backoff (100 ms doubling to 30 s, back to 100 ms after a run
// of 10 s), unless the container is being stopped (init got SIGTERM or
// SIGINT). The zero value: the container ends with its workload.
type Restart struct {
	Always    bool `json:"always,omitempty"`     // always, unless-stopped
	OnFailure bool `json:"on_failure,omitempty"` // on a non-zero exit
	Max       int  `json:"max,omitempty"`        // with OnFailure, at most this many restarts (0: no limit)
}

// Again says whether a workload that exited with code, restarted n
// times before, starts again.
func (r Restart) Again(code, n int) bool {
	switch {
	case r.Always:
		return true
	case r.OnFailure:
		return code != 0 && (r.Max == 0 || n < r.Max)
	}
	return false
}

// Delay is the wait before a restart, fast the quick exits in a row
// before it.
func (r Restart) Delay(fast int) time.Duration {
	d := 100 * time.Millisecond
	for range min(fast, 9) {
		d *= 2
	}
	return min(d, 30*time.Second)
}

// Process is the workload.
type Process struct {
	Args     []string `json:"args"`
	Env      []string `json:"env"`
	Cwd      string   `json:"cwd"`
	User     string   `json:"user"` // name or uid, optionally :group or :gid, resolved inside
	Terminal bool     `json:"terminal,omitempty"`
}

// ParseBind parses -v HOST:CTR[:ro|rw].
func ParseBind(s string) (Bind, error) {
	parts := strings.Split(s, ":")
	b := Bind{}
	switch len(parts) {
	case 3:
		switch parts[2] {
		case "ro":
			b.ReadOnly = true
		case "rw":
		default:
			return b, fmt.Errorf("bind %q: option %q: want ro or rw", s, parts[2])
		}
		fallthrough
	case 2:
		b.Source, b.Target = parts[0], parts[1]
	default:
		return b, fmt.Errorf("bind %q: want HOST:CONTAINER[:ro]", s)
	}
	if b.Source == "" || !path.IsAbs(b.Target) {
		return b, fmt.Errorf("bind %q: want HOST:CONTAINER[:ro] with an absolute container path", s)
	}
	b.Target = path.Clean(b.Target)
	if b.Target == "/" {
		return b, fmt.Errorf("bind %q: cannot bind over the container's root", s)
	}
	return b, nil
}

// ProcessFromImage applies the image config's rules: args replace Cmd
// (Entrypoint stays), env adds to and overrides Env, cwd and user override
// WorkingDir and User when set.
func ProcessFromImage(cfg v1.Config, args, env []string, cwd, user string) (Process, error) {
	p := Process{Cwd: cfg.WorkingDir, User: cfg.User}
	cmd := cfg.Cmd
	if len(args) > 0 {
		cmd = args
	}
	p.Args = append(append([]string{}, cfg.Entrypoint...), cmd...)
	if len(p.Args) == 0 {
		return p, fmt.Errorf("the image has no command: give one")
	}
	p.Env = mergeEnv(cfg.Env, env)
	if !hasEnv(p.Env, "PATH") {
		p.Env = append(p.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	if cwd != "" {
		p.Cwd = cwd
	}
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	if !path.IsAbs(p.Cwd) {
		return p, fmt.Errorf("working directory %q is not absolute", p.Cwd)
	}
	if user != "" {
		p.User = user
	}
	return p, nil
}

func mergeEnv(base, over []string) []string {
	out := append([]string{}, base...)
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		replaced := false
		for i, e := range out {
			if ek, _, _ := strings.Cut(e, "="); ek == k {
				out[i], replaced = kv, true
			}
		}
		if !replaced {
			out = append(out, kv)
		}
	}
	return out
}

func hasEnv(env []string, key string) bool {
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == key {
			return true
		}
	}
	return false
}

func getEnv(env []string, key string) string {
	for _, e := range env {
		if k, v, _ := strings.Cut(e, "="); k == key {
			return v
		}
	}
	return ""
}
