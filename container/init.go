package container

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cove-sh/cove/internal/shed"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The launcher and init talk over two inherited pipes:
//
//	fd 3  spec   launcher → init: the Spec as JSON, then EOF. Init reads it
//	             only once the launcher has put it in its cgroup (v1) and
//	             user namespace maps are written, so nothing runs before.
//	fd 4  sync   init → launcher, a socket: one JSON line, {"error": "…"}
//	             when setup fails (mount /proc: permission denied), or
//	             {"pid": N} once the workload runs, with the master of its
//	             terminal attached (SCM_RIGHTS) when it has one; then init
//	             closes it. Launcher → init, one byte each: init is in its
//	             cgroups (start the workload). Under NetPrivate, a
//	             first line {"tap": true} hands the launcher the
//	             container's interface, for pasta (see Tap).
//
// Init runs in two stages. Stage 1 (the launcher's binary, PID 1 of the new
// namespaces) builds the root and pivots into it. Stage 2 is PID 1 for the
// container's life: it starts the workload, reaps zombies, forwards signals
// and exits with the workload's status. When the binary init runs is one
// the container cannot write (the launcher, as root, bound it read-only
// before init started; or a rootless container maps no id that can write
// it), stage 2 is the same process: one exec per start. Else stage 1 execs
// stage 2 from the read-only bind /.cove/init, handing the spec on through
// a new pipe on fd 3.
const (
	specFd = 3
	syncFd = 4
	ctlFd  = 5 // listening socket for cove exec (see exec.go)
)

// InitArg is the hidden first argument that makes cove run as a container's
// init; cmd/cove checks for it before anything else and calls Init.
const InitArg = "init"

// syncMsg is one line on the sync pipe.
type syncMsg struct {
	Tap   bool   `json:"tap,omitempty"` // the container's interface is attached, for pasta
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"` // with Error: see StartError.Code
	PID   int    `json:"pid,omitempty"`
}

// Init runs a container's init. It never returns: it exits with the
// workload's status, or 125 after telling the launcher what failed.
func Init(args []string) {
	if len(args) > 0 && args[0] == "--hold-userns" {
		// Keeps a user namespace alive for an ID-mapped mount until
		// stdin closes.
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	runtime.LockOSThread()
	if len(args) > 0 && args[0] == netHelperArg {
		runNetHelper()
	}
	if len(args) > 0 && args[0] == logHelperArg {
		runLogHelper()
	}
	if len(args) > 0 && (args[0] == keeperArg || args[0] == keeperMappedArg) {
		runKeeper(args[0] == keeperMappedArg)
	}
	if len(args) > 0 && args[0] == joinerArg {
		runJoiner()
	}
	stage2 := len(args) > 0 && args[0] == "--stage2"
	sync := os.NewFile(syncFd, "sync")
	fail := func(err error) {
		json.NewEncoder(sync).Encode(syncMsg{Error: err.Error(), Code: startCode(err)})
		os.Exit(125)
	}
	// Whatever the caller of the launcher leaked stays out.
	unix.CloseRange(ctlFd+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	spec, err := readSpec()
	if err != nil {
		fail(err)
	}
	if !stage2 {
		// Returns only with the root built and no need to exec stage 2.
		if err := initStage1(spec, len(args) > 0 && args[0] == "--stage1b"); err != nil {
			fail(err)
		}
	}
	code, err := initStage2(spec, sync)
	if err != nil {
		fail(err)
	}
	os.Exit(code)
}

func readSpec() (*Spec, error) {
	f := os.NewFile(specFd, "spec")
	defer f.Close()
	var spec Spec
	if err := json.NewDecoder(io.LimitReader(f, 16<<20)).Decode(&spec); err != nil {
		return nil, fmt.Errorf("read the container spec: %w", err)
	}
	return &spec, nil
}

// initStage1 builds the root and pivots into it. It returns nil when the
// binary it runs is one the container cannot write (see exeProtected):
// stage 2 then runs in this process. Else it execs stage 2 from the
// read-only bind and returns only on failure.
func initStage1(spec *Spec, again bool) error {
	if spec.UserNS && !again {
		if err := regainCaps(spec); err != nil {
			return err
		}
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	switch spec.Net {
	case NetNone:
		if err := loopbackUp(); err != nil {
			return err
		}
	case NetPrivate:
		if err := setupPrivateNet(spec.Blocked); err != nil {
			return err
		}
		if err := handOverTap(spec.Tap); err != nil {
			return err
		}
	}
	if err := setupRootfs(spec); err != nil {
		return err
	}
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if exeProtected() {
		// What the exec would have given stage 2.
		os.Clearenv()
		os.Setenv("PATH", strings.TrimPrefix(env[0], "PATH="))
		return nil
	}
	if err := passSpec(spec); err != nil {
		return err
	}
	err := unix.Exec("/.cove/init", []string{"cove", InitArg, "--stage2"}, env)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("exec /.cove/init: %w (cove must be a static binary: build it with CGO_ENABLED=0)", err)
	}
	return fmt.Errorf("exec /.cove/init: %w", err)
}

// passSpec puts the spec on fd 3 again, in a fresh pipe, for the program
// init execs next.
func passSpec(spec *Spec) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if len(b) > 1<<20 {
		return fmt.Errorf("the container spec is too large (%d bytes)", len(b))
	}
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		return err
	}
	unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, 1<<20)
	if _, err := unix.Write(p[1], b); err != nil {
		return err
	}
	unix.Close(p[1])
	if p[0] != specFd { // readSpec closed fd 3, so the pipe often gets it
		if err := unix.Dup3(p[0], specFd, 0); err != nil {
			return fmt.Errorf("pass the spec on: %w", err)
		}
	}
	return nil
}

// regainCaps re-executes stage 1 when it has no capabilities: its user
// namespace maps were written (by newuidmap) after it was exec'd, and an
// exec as the namespace's root gives it the capabilities it needs.
func regainCaps(spec *Spec) error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok && strings.Trim(strings.TrimSpace(v), "0") != "" {
			return nil
		}
	}
	if err := passSpec(spec); err != nil {
		return err
	}
	err = unix.Exec("/proc/self/exe", []string{"cove", InitArg, "--stage1b"}, []string{})
	return fmt.Errorf("re-exec init in its user namespace: %w", err)
}

// forwarded are the signals init passes on to the workload.
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH}

func initStage2(spec *Spec, sync *os.File) (int, error) {
	unix.CloseOnExec(syncFd)
	unix.CloseOnExec(ctlFd)
	// The launcher says when init is in its cgroups (see Start): the
	// workload starts inside them or not at all, and the cgroup namespace
	// is rooted there.
	var inCgroup [1]byte
	if _, err := io.ReadFull(sync, inCgroup[:]); err != nil {
		return 0, fmt.Errorf("wait to be in the cgroup: %w", err)
	}
	if err := mountCgroupView(spec.Cgroups); err != nil {
		return 0, err
	}
	routes, err := restrictInit(spec)
	if err != nil {
		return 0, err
	}
	in := &initProc{spec: spec, waiters: map[int]chan int{}, routes: routes, shed: shed.Open()}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	// A child's exit is handed over only once its waiter is registered:
	// spawning and registering happen under the lock the reaper takes.
	workloadDone := make(chan int, 1)
	in.mu.Lock()
	go in.reap(chld)
	proc, master, err := spawn(spec, spec.Process, []*os.File{os.Stdin, os.Stdout, os.Stderr})
	if err != nil {
		in.mu.Unlock()
		return 0, err
	}
	in.waiters[proc.Pid] = workloadDone
	in.mu.Unlock()
	if err := reportStarted(proc, master); err != nil {
		return 0, err
	}
	var l net.Listener
	if ctl := os.NewFile(ctlFd, "control"); ctl != nil {
		l, _ = net.FileListener(ctl)
		ctl.Close()
	}
	go func() {
		sync.Close()
		if l != nil {
			in.serveExec(l)
		}
	}()
	// Once the start is reported, off its way (2-5 ms, most of it reading
	// smaps): init stays for the container's life, small (24 MB → 6 MB).
	// Not after each cove exec, which touches some 8 MB of its pages
	// again (init at 13 MB then): each exec would fault them back.
	go in.shed.Shed()
	return in.supervise(proc, sigs, workloadDone)
}

// supervise forwards signals to the workload until it exits, and starts
// it again as spec.Restart says, unless a SIGTERM or SIGINT (cove stop)
// came first. It returns the exit status init ends with.
func (in *initProc) supervise(proc *os.Process, sigs chan os.Signal, done chan int) (int, error) {
	stopping := false
	restarts, fast := 0, 0
	started := time.Now()
	for {
		select {
		case sig := <-sigs:
			stopping = stopping || sig == unix.SIGTERM || sig == unix.SIGINT
			unix.Kill(proc.Pid, sig.(syscall.Signal))
			continue
		case code := <-done:
			r := in.spec.Restart
			if stopping || !r.Again(code, restarts) {
				return code, nil
			}
			if time.Since(started) >= 10*time.Second {
				fast = 0
			}
			delay := r.Delay(fast)
			fmt.Fprintf(os.Stderr, "cove: the workload exited (status %d); its restart policy starts it again in %v (restart %d)\n", code, delay, restarts+1)
			select {
			case sig := <-sigs:
				if sig == unix.SIGTERM || sig == unix.SIGINT {
					return code, nil
				}
			case <-time.After(delay):
			}
			restarts, fast, started = restarts+1, fast+1, time.Now()
			stdin, _ := os.Open(os.DevNull) // the first one's was closed once it started
			in.mu.Lock()
			p, _, err := spawn(in.spec, in.spec.Process, []*os.File{stdin, os.Stdout, os.Stderr})
			if stdin != nil {
				stdin.Close()
			}
			if err != nil {
				in.mu.Unlock()
				fmt.Fprintf(os.Stderr, "cove: restart: %v\n", err)
				return code, nil
			}
			in.waiters[p.Pid] = done
			in.mu.Unlock()
			proc = p
		}
	}
}

// restrictInit takes from init what neither it nor anything it starts may
// have: new privileges, the system calls seccomp refuses; and raises the
// open files limit. (The bounding set is dropped where a process is
// started: spawn's thread, see restrictThread.) Under NetPrivate it returns the route socket the network helper's
// later blocks go through.
func restrictInit(spec *Spec) (*netlink.Handle, error) {
	if spec.NoNewPrivileges {
		// Inherited by everything init starts: no setuid binary (sudo)
		// or file capability gives more than the process had.
		if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
			return nil, fmt.Errorf("no-new-privileges: %w", err)
		}
	}
	// Under NetPrivate, the network helper tells init of addresses the
	// host gains while the container runs, to block as the first ones
	// were: through a route socket made now, before seccomp, with init's
	// capabilities in its own network namespace.
	var routes *netlink.Handle
	if spec.Net == NetPrivate {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("route socket: %w", err)
		}
		routes = h
	}
	if !spec.NoSeccomp {
		caps, err := keptCapNames(spec.blocksRaw(), spec.CapAdd, spec.CapDrop)
		if err != nil {
			return nil, err
		}
		if err := installSeccomp(caps); err != nil {
			return nil, err
		}
	}
	// Open files up to the hard limit, as podman and Docker give: the
	// caller's soft limit (1024 from a shell) is too few for builds and
	// language servers. Setting it here also keeps Go from putting the
	// old soft limit back in the processes init starts.
	var nofile unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile) == nil && nofile.Cur < nofile.Max {
		nofile.Cur = nofile.Max
		unix.Setrlimit(unix.RLIMIT_NOFILE, &nofile)
	}
	return routes, setUlimits(spec.Ulimits)
}

// handOverTap makes the container's interface and sends it to the
// launcher, for pasta; init keeps no descriptor of it.
func handOverTap(t *Tap) error {
	if t == nil {
		return errors.New("the spec has no network interface for the container")
	}
	fd, err := makeTap(t)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	b, _ := json.Marshal(syncMsg{Tap: true})
	if err := unix.Sendmsg(syncFd, append(b, '\n'), unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("hand the network interface to the launcher: %w", err)
	}
	return nil
}

// reportStarted tells the launcher the workload runs, handing it the
// terminal's master if there is one, and closes init's copies of the
// master and stdin (the sync socket is closed by its caller).
func reportStarted(proc *os.Process, master *os.File) error {
	b, _ := json.Marshal(syncMsg{PID: proc.Pid})
	var rights []byte
	if master != nil {
		rights = unix.UnixRights(int(master.Fd()))
	}
	if err := unix.Sendmsg(syncFd, append(b, '\n'), rights, nil, 0); err != nil {
		proc.Kill()
		return fmt.Errorf("report to the launcher: %w", err)
	}
	if master != nil {
		master.Close()
	}
	os.Stdin.Close()
	return nil
}

// initProc is stage 2's state: who waits for which child's exit.
type initProc struct {
	spec    *Spec
	mu      sync.Mutex
	waiters map[int]chan int // pid → where its exit status goes
	routes  *netlink.Handle  // NetPrivate: the namespace's routes, for ExecRequest.Block
	shed    *shed.Shedder    // keeps init small
}

// reap waits for every child that the container's processes leave to PID
// 1, and hands the exit status (128+signal when killed) of the workload
// and of exec'd processes to whoever waits for it. It reaps on SIGCHLD,
// so it does not sleep on an exit.
func (in *initProc) reap(chld <-chan os.Signal) {
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			in.mu.Lock()
			if ch, ok := in.waiters[pid]; ok {
				ch <- exitCode(ws)
				delete(in.waiters, pid)
			}
			in.mu.Unlock()
		}
		// SIGCHLD wakes it. Signals coalesced (the kernel's, or one
		// dropped by os/signal while the channel holds one) lose no exit:
		// one wake reaps every child that has exited. The poll is a net
		// for what cannot be foreseen, slow: an idle init's threads woke
		// some 20 times a second for the one of 4 (TestIdleInitSleeps).
		select {
		case <-chld:
		case <-time.After(10 * time.Second):
		}
	}
}

// spawn starts p as the workload or an exec'd process: in its own session,
// as its user, in its directory, with a terminal of its own if it asks,
// and with no more capability than the spec allows (forked from a thread
// restricted so, whichever thread runs this).
func spawn(spec *Spec, p Process, stdio []*os.File) (*os.Process, *os.File, error) {
	hostname := spec.Hostname
	runtime.LockOSThread()
	// A thread restricted stays so: it goes back to the pool as it is.
	defer runtime.UnlockOSThread()
	if err := restrictThread(spec); err != nil {
		return nil, nil, err
	}
	u, err := lookupUser(p.User, "/etc/passwd", "/etc/group")
	if err != nil {
		return nil, nil, err
	}
	env := p.Env
	if !hasEnv(env, "HOME") {
		env = append(env, "HOME="+u.Home)
	}
	if !hasEnv(env, "HOSTNAME") {
		env = append(env, "HOSTNAME="+hostname)
	}
	if p.Terminal && !hasEnv(env, "TERM") {
		env = append(env, "TERM=xterm-256color")
	}
	if err := checkDir(p.Cwd, u); err != nil {
		return nil, nil, err
	}
	bin := p.Args[0]
	if strings.Contains(bin, "/") && !path.IsAbs(bin) {
		// ./script is the working directory's, not init's.
		bin = path.Join(p.Cwd, bin)
	}
	bin, err = lookPath(bin, getEnv(env, "PATH"))
	if err != nil {
		return nil, nil, err
	}
	attr := &syscall.SysProcAttr{Setsid: true, Setctty: p.Terminal, Ctty: 0}
	if u.UID != 0 || u.GID != 0 || len(u.Groups) > 1 {
		attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	var master *os.File
	if p.Terminal {
		m, slave, err := openPTY(u)
		if err != nil {
			return nil, nil, err
		}
		defer slave.Close()
		master, stdio = m, []*os.File{slave, slave, slave}
	}
	proc, err := os.StartProcess(bin, p.Args, &os.ProcAttr{Dir: p.Cwd, Env: env, Files: stdio, Sys: attr})
	if err != nil {
		if master != nil {
			master.Close()
		}
		return nil, nil, fmt.Errorf("start %s: %w", p.Args[0], err)
	}
	return proc, master, nil
}

// openPTY makes the workload's terminal in the container's own devpts, so
// that tty(1) and ttyname(3) find it, and gives the slave to the user.
func openPTY(u User) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open a terminal: %w", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("terminal number: %w", err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	slave, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	os.Chown(name, int(u.UID), int(u.GID))
	return master, slave, nil
}

func exitCode(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// checkDir makes the working directory (as Docker does, if missing) and
// checks that it is a real directory inside the root: a path through a
// leaked descriptor (/proc/self/fd/N, CVE-2024-21626) is refused.
func checkDir(dir string, u User) error {
	clean := path.Clean(dir)
	if strings.HasPrefix(clean, "/proc/") {
		return fmt.Errorf("working directory %s: inside /proc is not allowed", dir)
	}
	if _, err := os.Stat(clean); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(clean, 0o755); err != nil {
			return fmt.Errorf("working directory %s: %w", dir, err)
		}
		os.Lchown(clean, int(u.UID), int(u.GID))
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil {
		return fmt.Errorf("working directory %s: %w", dir, err)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() || strings.HasPrefix(real, "/proc/") {
		return fmt.Errorf("working directory %s is not a directory of the container", dir)
	}
	return nil
}

// lookPath finds file in the workload's PATH (not init's).
func lookPath(file, pathEnv string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
		return file, nil
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" {
			dir = "."
		}
		p := path.Join(dir, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w (PATH=%s)", file, exec.ErrNotFound, pathEnv)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not an executable file: %w", fs.ErrPermission)
	}
	return nil
}
