// Package procstat reads /proc/PID/stat, whose second field (the command
// name, in parentheses) may itself hold spaces and parentheses.
package procstat

import (
	"fmt"
	"os"
	"strings"

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

// Alive says whether the process id names still runs: the same start,
// boot and executable, not a process that reused its PID.
func (id Identity) Alive() bool {
	if id.PID <= 0 {
		return false
	}
	now, err := Identify(id.PID)
	return err == nil && now == id
}
