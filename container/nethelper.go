package container

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The network helper keeps pasta for one container under NetPrivate. pasta
// (as Debian ships it) does not exit when the namespace it serves loses its
// last process: it holds the namespace itself. So a small process of ours,
// `cove init --net-helper` in its own session, is pasta's parent: it
// watches the container's init through a pidfd and kills pasta when init
// is gone, and pasta gets SIGKILL as its parent-death signal, so a helper
// killed (kill -9 included) takes pasta with it. Neither depends on the
// launcher, which may be gone (-d, or killed).
//
// The launcher hands it, inherited:
//
//	fd 3  the config, as JSON, then EOF
//	fd 4  the report pipe: the helper writes "ok\n" once pasta has set the
//	      namespace up, or one line saying why it could not
//	fd 5  a pidfd of the container's init
//	fd 6  the container's network namespace
//	fd 7  its user namespace (rootless), else /dev/null
//	fd 8  the container's interface, made by init (see Tap)
//
// The namespaces go to pasta as descriptors (its --netns /proc/self/fd/N):
// a pasta started by root keeps few capabilities and may not open another
// root process's /proc/PID/ns files itself.
const netHelperArg = "--net-helper"

// netHelperConfig is what the launcher tells the helper.
type netHelperConfig struct {
	Pasta string   `json:"pasta"`
	Args  []string `json:"args"`
	// Control is init's control socket, where the helper asks it to
	// block the addresses the host gains ("": none to ask, see
	// watchHostAddresses).
	Control string `json:"control,omitempty"`
	// Ports: pasta holds ports of the host, so its end is waited for
	// before the helper's (a start that follows binds them again); else
	// the helper leaves the dying pasta to the kernel.
	Ports bool `json:"ports,omitempty"`
	// Blocked: what init blocked at the start (Spec.Blocked), not asked
	// again.
	Blocked []string `json:"blocked,omitempty"`
}

// netHelperTimeout bounds pasta's setup.
const netHelperTimeout = 10 * time.Second

// startNetHelper starts the helper for the container whose init is pid,
// with its interface; its wait says when pasta has set the network up.
func startNetHelper(spec *Spec, pid int, tap *os.File) (*netHelperStart, error) {
	pasta, err := PastaPath()
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(netHelperConfig{Pasta: pastaExecutable(pasta), Args: pastaArgs(spec.Ports, spec.UserNS, os.Geteuid() == 0, spec.Tap),
		Control: spec.Control, Ports: len(spec.Ports) > 0, Blocked: spec.Blocked})
	if err != nil {
		return nil, err
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	keep := func(f *os.File) *os.File { files = append(files, f); return f }
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	keep(cfgR)
	keep(cfgW)
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	keep(repR)
	keep(repW)
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("watch init: %w", err)
	}
	pidfd := keep(os.NewFile(uintptr(pfd), "pidfd"))
	netns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("open the container's network namespace: %w", err)
	}
	keep(netns)
	userns, err := os.Open(os.DevNull)
	if spec.UserNS {
		userns, err = os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	}
	if err != nil {
		return nil, fmt.Errorf("open the container's user namespace: %w", err)
	}
	keep(userns)
	cmd := &exec.Cmd{
		Path:        spec.Binary,
		Args:        []string{"cove", InitArg, netHelperArg},
		Env:         []string{},
		ExtraFiles:  []*os.File{cfgR, repW, pidfd, netns, userns, tap},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the network helper: %w", err)
	}
	repW.Close()
	cfgW.Write(cfg) // a pipe's buffer holds it: the helper reads it when it can
	cfgW.Close()
	// The report is read while init builds its root (see awaitNetHelper).
	files = slices.DeleteFunc(files, func(f *os.File) bool { return f == repR })
	return &netHelperStart{cmd: cmd, report: repR}, nil
}

// netHelperStart is a started network helper whose report is not read yet.
type netHelperStart struct {
	cmd    *exec.Cmd
	report *os.File
}

// wait reads the helper's report: nil once pasta has set the namespace up;
// else the helper is ended and the error says why.
func (h *netHelperStart) wait() error {
	defer h.report.Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(io.LimitReader(h.report, 4096)).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	var msg string
	select {
	case msg = <-line:
	case <-time.After(netHelperTimeout):
		msg = fmt.Sprintf("pasta did not set the network up within %s", netHelperTimeout)
	}
	if msg != "ok" && msg != netHelperGone {
		h.cmd.Process.Kill()
		h.cmd.Wait()
		if msg == "" {
			msg = fmt.Sprintf("the network helper died (%v)", h.cmd.ProcessState)
		}
		return fmt.Errorf("network: %s", msg)
	}
	return nil
}

// runNetHelper is the helper's body; it never returns.
func runNetHelper() {
	report := os.NewFile(4, "report")
	fail := func(err error) {
		fmt.Fprintln(report, strings.ReplaceAll(err.Error(), "\n", "; "))
		os.Exit(1)
	}
	var cfg netHelperConfig
	if err := json.NewDecoder(io.LimitReader(os.NewFile(3, "config"), 1<<20)).Decode(&cfg); err != nil {
		fail(fmt.Errorf("read the network helper's config: %w", err))
	}
	// What the launcher handed over goes to pasta as its ExtraFiles or not
	// at all (an inherited descriptor is not close-on-exec).
	for fd := 3; fd <= 8; fd++ {
		unix.CloseOnExec(fd)
	}
	pidfd := os.NewFile(5, "pidfd")
	// pasta reads the interface until EAGAIN: it must stay non-blocking
	// (an os.File made of a non-blocking descriptor leaves it so). That
	// File is in Go's poller, so it is closed as a File: a descriptor
	// closed under the poller stays in its epoll set while pasta holds the
	// interface, and every packet would wake this process (bulk transfers
	// lost a third of their speed to it).
	unix.SetNonblock(8, true)
	tap := os.NewFile(8, "tap")
	readyR, readyW, err := os.Pipe()
	if err != nil {
		fail(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(cfg.Pasta, cfg.Args...)
	cmd.Args[0] = "pasta" // passt's mode, whichever binary runs it (see pastaExecutable)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	cmd.ExtraFiles = []*os.File{os.NewFile(6, "netns"), os.NewFile(7, "userns"), readyW, tap}
	// The calling thread is locked (Init locks it) and lives as long as
	// the helper, so the parent-death signal fires only when we are gone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: unix.SIGKILL}
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("start pasta: %w", err))
	}
	readyW.Close()
	tap.Close()
	for _, fd := range []int{6, 7} {
		unix.Close(fd)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	initGone := make(chan struct{})
	go func() {
		fds := []unix.PollFd{{Fd: int32(pidfd.Fd()), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				close(initGone)
				return
			}
		}
	}()
	end := func() {
		cmd.Process.Kill()
		if cfg.Ports {
			<-exited
		}
		os.Exit(0)
	}
	// pasta writes its pid (--pid) once the namespace is set up; EOF
	// without it means it exited.
	ready := make(chan bool, 1)
	go func() {
		pidLine, _ := bufio.NewReader(readyR).ReadString('\n')
		ready <- strings.TrimSpace(pidLine) != ""
	}()
	select {
	case <-initGone:
		// A workload done before pasta was: nothing is left to serve.
		fmt.Fprintln(report, netHelperGone)
		end()
	case ok := <-ready:
		if !ok {
			<-exited
			// No network: the container does not run on without it, even
			// when it started before pasta and its launcher is gone.
			unix.PidfdSendSignal(int(pidfd.Fd()), unix.SIGKILL, nil, 0)
			fail(fmt.Errorf("pasta: %s (%v)", pastaErrors(stderr.String()), cmd.ProcessState))
		}
	}
	fmt.Fprintln(report, "ok")
	report.Close()
	if cfg.Control != "" {
		go watchHostAddresses(cfg.Control, cfg.Blocked)
	}
	select {
	case <-initGone:
		end()
	case <-exited:
		// pasta died under a running container: it has no network now.
		os.Exit(1)
	}
}

// netHelperGone is the helper's report when init ended before pasta was
// up.
const netHelperGone = "init gone"

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// pastaErrors is what pasta said, less its complaints that there is no
// syslog to write to.
func pastaErrors(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(line, "to syslog") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "; ")
}

// watchHostAddresses follows the host's addresses for as long as the
// helper lives and has the container's init block each one the host
// gains (an address a DHCP lease, a VPN or a bridge brings after the
// start): pasta connects as the host, so any of them would reach the
// host's services. The list at the start was blocked before the workload
// ran; the subscription lists every address again when it starts (and
// after an overflow), so none added in between is missed. Between an
// address appearing and its route there is the time of one netlink
// message and one request to init.
func watchHostAddresses(ctl string, blocked []string) {
	seen := map[string]bool{}
	for _, p := range blocked {
		seen[p] = true
	}
	for {
		updates := make(chan netlink.AddrUpdate, 256)
		done := make(chan struct{})
		failed := make(chan struct{}, 1)
		// Not the library's ListExisting: it sends its request to the
		// multicast groups, which the kernel refuses from a user without
		// CAP_NET_ADMIN. The list is read after subscribing instead.
		err := netlink.AddrSubscribeWithOptions(updates, done, netlink.AddrSubscribeOptions{
			ErrorCallback: func(error) {
				select {
				case failed <- struct{}{}:
				default:
				}
			},
		})
		if err != nil {
			return // no netlink: the start's list stands
		}
		pending := []string{}
		if addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL); err == nil {
			for _, a := range addrs {
				if p, ok := hostPrefix(a.IP); ok && !seen[p] {
					pending = append(pending, p)
				}
			}
		}
	read:
		for {
			var batch []string
			if len(pending) > 0 {
				batch, pending = pending, nil
			} else {
				select {
				case u, ok := <-updates:
					if !ok {
						break read
					}
					if p, ok := hostPrefix(u.LinkAddress.IP); ok && u.NewAddr && !seen[p] {
						batch = append(batch, p)
					}
				case <-failed:
					break read
				}
			}
			for len(updates) > 0 { // what came with it, in one request
				if v := <-updates; v.NewAddr {
					if q, ok := hostPrefix(v.LinkAddress.IP); ok && !seen[q] {
						batch = append(batch, q)
					}
				}
			}
			if len(batch) == 0 {
				continue
			}
			if err := blockInContainer(ctl, batch); err != nil {
				if errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT) {
					close(done)
					return // init is gone, and the helper with it soon
				}
				continue // asked again with the next change or relist
			}
			for _, q := range batch {
				seen[q] = true
			}
		}
		close(done)
		time.Sleep(100 * time.Millisecond)
	}
}

// blockInContainer asks the container's init, through its control socket,
// to add prohibit routes for prefixes.
func blockInContainer(ctl string, prefixes []string) error {
	conn, err := net.DialTimeout("unix", ctl, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := json.Marshal(ExecRequest{Block: prefixes})
	if err != nil {
		return err
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return err
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 64<<10)).ReadBytes('\n')
	if err != nil {
		return err
	}
	var r execReply
	if err := json.Unmarshal(line, &r); err != nil {
		return err
	}
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}
