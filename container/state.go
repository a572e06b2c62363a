package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cove-sh/cove/internal/atomicfile"
	"github.com/cove-sh/cove/internal/procstat"
	"golang.org/x/sys/unix"
)

// State is what other cove processes know of a container: enough to find
// its init and to be sure that a pid is still that init, not a process that
// got the pid after it exited.
type State struct {
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	Pid       int       `json:"pid"`
	StartTime uint64    `json:"start_time"` // field 22 of /proc/PID/stat, in clock ticks since boot
	BootID    string    `json:"boot_id"`
	ExeDev    uint64    `json:"exe_dev"` // what /proc/PID/exe is: the bound cove binary
	ExeIno    uint64    `json:"exe_ino"`
	Image     string    `json:"image"`
	Digest    string    `json:"digest"`
	Cgroup    []string  `json:"cgroup,omitempty"`
	Dir       string    `json:"dir"` // the container's own files (overlay upper layer)
	Workdir   string    `json:"workdir,omitempty"`
	Created   time.Time `json:"created"`
	Remove    bool      `json:"remove,omitempty"` // --rm
	Keep      bool      `json:"keep,omitempty"`   // Dir outlives the container (a workspace's layer)
	ExitCode  *int      `json:"exit_code,omitempty"`
	// Ports are the host ports forwarded into it (NetPrivate).
	Ports []Port `json:"ports,omitempty"`
	// NetHelper is the process that keeps its pasta (NetPrivate): it
	// ends with init, and Stop makes sure it has.
	NetHelper *State `json:"net_helper,omitempty"`
}

// Status is a container's state as seen now.
type Status string

// The statuses ps shows.
const (
	Running Status = "running"
	Exited  Status = "exited"
)

// StateDir holds a directory per container name under the runtime dir.
type StateDir string

// ErrNameInUse is returned by Create for a name another container has.
var ErrNameInUse = errors.New("name in use")

// Create claims name: the directory is made atomically, so of two
// launchers asking for one name at once, one wins.
func (d StateDir) Create(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	err := os.Mkdir(filepath.Join(string(d), name), 0o700)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("container %q: %w (cove rm %s, or choose another --name)", name, ErrNameInUse, name)
	}
	return err
}

// ValidName says whether name can be a container's (letters, digits, _
// . -, not first).
func ValidName(name string) error { return validName(name) }

func validName(name string) error {
	if name == "" || len(name) > 128 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "" || name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("container name %q: use letters, digits, _ . - (not first)", name)
	}
	return nil
}

// Dir is the directory of the container name: its state and control socket.
func (d StateDir) Dir(name string) string { return filepath.Join(string(d), name) }

// Save writes st atomically (temp file, fsync, rename).
func (d StateDir) Save(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(string(d), st.Name, "state.json"), b)
}

// Load reads the state of the container name.
func (d StateDir) Load(name string) (*State, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(string(d), name, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no container %q (see cove ps --all)", name)
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("container %q: broken state file: %w", name, err)
	}
	return &st, nil
}

// List returns the states of all containers, by creation time. Names
// claimed by a launcher still starting are skipped.
func (d StateDir) List() ([]*State, error) {
	entries, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*State
	for _, e := range entries {
		if st, err := d.Load(e.Name()); err == nil {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Delete forgets the container name.
func (d StateDir) Delete(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(string(d), name))
}

// SetIdentity copies the identity of a started container's init.
func (st *State) SetIdentity(c *Container) {
	st.Pid, st.StartTime, st.BootID, st.ExeDev, st.ExeIno = c.Pid, c.Identity.StartTime, c.Identity.BootID, c.Identity.ExeDev, c.Identity.ExeIno
	st.NetHelper = c.NetHelper
	st.Ports = c.Spec.Ports
}

// Track fills in the identity of the process pid: its start time, the
// boot, and the file it runs (procstat.Identify, which the other records
// of a process, a task's agent, use too).
func (st *State) Track(pid int) error {
	id, err := procstat.Identify(pid)
	if err != nil {
		return err
	}
	return st.set(pid, id)
}

// TrackStarted is Track for a process this one has just started running
// program (procstat.IdentifyStarted).
func (st *State) TrackStarted(pid int, program string) error {
	id, err := procstat.IdentifyStarted(pid, program)
	if err != nil {
		return err
	}
	return st.set(pid, id)
}

func (st *State) set(pid int, id procstat.Identity) error {
	start, err := strconv.ParseUint(id.Start, 10, 64)
	if err != nil {
		return fmt.Errorf("/proc/%d/stat: start time %q: %w", pid, id.Start, err)
	}
	st.Pid, st.StartTime, st.BootID, st.ExeDev, st.ExeIno = pid, start, id.Boot, id.ExeDev, id.ExeIno
	return nil
}

// Status checks, now, whether the recorded process is still our init: the
// pid exists, started at the recorded time in this boot, and runs the
// recorded binary. A pid reused by any other process fails one of these.
func (st *State) Status() Status {
	if st.Gone() == nil {
		return Running
	}
	return Exited
}

// Gone says why the container's init does not run now (nil: it does).
func (st *State) Gone() error {
	return st.identity().Gone()
}

// Exited returns a channel closed once the container's init exits (its
// workload ended, cove stop, a kill): the kernel's word, with no polling
// until then. An error: it does not run now.
func (st *State) Exited(ctx context.Context) (<-chan struct{}, error) {
	return st.identity().Exited(ctx)
}

// identity is what tells its init from a later process with its PID.
func (st *State) identity() procstat.Identity {
	return procstat.Identity{PID: st.Pid, Start: strconv.FormatUint(st.StartTime, 10), Boot: st.BootID, ExeDev: st.ExeDev, ExeIno: st.ExeIno}
}

// Stop asks the container to stop: SIGTERM to init (which passes it to the
// workload), then, after timeout, SIGKILL to every process in its cgroup
// and to init, whose exit ends its PID namespace. It returns once init is
// gone. Stopping a stopped container does nothing.
func (st *State) Stop(timeout time.Duration) error {
	cg := st.cgroup()
	// Signals go through a pidfd of init, taken before its identity is
	// checked: never to a later process that got its PID.
	if p, err := st.identity().Open(); err == nil {
		defer p.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		exited := p.Exited(ctx)
		p.Signal(unix.SIGTERM)
		if !within(exited, timeout) {
			cg.kill()
			p.Signal(unix.SIGKILL)
			if !within(exited, 5*time.Second) {
				return fmt.Errorf("container %s (pid %d) did not die", st.Name, st.Pid)
			}
		}
	}
	// Whoever started it may be gone (-d): the cgroup is ours to remove.
	cg.kill()
	cg.remove()
	st.stopNetHelper()
	return nil
}

// within says whether done is closed within d: as soon as it is, where a
// poll every 10-20 ms answered up to that much later.
func within(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// stopNetHelper makes sure the network helper (and so pasta, and the
// forwarded ports) is gone once init is: it leaves by itself when init
// does, and is killed if it has not within two seconds.
func (st *State) stopNetHelper() {
	h := st.NetHelper
	if h == nil {
		return
	}
	p, err := h.identity().Open()
	if err != nil {
		return // gone
	}
	defer p.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !within(p.Exited(ctx), 2*time.Second) {
		p.Signal(unix.SIGKILL)
	}
}

// PortUser returns the name of a running container in d that forwards a
// host port overlapping p, or "".
func (d StateDir) PortUser(p Port) string {
	list, _ := d.List()
	for _, st := range list {
		for _, q := range st.Ports {
			if q.Overlaps(p) && st.Status() == Running {
				return st.Name
			}
		}
	}
	return ""
}

func (st *State) cgroup() *cgroup {
	cg := &cgroup{paths: map[string]string{}}
	for i, p := range st.Cgroup {
		cg.paths[strconv.Itoa(i)] = p
	}
	if len(st.Cgroup) == 1 {
		// A v2 cgroup can be killed whole, with cgroup.kill.
		if _, err := os.Stat(filepath.Join(st.Cgroup[0], "cgroup.kill")); err == nil {
			cg.v2, cg.paths = true, map[string]string{"": st.Cgroup[0]}
		}
	}
	return cg
}
