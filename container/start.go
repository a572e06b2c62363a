package container

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stdio is what the workload's standard streams are connected to when it
// has no terminal (Spec.Process.Terminal unset).
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Container is a started container. Its methods are not safe for
// concurrent use.
type Container struct {
	Spec *Spec
	Pid  int // init's pid on the host
	// Console is the master side of the workload's terminal, made inside
	// the container (so that its devpts knows it) and passed out by init.
	// Set only with Spec.Process.Terminal; the caller closes it.
	Console *os.File
	// Identity is init's start time, boot and binary, taken while it
	// surely runs (the workload may be done before Start returns).
	Identity State
	// NetHelper is the identity of the process that keeps pasta
	// (NetPrivate only; see nethelper.go).
	NetHelper *State
	cmd       *exec.Cmd
	netHelper *exec.Cmd
	cgroup    *cgroup
	warn      func(string)
	netUp     chan struct{} // a start not waiting for pasta: closed once it is up or failed
}

// StartError is a failure before the workload ran. Code is the exit
// status shells, podman and Docker give when it is the command itself
// that could not start: 127 not found, 126 not runnable; else 0 (then
// cove run says 125).
type StartError struct {
	Err  error
	Code int
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Start creates the container's directories, cgroup and namespaces and
// starts its init, which starts the workload. It returns once the workload
// runs, or with a *StartError saying why it could not.
func Start(spec *Spec, stdio Stdio, limits Limits, warn func(string)) (c *Container, err error) {
	defer func() {
		var se *StartError
		if err != nil && !errors.As(err, &se) {
			err = &StartError{Err: err}
		}
	}()
	if err := prepareStart(spec, warn); err != nil {
		return nil, err
	}
	cg, err := newCgroup(spec.ID, limits, warn)
	if err != nil {
		return nil, err
	}
	spec.Cgroups = cg.views()
	defer func() {
		if err != nil {
			cg.kill()
			cg.remove()
		}
	}()
	p, err := newInitPipes(spec.Control)
	if err != nil {
		return nil, err
	}
	defer p.close()
	ranged, useRanges := rangedMapping()
	cmd, keeper, err := initCommand(spec, p, useRanges)
	if err != nil {
		return nil, err
	}
	defer closeFiles(cmd.ExtraFiles[3:]) // a joiner's namespaces (see joinThrough)
	if fd, err := cg.dirFd(); err != nil {
		return nil, err
	} else if fd >= 0 {
		// clone3 with CLONE_INTO_CGROUP: init begins inside (v2).
		defer unix.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	if !spec.Process.Terminal {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdio.Stdin, stdio.Stdout, stdio.Stderr
	}
	if err := startInit(cmd); err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	c = &Container{Spec: spec, Pid: cmd.Process.Pid, cmd: cmd, cgroup: cg, warn: warn}
	p.specR.Close()
	p.syncW.Close()
	if err := c.setUp(p, ranged, useRanges, keeper); err != nil {
		return c.abort(err)
	}
	return c, nil
}

// prepareStart makes the container's directories (and a copy of the image
// where there is no overlayfs) and checks what the start needs.
func prepareStart(spec *Spec, warn func(string)) (err error) {
	for _, bin := range []string{spec.Binary, spec.Tools} {
		if bin == "" {
			continue
		}
		if err := checkStatic(bin); err != nil {
			return err
		}
	}
	for _, d := range []string{spec.Upper, spec.Work, spec.Merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if !spec.Copy && !overlaySupported() {
		warn("overlayfs is not available: the container gets a private copy of the image (slower to start)")
		spec.Copy = true
	}
	if spec.Copy {
		if err := copyTree(spec.Lower, spec.Merged); err != nil {
			return err
		}
	}
	if spec.Net == NetPrivate {
		// Before anything starts: a missing pasta is one clear line.
		if _, err := PastaPath(); err != nil {
			return err
		}
		if spec.Blocked, err = HostAddresses(); err != nil {
			return err
		}
		if spec.Tap, err = HostTap(); err != nil {
			return err
		}
	}
	return nil
}

// initPipes are the launcher's ends and init's of the spec pipe, the sync
// socket and the control socket (see init.go).
type initPipes struct {
	specR, specW, syncR, syncW, ctl *os.File
}

func newInitPipes(control string) (*initPipes, error) {
	p := &initPipes{}
	var err error
	if p.specR, p.specW, err = os.Pipe(); err != nil {
		return nil, err
	}
	// A socket, not a pipe: init passes the terminal's master over it.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		p.close()
		return nil, err
	}
	p.syncR, p.syncW = os.NewFile(uintptr(pair[0]), "sync"), os.NewFile(uintptr(pair[1]), "sync-init")
	if p.ctl, err = controlSocket(control); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *initPipes) close() {
	for _, f := range []*os.File{p.specR, p.specW, p.syncR, p.syncW, p.ctl} {
		if f != nil {
			f.Close()
		}
	}
}

// initCommand is init's command: new namespaces, its own session, and a
// user namespace (or the keep-id keeper, which makes them) when asked.
func initCommand(spec *Spec, p *initPipes, useRanges bool) (cmd *exec.Cmd, keeper bool, err error) {
	cmd = &exec.Cmd{
		Path:       spec.Binary,
		Args:       []string{"cove", InitArg},
		Env:        []string{},
		ExtraFiles: []*os.File{p.specR, p.syncW, p.ctl},
		Dir:        spec.LowerBase, // "": ours
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			// Its own session: a Ctrl-C (or hang-up) on the terminal that
			// started it must not reach a container that outlives that
			// command (a workspace started by cove agent or shell); a
			// foreground run gets its signals forwarded by the launcher.
			Setsid: true,
		},
	}
	if spec.Net == NetNone || spec.Net == NetPrivate {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWNET
	}
	if spec.Net == NetJoin {
		// Init is the joiner's child, as the keeper's is (see keepid.go).
		if err := joinThrough(cmd, spec); err != nil {
			closeFiles(cmd.ExtraFiles[3:])
			return nil, false, err
		}
		return cmd, true, nil
	}
	keeper = spec.UserNS && spec.KeepID != nil
	if keeper && !useRanges {
		return nil, false, errors.New("keep-id needs newuidmap and newgidmap (Debian's uidmap package) and subordinate ids for you in /etc/subuid and /etc/subgid")
	}
	if keeper {
		// The keeper makes init's namespaces, in a user namespace nested
		// in its own (see keepid.go).
		cmd.Args = []string{"cove", InitArg, keeperArg}
		cmd.SysProcAttr.Cloneflags = unix.CLONE_NEWUSER
	}
	if spec.UserNS {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		if !useRanges {
			// Only our own ids: everything in the container is root.
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
			cmd.SysProcAttr.GidMappingsEnableSetgroups = false
		}
	}
	return cmd, keeper, nil
}

// joinThrough makes cmd start the joiner (see runJoiner) through
// nsenter, in the network namespace of the init at spec.JoinPid and,
// with UserNS, its user namespace: opened here, passed as descriptors
// (nsenter opens /proc/self/fd/N, its own), so that the namespaces are
// the ones of the process checked now. The caller closes the files (the
// command's ExtraFiles after the first three).
func joinThrough(cmd *exec.Cmd, spec *Spec) error {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return fmt.Errorf("joining a container's network needs nsenter (Debian's util-linux package): %w", err)
	}
	if spec.JoinPid <= 0 {
		return errors.New("no container to join")
	}
	args := []string{"nsenter"}
	kinds := []string{"net"}
	if spec.UserNS {
		kinds = append(kinds, "user")
	}
	for _, k := range kinds {
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/%s", spec.JoinPid, k))
		if err != nil {
			return fmt.Errorf("the container to join is gone: %w", err)
		}
		fd := 3 + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		args = append(args, fmt.Sprintf("--%s=/proc/self/fd/%d", k, fd))
	}
	cmd.Path = nsenter
	cmd.Args = append(args, "--", spec.Binary, InitArg, joinerArg)
	// No namespace of nsenter's own: the joiner makes init's.
	cmd.SysProcAttr.Cloneflags = 0
	return nil
}

// closeFds closes descriptors received that have no use.
func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// abort ends an init that has not reported a running workload (one that
// reported its failure is exiting anyway) and its network helper.
func (c *Container) abort(err error) (*Container, error) {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
	c.waitNetHelper()
	return nil, err
}

// setUp takes init through its setup: it is tracked, its user namespace
// mapped, the spec sent, init put in its cgroups, pasta started; then init
// is told to start the workload and its answer read.
func (c *Container) setUp(p *initPipes, ranged subIDMapping, useRanges, keeper bool) error {
	spec := c.Spec
	// Init waits for the spec, so it is alive now; its exe is the same file
	// before and after it re-executes from the read-only bind.
	if err := c.Identity.TrackStarted(c.Pid, c.cmd.Path); err != nil {
		return fmt.Errorf("track init: %w", err)
	}
	if spec.UserNS && useRanges && spec.Net != NetJoin { // joined: mapped already
		if err := ranged.apply(c.Pid); err != nil {
			return fmt.Errorf("map the user namespace: %w", err)
		}
	}
	// The spec starts init's setup (the mounts), which runs while it is
	// put in its cgroups: on v1 a migration waits for the kernel's RCU and
	// can take milliseconds. A byte on the sync socket then tells init it
	// is in them; only after it does init start the workload, which so
	// begins inside them, and with its network up.
	if err := json.NewEncoder(p.specW).Encode(spec); err != nil {
		return fmt.Errorf("send the spec to init: %w", err)
	}
	p.specW.Close()
	sync := &lineReader{recv: fileRecvmsg(p.syncR)}
	if keeper {
		if err := c.followKeeper(sync); err != nil {
			return err
		}
	}
	if err := c.cgroup.join(c.Pid); err != nil {
		return err
	}
	// Init's interface comes first (its setup begins with the network):
	// pasta starts with it, while init builds its root.
	var helper *netHelperStart
	if spec.Net == NetPrivate {
		var err error
		if helper, err = c.startNetHelperWith(sync); err != nil {
			return err
		}
	}
	// The workload waits for pasta only when it publishes ports, so that
	// one pasta cannot bind fails the start; else it starts now, and what
	// it sends waits for pasta in its interface's queue (see Tap).
	late := helper != nil && (spec.NetLate || len(spec.Ports) == 0)
	if late {
		defer func() {
			if c.netUp == nil { // failed before lateNet took it
				helper.report.Close()
			}
		}()
	}
	if helper != nil && !late {
		if err := helper.wait(); err != nil {
			c.netHelper, c.NetHelper = nil, nil
			return err
		}
	}
	// An init that failed meanwhile is not written to: its reason is read
	// below.
	p.syncR.Write([]byte{1})
	msg, fds, err := readSyncLine(sync)
	if err != nil {
		c.cmd.Wait()
		if late {
			// The helper stops init when pasta fails: its reason is
			// the one to give.
			c.netUp = make(chan struct{}) // the report is read here
			close(c.netUp)
			if nerr := helper.wait(); nerr != nil {
				return nerr
			}
		}
		return fmt.Errorf("init died during setup (%v): %s", c.cmd.ProcessState, err)
	}
	if msg.Error != "" {
		c.cmd.Wait()
		return &StartError{Err: errors.New(msg.Error), Code: msg.Code}
	}
	if spec.Process.Terminal {
		if len(fds) != 1 {
			return errors.New("init sent no terminal")
		}
		c.Console = os.NewFile(uintptr(fds[0]), "console")
	}
	if late {
		c.lateNet(helper)
	}
	return nil
}

// lateNet waits, in the background, for pasta under a start that did not
// wait for it: should it fail, the container is stopped (by the helper
// too, see runNetHelper) and the warning says why.
func (c *Container) lateNet(helper *netHelperStart) {
	c.netUp = make(chan struct{})
	go func() {
		defer close(c.netUp)
		if err := helper.wait(); err != nil {
			if c.warn != nil {
				c.warn(fmt.Sprintf("the container's network did not come up, so it was stopped: %v", err))
			}
			c.Kill()
		}
	}()
}

// waitNet waits until the network of a start that did not wait for pasta
// is up, or failed.
func (c *Container) waitNet() {
	if c.netUp != nil {
		<-c.netUp
	}
}

// followKeeper reads the keep-id keeper's line: from here on, init is the
// keeper's child, with the pid it gives.
func (c *Container) followKeeper(sync *lineReader) error {
	msg, _, err := readSyncLine(sync)
	if err != nil {
		return fmt.Errorf("the keeper (keep-id, or a joined network's) died during setup: %s", err)
	}
	if msg.Error != "" {
		return errors.New(msg.Error)
	}
	c.Pid = msg.PID
	if err := c.Identity.TrackStarted(c.Pid, c.Spec.Binary); err != nil {
		// Gone already: its own line says why, if it could.
		if msg, _, rerr := readSyncLine(sync); rerr == nil && msg.Error != "" {
			return &StartError{Err: errors.New(msg.Error), Code: msg.Code}
		}
		return fmt.Errorf("track init: %w", err)
	}
	return nil
}

// startNetHelperWith reads init's line with its network interface and
// starts, with it, the process that keeps pasta for init's network
// namespace, and tracks it.
func (c *Container) startNetHelperWith(sync *lineReader) (*netHelperStart, error) {
	msg, fds, err := readSyncLine(sync)
	var tap *os.File
	if len(fds) > 0 {
		tap = os.NewFile(uintptr(fds[0]), "tap")
		defer tap.Close()
		closeFds(fds[1:])
	}
	switch {
	case err != nil:
		c.cmd.Wait()
		return nil, fmt.Errorf("init died during setup (%v): %s", c.cmd.ProcessState, err)
	case msg.Error != "":
		c.cmd.Wait()
		return nil, &StartError{Err: errors.New(msg.Error), Code: msg.Code}
	case !msg.Tap || tap == nil:
		return nil, errors.New("init sent no network interface")
	}
	h, err := startNetHelper(c.Spec, c.Pid, tap)
	if err != nil {
		return nil, err
	}
	c.netHelper, c.NetHelper = h.cmd, &State{}
	if err := c.NetHelper.TrackStarted(h.cmd.Process.Pid, h.cmd.Path); err != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
		h.report.Close()
		c.netHelper = nil
		return nil, fmt.Errorf("track the network helper: %w", err)
	}
	return h, nil
}

// controlSocket listens on path for cove exec; with no path, init gets
// /dev/null in its place, so that fd 5 is never something else.
func controlSocket(path string) (*os.File, error) {
	if path == "" {
		return os.Open(os.DevNull)
	}
	os.Remove(path)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	l.SetUnlinkOnClose(false) // it stays for init once we close our copy
	defer l.Close()
	return l.File()
}

// readSyncLine reads a JSON line of init's (or the keeper's: the first
// line, with keep-id) and the descriptors sent with it. One reader reads
// both lines: one read may bring both.
func readSyncLine(r *lineReader) (syncMsg, []int, error) {
	var msg syncMsg
	line, fds, err := r.next()
	if err != nil {
		return msg, fds, err
	}
	return msg, fds, json.Unmarshal(line, &msg)
}

// Wait waits for the container's init to exit and returns the workload's
// exit status (128+signal when it was killed), and whether the memory
// limit killed a process of the container: the workload, or one that it
// outlived (a shell whose command grew past it). It then removes the
// cgroup.
func (c *Container) Wait() (code int, oom bool, err error) {
	err = c.cmd.Wait()
	c.waitNet()
	defer c.cgroup.remove()
	// The forwarded ports close with the container: the helper kills
	// pasta as soon as init is gone.
	c.waitNetHelper()
	ps := c.cmd.ProcessState
	if ps == nil {
		return 0, false, err
	}
	ws := ps.Sys().(syscall.WaitStatus)
	code = exitCode(unix.WaitStatus(ws))
	return code, c.cgroup.oomKilled(), nil
}

// Signal sends sig to the container's init, which passes it on.
func (c *Container) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Kill kills every process of the container.
func (c *Container) Kill() {
	c.cgroup.kill()
	c.cmd.Process.Kill() // PID 1 gone takes its namespace's processes with it
}

// Release lets the container run on without this process (detach). A
// network still coming (a start that did not wait for pasta) is the
// network helper's then: it stops the container should pasta fail.
func (c *Container) Release() error {
	if c.netHelper != nil {
		c.netHelper.Process.Release()
	}
	return c.cmd.Process.Release()
}

// waitNetHelper waits for the network helper, which ends with init; it is
// killed if it has not within a few seconds.
func (c *Container) waitNetHelper() {
	if c.netHelper == nil {
		return
	}
	t := time.AfterFunc(5*time.Second, func() { c.netHelper.Process.Kill() })
	c.netHelper.Wait()
	t.Stop()
	c.netHelper = nil
}

// MemoryLimit is the memory limit the container runs under (0: none).
func (c *Container) MemoryLimit() int64 {
	if c.cgroup == nil {
		return 0
	}
	return c.cgroup.limit.Memory
}

// CgroupPaths returns the directories of the container's cgroup.
func (c *Container) CgroupPaths() []string {
	if c.cgroup == nil {
		return nil
	}
	var out []string
	for _, p := range c.cgroup.paths {
		out = append(out, p)
	}
	return out
}

// checkStatic refuses a dynamically linked cove: init is exec'd inside
// images that do not have the host's C library.
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("read %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; containers need a static cove (CGO_ENABLED=0 go build ./cmd/cove)", bin)
		}
	}
	return nil
}

// overlaySupported says whether overlayfs is built in, loaded, or a module
// the kernel will load on the first mount.
func overlaySupported() bool {
	if b, err := os.ReadFile("/proc/filesystems"); err == nil && strings.Contains(string(b), "\toverlay\n") {
		return true
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	rel := unix.ByteSliceToString(u.Release[:])
	_, err := os.Stat(filepath.Join("/lib/modules", rel, "kernel/fs/overlayfs"))
	return err == nil
}

// copyTree copies the image for hosts without overlayfs. cp keeps modes,
// owners, links, times and xattrs, which is what a root filesystem needs.
func copyTree(src, dst string) error {
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput() // not filepath.Join: it drops the "."
	if err != nil {
		return fmt.Errorf("copy the image: %v: %s", err, out)
	}
	return nil
}
