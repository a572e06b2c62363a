package workspace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/image/progress"
	"github.com/cove-sh/cove/internal/apparmor"
	"github.com/cove-sh/cove/internal/userscope"
	"github.com/creack/pty"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/term"
)

// Launch is one container to start: what cove run's flags say, or what a
// workspace needs.
type Launch struct {
	Ref         string
	Policy      image.Policy
	Name        string // "" generates one
	Hostname    string // "" is the name
	Args, Env   []string
	Workdir     string
	User        string
	Binds       []container.Bind
	Limits      container.Limits
	Net         string
	JoinPid     int              // Net join: the init whose network it shares (a workspace's, for its Compose services)
	Ports       []container.Port // forwarded from the host (Net private)
	NetLate     bool             // Net private with Ports: the workload starts before pasta is up (container.Spec.NetLate)
	NoSeccomp   bool
	Remove      bool // --rm
	Detach      bool
	Quiet       bool // detached: do not print the name
	TTY         bool
	Interactive bool
	// Dir, if set, holds the container's own layer and is kept when it
	// stops (a workspace's installed packages survive); by default each
	// container gets a fresh one under DATA/containers.
	Dir string
	// Made is the digest of the image Dir's layer was made on, when it
	// was made from Ref: if Ref's name is gone (cove rmi while the
	// workspace was stopped, which keeps the image for it), that image
	// is used, not one pulled again.
	Made string
	// CapAdd and CapDrop change the capabilities (container.ParseCap
	// names); NoNewPrivileges sets no_new_privs (a workspace's
	// devcontainer.json: capAdd, securityOpt, runArgs).
	CapAdd, CapDrop []string
	NoNewPrivileges bool
	// KeepID, rootless, makes the user these ids inside instead of root
	// (container.Spec.KeepID): a workspace's non-root user. As root it
	// is not used (the ID-mapped bind does that part).
	KeepID *container.KeepID
	// ShmSize, Ulimits and ExtraHosts are docker run's --shm-size,
	// --ulimit and --add-host (a NAME and its IP, added to /etc/hosts).
	ShmSize    int64
	Ulimits    []container.Ulimit
	ExtraHosts [][2]string
	Devices    []container.Device // docker run's --device
	Tmpfs      []container.Tmpfs  // docker run's --tmpfs, devcontainer.json's tmpfs mounts
	// Prepare, if set, sees the image's config and root filesystem and
	// may change the process made from it and the launch (binds,
	// capabilities: a workspace's devcontainer.json with the image's
	// metadata) before anything starts; its error stops the launch.
	Prepare func(cfg *v1.ConfigFile, rootfs string, proc *container.Process, l *Launch) error
	// Warn, if set, says what the start warns of (nil: on Stderr): a
	// Compose workspace's containers say a host's warning once.
	Warn func(msg string)
	// Restart says whether the container's init starts the workload
	// again when it exits (a Compose service's restart policy).
	Restart container.Restart
}

// madeImage is the stored image a kept layer was made on (l.Made), when
// l.Ref no longer names it: its name removed (cove rmi while the
// workspace was stopped, which keeps the image for it), or pulled since
// as another image. The layer's files were made on that one; put on the
// new one, they would be mixed with it. nil: start on l.Ref as usual.
func (lo *Local) madeImage(store *image.Store, l Launch) *image.Image {
	cur, err := store.Get(l.Ref)
	if err == nil && cur.Digest.String() == l.Made {
		return nil
	}
	kept, kerr := store.Get(l.Made)
	if kerr != nil {
		return nil
	}
	if err == nil {
		fmt.Fprintf(lo.Stderr, "cove: note: %s names another image (%.19s) since this workspace was made on %.19s: it starts on the one it was made on (cove up --fresh starts it anew on the new one; what was installed in it goes)\n",
			l.Ref, cur.Digest.String(), l.Made)
	}
	return kept
}

// launching is one Run on its way: the state its steps share, held in one
// place (as go-containerregistry does) so that Run reads as the algorithm.
type launching struct {
	lo     *Local
	l      Launch // as Prepare and the binds' owners leave it
	store  *image.Store
	img    *image.Image
	states container.StateDir
	id     string
	name   string
	dir    string // the container's own layer, log and /etc files
	keep   bool   // dir is l.Dir, kept when the container goes
}

// Run starts l and, unless it is detached, waits for it and returns its
// exit status.
func (lo *Local) Run(ctx context.Context, l Launch) (int, error) {
	if l.Net == "" {
		l.Net = container.NetPrivate
	}
	r := &launching{lo: lo, l: l, states: lo.states()}
	unpin, err := r.holdImage(ctx)
	if err != nil {
		return 0, err
	}
	defer unpin()
	proc, err := r.process()
	if err != nil {
		return 0, err
	}
	if err := r.claimName(); err != nil {
		return 0, err
	}
	// Until the container is started and recorded (or has run and gone),
	// a failure takes back what was claimed for it.
	claimed := true
	defer func() {
		if claimed {
			r.unclaim(ctx)
		}
	}()
	spec, err := r.makeSpec(ctx, proc)
	if err != nil {
		return 0, err
	}

	stdio, restore := setupStdio(r.l.TTY, r.l.Interactive, lo.Stdout, lo.Stderr)
	defer restore()
	if r.l.Detach {
		log, err := r.detachOutput(stdio)
		if err != nil {
			return 0, err
		}
		defer log.Close()
	}
	sigs := make(chan os.Signal, 8)
	if !r.l.Detach {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
		defer signal.Stop(sigs)
	}
	ctr, err := r.start(ctx, spec, stdio)
	if err != nil {
		return 0, err
	}
	st, err := r.record(ctr)
	if err != nil {
		return 0, err
	}
	if r.l.Detach {
		claimed = false
		if !r.l.Quiet {
			fmt.Fprintln(lo.Stdout, r.name)
		}
		return 0, ctr.Release()
	}
	code, err := r.wait(ctx, ctr, st, stdio, restore, sigs)
	if err != nil {
		return 0, err
	}
	claimed = false
	return code, nil
}

// holdImage finds or pulls the image and holds it for the launch until the
// function it returns is called.
func (r *launching) holdImage(ctx context.Context) (unpin func(), err error) {
	r.store, err = r.lo.store()
	if err != nil {
		return nil, err
	}
	if r.l.Made != "" {
		r.img = r.lo.madeImage(r.store, r.l)
	}
	if r.img == nil {
		if err := r.pull(ctx); err != nil {
			return nil, err
		}
	}
	// The launch uses the image from now on, before the container's state
	// directory (which holds the use while it exists) is there: a pin of
	// its own meanwhile, so that no rmi or prune takes the image between
	// here and the start. One removed since the pull is pulled again.
	pin, err := r.lo.pinImage(ctx, r.store, r.img)
	if errors.Is(err, image.ErrNotFound) {
		if err = r.pull(ctx); err == nil {
			pin, err = r.lo.pinImage(ctx, r.store, r.img)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", r.l.Ref, err)
	}
	return pin, nil
}

// pull pulls l.Ref as its policy says, showing progress.
func (r *launching) pull(ctx context.Context) error {
	bars := progress.New(r.lo.Stderr, r.l.Ref, false)
	var err error
	r.img, err = image.Pull(ctx, r.store, r.l.Ref, image.WithPolicy(r.l.Policy), image.WithProgress(bars.Update))
	bars.Wait()
	return err
}

// process makes the container's process from the image's config and the
// launch, lets l.Prepare change both, and marks the binds whose owners
// must be mapped.
func (r *launching) process() (container.Process, error) {
	cfg, err := r.store.ConfigFile(r.img)
	if err != nil {
		return container.Process{}, fmt.Errorf("image config: %w", err)
	}
	proc, err := container.ProcessFromImage(cfg.Config, r.l.Args, r.l.Env, r.l.Workdir, r.l.User)
	if err != nil {
		return container.Process{}, err
	}
	proc.Terminal = r.l.TTY
	if r.l.Prepare != nil {
		if err := r.l.Prepare(cfg, r.img.RootFS, &proc, &r.l); err != nil {
			return container.Process{}, err
		}
	}
	for i, b := range r.l.Binds {
		if b.Volume || r.l.Dir != "" && strings.HasPrefix(b.Source, r.l.Dir+"/") {
			continue // the container's own files (a workspace's volumes), with its ids, as its layer
		}
		// Root working on a user's files: they stay the user's.
		if fi, err := os.Stat(b.Source); err == nil && os.Geteuid() == 0 && !b.MapOwner {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
				r.l.Binds[i].MapOwner = true
			}
		}
	}
	return proc, nil
}

// claimName picks the container's id, name and directory, and creates its
// state directory: after this, a failure must unclaim.
func (r *launching) claimName() error {
	r.id = randomID()
	r.name = r.l.Name
	if r.name == "" {
		r.name = "cove-" + r.id[:8]
	}
	if err := checkPorts(r.states, r.l.Net, r.l.Ports); err != nil {
		return err
	}
	if err := r.states.Create(r.name); err != nil {
		return err
	}
	r.dir, r.keep = r.l.Dir, r.l.Dir != ""
	if !r.keep {
		r.dir = filepath.Join(r.lo.Layout.Data, "containers", r.id)
	}
	return nil
}

// unclaim takes back what claimName and the container's use of the image
// hold: its state directory and, unless kept, its layer.
func (r *launching) unclaim(ctx context.Context) error {
	r.store.Release(r.states.Dir(r.name))
	r.states.Delete(r.name)
	if !r.keep {
		return r.lo.RemoveLayer(ctx, r.dir)
	}
	return nil
}

// makeSpec records the container's use of the image and makes its /etc
// files and the spec it starts from.
func (r *launching) makeSpec(ctx context.Context, proc container.Process) (*container.Spec, error) {
	l, name := &r.l, r.name
	// The container's use of the image is a reference to it, as its
	// names are: no rmi or prune deletes the root filesystem under it
	// while its state directory is there (running or stopped).
	if err := r.store.Use(ctx, r.img.Digest, r.states.Dir(name)); err != nil {
		return nil, fmt.Errorf("image %s: %w", l.Ref, err)
	}
	hostname := l.Hostname
	if hostname == "" {
		hostname = name
	}
	resolv, hosts, err := etcFiles(r.dir, hostname, l.Net, l.ExtraHosts)
	if err != nil {
		return nil, err
	}
	os.RemoveAll(filepath.Join(r.dir, "work")) // overlay's scratch space, stale after a crash
	bin, err := r.lo.binary()
	if err != nil {
		return nil, err
	}
	tools, err := r.lo.tools()
	if err != nil {
		return nil, err
	}
	spec := &container.Spec{
		ID: r.id, Name: name, Hostname: hostname,
		Lower: r.img.RootFS, Upper: filepath.Join(r.dir, "upper"), Work: filepath.Join(r.dir, "work"), Merged: filepath.Join(r.dir, "merged"),
		Binary: bin, Tools: tools, ResolvConf: resolv, Hosts: hosts, HostnameFile: filepath.Join(filepath.Dir(hosts), "hostname"),
		Binds: l.Binds, Net: l.Net, NetLate: l.NetLate, JoinPid: l.JoinPid, Ports: l.Ports, NoSeccomp: l.NoSeccomp, UserNS: os.Geteuid() != 0, Process: proc, Restart: l.Restart,
		CapAdd: l.CapAdd, CapDrop: l.CapDrop, NoNewPrivileges: l.NoNewPrivileges,
		ShmSize: l.ShmSize, Ulimits: r.lo.ulimits(l.Ulimits), Devices: l.Devices, Tmpfs: l.Tmpfs,
		Control: filepath.Join(r.states.Dir(name), "ctl.sock"),
		// A --rm container's layer is removed with it: nothing to sync.
		Volatile: l.Remove && !r.keep,
	}
	if spec.UserNS {
		spec.KeepID = l.KeepID
	}
	if spec.KeepID != nil {
		// An image whose files kept their owners shows right under
		// keep-id only from a copy with them moved (made once).
		if spec.Lower, err = r.store.KeepIDRootFS(ctx, r.img, spec.KeepID.UID, spec.KeepID.GID); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// detachOutput sends a detached container's output to a log file beside
// its files: nothing of ours may stay open in a container that outlives us.
// The caller closes what it returns once the container has started.
func (r *launching) detachOutput(stdio *runStdio) (io.Closer, error) {
	if r.l.TTY {
		return nil, fmt.Errorf("-d and -t do not go together: the terminal would have no one to talk to")
	}
	// Through a pipe and a helper of ours, never the file itself: a
	// host file's descriptor in the workload could be reopened
	// through /proc/PID/fd and changed (see container.StartLogHelper).
	bin, err := r.lo.binary()
	if err != nil {
		return nil, err
	}
	log, err := container.StartLogHelper(bin, filepath.Join(r.dir, "log"))
	if err != nil {
		return nil, err
	}
	stdio.Stdin, stdio.Stdout, stdio.Stderr = nil, log, log
	return log, nil
}

// start starts the container, saying why where the host's AppArmor
// refused it.
func (r *launching) start(ctx context.Context, spec *container.Spec, stdio *runStdio) (*container.Container, error) {
	if spec.UserNS {
		// A login session's cgroup is root's: a scope of the user's
		// systemd gives the containers' cgroups a place.
		if _, err := userscope.Enter(ctx, os.Getenv("XDG_RUNTIME_DIR")); err != nil && r.l.Limits != (container.Limits{}) {
			fmt.Fprintf(r.lo.Stderr, "cove: warning: %v\n", err)
		}
	}
	warn := r.l.Warn
	if warn == nil {
		warn = func(msg string) { fmt.Fprintf(r.lo.Stderr, "cove: warning: %s\n", msg) }
	}
	ctr, err := container.Start(spec, stdio.Stdio, r.l.Limits, warn)
	if err != nil {
		if spec.UserNS && deniedByAppArmor(err, "/proc") {
			// A bare "operation not permitted" would not say why.
			return nil, fmt.Errorf("%w: %s", err, apparmor.Advice(apparmor.Executable()))
		}
		return nil, err
	}
	return ctr, nil
}

// record saves the started container's state, which ps, stop and rm go
// by; a container that cannot be recorded is not left running unknown.
func (r *launching) record(ctr *container.Container) (*container.State, error) {
	st := &container.State{
		Name: r.name, ID: r.id, Image: r.l.Ref, Digest: r.img.Digest.String(), Cgroup: ctr.CgroupPaths(),
		Dir: r.dir, Created: time.Now().UTC(), Remove: r.l.Remove, Keep: r.keep,
	}
	if len(r.l.Binds) > 0 {
		st.Workdir = r.l.Binds[0].Source // what ps --json shows as the container's dir
	}
	st.SetIdentity(ctr)
	if err := r.states.Save(st); err != nil {
		ctr.Kill()
		ctr.Wait() // removes the cgroup
		return nil, err
	}
	return st, nil
}

// wait connects the terminal and signals to the container until it exits,
// then finishes with it. An error is one of the wait, not the workload's:
// the container is then left for the caller to unclaim.
func (r *launching) wait(ctx context.Context, ctr *container.Container, st *container.State, stdio *runStdio, restore func(), sigs chan os.Signal) (int, error) {
	// Ctrl-C and friends go to the container (init forwards them), not to
	// us; caught from before the start, so that one pressed as the workload
	// begins is held until the container is there to take it.
	go func() {
		for s := range sigs {
			ctr.Signal(s)
		}
	}()
	stdio.start(ctr.Console)
	code, oom, err := ctr.Wait()
	stdio.wait(ctr.Console)
	restore()
	if err != nil && code == 0 {
		return 0, err
	}
	r.finish(ctx, ctr, st, code, oom)
	return code, nil
}

// finish says if the container was killed for memory, then removes it
// (--rm) or records its exit.
func (r *launching) finish(ctx context.Context, ctr *container.Container, st *container.State, code int, oom bool) {
	switch {
	case oom && code == 137:
		fmt.Fprintf(r.lo.Stderr, "cove: killed: out of memory (limit %s)\n", progress.Bytes(ctr.MemoryLimit()))
	case oom:
		fmt.Fprintf(r.lo.Stderr, "cove: a process of the container was killed: out of memory (limit %s); the workload went on\n", progress.Bytes(ctr.MemoryLimit()))
	}
	if st.Remove {
		if err := r.unclaim(ctx); err != nil {
			fmt.Fprintf(r.lo.Stderr, "cove: warning: --rm: %v\n", err)
		}
	} else {
		st.ExitCode = &code
		st.Pid = 0
		r.states.Save(st)
	}
}

// pinImage holds img for this launch (image.Store.Use) until the function
// it returns is called. The holder is a descriptor of this process's, by
// its /proc path: a launch that dies (kill -9) holds nothing after, where
// a file left behind would hold the image for good.
func (lo *Local) pinImage(ctx context.Context, store *image.Store, img *image.Image) (unpin func(), err error) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	holder := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), f.Fd())
	if err := store.Use(ctx, img.Digest, holder); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		store.Release(holder)
		f.Close()
	}, nil
}

// deniedByAppArmor says whether err, a rootless start's failure, is what
// AppArmor's restriction on user namespaces gives (a namespace without
// capabilities: mounts and maps refused), on a host that has it on.
func deniedByAppArmor(err error, proc string) bool {
	msg := err.Error()
	denied := errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(msg, "operation not permitted") || strings.Contains(msg, "permission denied")
	return denied && apparmor.Restricted(proc)
}

// checkPorts refuses, before anything starts, host ports that another
// container forwards or another program holds, naming who has them.
func checkPorts(states container.StateDir, net string, ports []container.Port) error {
	if len(ports) > 0 && net != container.NetPrivate {
		return fmt.Errorf("-p forwards ports into a network of the container's own (--net private); with --net %s there is none", net)
	}
	for i, p := range ports {
		for _, q := range ports[:i] {
			if p.Overlaps(q) {
				return fmt.Errorf("host port %s is asked for twice", p)
			}
		}
		if who := states.PortUser(p); who != "" {
			return fmt.Errorf("host port %s: container %s forwards it already: cove stop %s, or choose another host port", p, who, who)
		}
		if err := probePort(p); err != nil {
			return fmt.Errorf("host port %s: %v: another program has it; choose another host port", p, err)
		}
	}
	return nil
}

// probePort binds p's host side for a moment, so that a port in use is
// said plainly rather than as pasta's refusal.
func probePort(p container.Port) error {
	addr := net.JoinHostPort(p.HostIP, strconv.Itoa(int(p.HostPort)))
	if p.Proto == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// ulimits are the limits asked for, each hard one no higher than this
// process's where it cannot raise it (said).
func (lo *Local) ulimits(us []container.Ulimit) []container.Ulimit {
	if len(us) == 0 || container.CanRaiseLimits() {
		return us
	}
	out := slices.Clone(us)
	for i := range out {
		asked := out[i]
		if lowered, err := out[i].Within(); err == nil && lowered {
			fmt.Fprintf(lo.Stderr, "cove: note: ulimit %s: above this machine's hard limit, which cove cannot raise (that needs CAP_SYS_RESOURCE); the workspace gets %s\n",
				asked, out[i])
		}
	}
	return out
}

// etcFiles writes the container's resolv.conf and hosts: the host's, plus
// the container's own name and the extra entries. In a network of its own
// the resolver is pasta's forwarder (the host's may be on its loopback).
func etcFiles(dir, hostname, network string, extra [][2]string) (resolv, hosts string, err error) {
	etc := filepath.Join(dir, "etc")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return "", "", err
	}
	// /etc/hostname, as podman and Docker write it.
	if err := os.WriteFile(filepath.Join(etc, "hostname"), []byte(hostname+"\n"), 0o644); err != nil {
		return "", "", err
	}
	r, _ := os.ReadFile("/etc/resolv.conf")
	if network == container.NetPrivate || network == container.NetJoin {
		r = container.ResolvConf(r) // the workspace's pasta answers
	}
	h, err := os.ReadFile("/etc/hosts")
	if err != nil {
		h = []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	}
	h = append(h, []byte(fmt.Sprintf("127.0.1.1\t%s\n", hostname))...)
	for _, e := range extra {
		h = append(h, []byte(fmt.Sprintf("%s\t%s\n", e[1], e[0]))...)
	}
	resolv, hosts = filepath.Join(etc, "resolv.conf"), filepath.Join(etc, "hosts")
	if err := os.WriteFile(resolv, r, 0o644); err != nil {
		return "", "", err
	}
	return resolv, hosts, os.WriteFile(hosts, h, 0o644)
}

// runStdio connects the container to our terminal or streams. No terminal
// of ours is handed to the container (it could push keystrokes into it with
// TIOCSTI): with -t it gets a terminal of its own, made inside it, whose
// master we relay; else pipes.
type runStdio struct {
	container.Stdio
	tty     bool
	copying chan struct{}
	restore func()
}

func setupStdio(tty, interactive bool, stdout, stderr io.Writer) (*runStdio, func()) {
	rs := &runStdio{copying: make(chan struct{}), tty: tty, restore: func() {}}
	if !rs.tty {
		// Wrapping in plain readers and writers makes os/exec give the
		// container pipes and copy, instead of our descriptors: only a
		// pipe or socket of ours is handed over (handOver).
		switch {
		case !interactive:
			rs.Stdin = nil // /dev/null: without -i, as podman and Docker, nothing
		case handOver(os.Stdin):
			rs.Stdin = os.Stdin
		default:
			rs.Stdin = struct{ io.Reader }{os.Stdin}
		}
		rs.Stdout, rs.Stderr = writerFor(stdout), writerFor(stderr)
	}
	return rs, func() { rs.restore() }
}

func writerFor(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && handOver(f) {
		return f
	}
	return struct{ io.Writer }{w}
}

// start relays the container's terminal, if it has one: our terminal goes
// raw, and its size follows ours.
func (rs *runStdio) start(console *os.File) {
	if console == nil {
		close(rs.copying)
		return
	}
	if term.IsTerminal(int(os.Stdin.Fd())) {
		pty.InheritSize(os.Stdin, console)
		if old, err := term.MakeRaw(int(os.Stdin.Fd())); err == nil {
			done := false
			rs.restore = func() {
				if !done {
					done = true
					term.Restore(int(os.Stdin.Fd()), old)
				}
			}
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		go func() {
			for range winch {
				pty.InheritSize(os.Stdin, console)
			}
		}()
	}
	go io.Copy(console, os.Stdin)
	go func() {
		io.Copy(os.Stdout, console)
		close(rs.copying)
	}()
}

// wait lets the last output through once the container is gone.
func (rs *runStdio) wait(console *os.File) {
	select {
	case <-rs.copying:
	case <-time.After(2 * time.Second):
	}
	if console != nil {
		console.Close()
	}
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
