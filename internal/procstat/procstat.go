// Package procstat reads /proc/PID/stat, whose second field (the command
// name, in parentheses) may itself hold spaces and parentheses.
package procstat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Fields returns the fields of /proc/PID/stat that follow the command
// name: Fields[0] is field 3 of proc(5) (the state), Fields[1] the parent
// PID, Fields[3] the session, Fields[19] the start time.
func Fields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// An Identity tells a process from another that later got its PID: its
// start time (in clock ticks since boot), the boot, and the file it runs
// (/proc/PID/exe's device and inode).
type Identity struct {
	PID    int    `json:"pid"`
	Start  string `json:"start"`
	Boot   string `json:"boot"`
	ExeDev uint64 `json:"exe_dev"`
	ExeIno uint64 `json:"exe_ino"`
}

// Identify returns pid's Identity.
func Identify(pid int) (Identity, error) {
	id := Identity{PID: pid}
	f, err := Fields(pid)
	if err != nil {
		return id, err
	}
	if len(f) < 20 {
		return id, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	id.Start = f[19]
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, err
	}
	id.Boot = strings.TrimSpace(string(b))
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/exe", pid), &st); err != nil {
		return id, err
	}
	id.ExeDev, id.ExeIno = uint64(st.Dev), st.Ino
	return id, nil
}

// IdentifyStarted is Identify for a process this one has just started
// with fork and exec of program: it waits until the exec shows in
// /proc/PID/exe. Go's exec returns once the child's exec cannot fail any
// more, and on Linux 6.1 (Debian 12's kernel) /proc/PID/exe may name this
// process's own program for a moment after: seen in 6-12% of starts in a
// busy VM, not on 6.18. An identity taken then names the wrong program,
// and the process looks gone for good a moment later. A program that is
// this process's own shows no change and needs no wait.
func IdentifyStarted(pid int, program string) (Identity, error) {
	return identifyStarted(pid, program, startedWait)
}

func identifyStarted(pid int, program string, bound time.Duration) (Identity, error) {
	var self, prog unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &self); err != nil {
		return Identity{}, err
	}
	same := unix.Stat(program, &prog) == nil && prog.Dev == self.Dev && prog.Ino == self.Ino
	deadline := time.Now().Add(bound)
	for wait := 20 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		id, err := Identify(pid)
		if err != nil || same || id.ExeDev != uint64(self.Dev) || id.ExeIno != self.Ino {
			return id, err
		}
		if time.Now().After(deadline) {
			return id, fmt.Errorf("pid %d still runs this program, not %s, %s after its exec", pid, program, bound)
		}
		time.Sleep(wait)
	}
}

// startedWait bounds IdentifyStarted's wait: the exec is past its point
// of no return, and what is left of it takes microseconds, or the time a
// busy machine takes to schedule it.
const startedWait = 10 * time.Second

// Alive says whether the process id names still runs: the same start,
// boot and executable, not a process that reused its PID.
func (id Identity) Alive() bool { return id.Gone() == nil }

// Gone says why the process id names does not run now (nil: it does):
// its PID is free, or taken by another process, which the field that
// differs tells.
func (id Identity) Gone() error {
	if id.PID <= 0 {
		return errors.New("no process recorded")
	}
	now, err := Identify(id.PID)
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH):
		return fmt.Errorf("pid %d has exited", id.PID)
	case err != nil:
		return fmt.Errorf("pid %d: %w", id.PID, err)
	case now.Boot != id.Boot:
		return fmt.Errorf("pid %d was of an earlier boot", id.PID)
	case now.Start != id.Start:
		return fmt.Errorf("pid %d has exited (another process, started at tick %s, not %s, has its pid now)", id.PID, now.Start, id.Start)
	case now.ExeDev != id.ExeDev || now.ExeIno != id.ExeIno:
		return fmt.Errorf("pid %d runs another program now (device %d inode %d, not %d %d)", id.PID, now.ExeDev, now.ExeIno, id.ExeDev, id.ExeIno)
	}
	return nil
}

// A Process is a running process held by a pidfd taken before its
// Identity was checked: its signals and its exit are that process's,
// never a later one's that got its PID. Where there are no pidfds (Linux
// before 5.3, a seccomp filter without pidfd_open) it falls back on the
// Identity, checked before each signal and every second for the exit.
type Process struct {
	id Identity
	f  *os.File // the pidfd, non-blocking (nil: none)
}

// Open holds the process id names; an error when it does not run now
// (Gone's).
func (id Identity) Open() (*Process, error) {
	if id.PID <= 0 {
		return nil, errors.New("no process recorded")
	}
	fd, err := unix.PidfdOpen(id.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("pid %d has exited", id.PID)
	}
	if err := id.Gone(); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, err
	}
	p := &Process{id: id}
	// Non-blocking, os.NewFile hands it to the poller (PIDFD_NONBLOCK
	// would, from Linux 5.10 on).
	if err == nil && unix.SetNonblock(fd, true) == nil {
		p.f = os.NewFile(uintptr(fd), fmt.Sprintf("pidfd %d", id.PID))
	} else if err == nil {
		unix.Close(fd)
	}
	return p, nil
}

// Close lets go of the process (its pidfd).
func (p *Process) Close() error {
	if p.f == nil {
		return nil
	}
	return p.f.Close()
}

// Signal sends sig to the process; an error once it has exited.
func (p *Process) Signal(sig unix.Signal) error {
	if p.f == nil {
		if err := p.id.Gone(); err != nil {
			return err
		}
		return unix.Kill(p.id.PID, sig)
	}
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); cerr != nil {
		return cerr
	}
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pid %d has exited", p.id.PID)
	}
	return err
}

// Exited returns a channel closed once the process exits. With a pidfd
// it waits in the runtime's poller: until the exit it makes no system
// call at all (a launcher that asked every second whether its workspace
// still ran read /proc some 40 times a second, idle). When ctx ends, or
// the Process is closed, the wait ends and the channel stays open. One
// wait at a time.
func (p *Process) Exited(ctx context.Context) <-chan struct{} {
	if p.f == nil {
		return p.id.polled(ctx)
	}
	exited := make(chan struct{})
	p.f.SetReadDeadline(time.Time{}) // an earlier wait's end
	rc, err := p.f.SyscallConn()
	if err != nil {
		return p.id.polled(ctx)
	}
	// A pidfd is readable once its process has exited. A wait in the
	// poller ends when the file is closed; one in a thread (the poller
	// would not take it) when the process exits.
	wake := context.AfterFunc(ctx, func() { p.f.SetReadDeadline(time.Now()) })
	go func() {
		defer wake()
		exit := false
		err := rc.Read(func(fd uintptr) bool { exit = readable(int(fd), 0); return exit })
		if err != nil && ctx.Err() == nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, os.ErrDeadlineExceeded) {
			err = rc.Control(func(fd uintptr) { exit = readable(int(fd), -1) })
		}
		if err == nil && exit && ctx.Err() == nil {
			close(exited)
		}
	}()
	return exited
}

// Exited returns a channel closed once the process id names exits, and
// an error when it does not run now (Gone's): Open's Exited, let go of
// when it has exited or ctx ends.
func (id Identity) Exited(ctx context.Context) (<-chan struct{}, error) {
	p, err := id.Open()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	exited := p.Exited(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-exited:
			close(done)
		case <-ctx.Done():
		}
		cancel()
		p.Close()
	}()
	return done, nil
}

// polled is Exited's channel for a process that has no pidfd: closed
// once Gone says it has gone, asked every second.
func (id Identity) polled(ctx context.Context) <-chan struct{} {
	exited := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for id.Gone() == nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		close(exited)
	}()
	return exited
}

// readable polls fd for input for up to timeout ms (-1: no bound).
func readable(fd, timeout int) bool {
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, timeout)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	}
}

// Wakes counts the times pid's threads went to sleep and woke again
// (their voluntary context switches, /proc/PID/task/*/status): what an
// idle process should not add to.
func Wakes(pid int) (int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue // a thread gone meanwhile
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "voluntary_ctxt_switches:"); ok {
				k, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					return 0, fmt.Errorf("/proc/%d/task/%s/status: %q", pid, task.Name(), line)
				}
				n += k
			}
		}
	}
	return n, nil
}
