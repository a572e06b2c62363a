package container

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Ulimit is one resource limit, as docker run --ulimit NAME=SOFT[:HARD]
// writes it.
type Ulimit struct {
	Name string `json:"name"` // nofile, nproc, core, …
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
}

// ulimitResources are the names docker run --ulimit takes.
var ulimitResources = map[string]int{
	"core": unix.RLIMIT_CORE, "cpu": unix.RLIMIT_CPU, "data": unix.RLIMIT_DATA, "fsize": unix.RLIMIT_FSIZE,
	"locks": unix.RLIMIT_LOCKS, "memlock": unix.RLIMIT_MEMLOCK, "msgqueue": unix.RLIMIT_MSGQUEUE,
	"nice": unix.RLIMIT_NICE, "nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC, "rss": unix.RLIMIT_RSS,
	"rtprio": unix.RLIMIT_RTPRIO, "rttime": unix.RLIMIT_RTTIME, "sigpending": unix.RLIMIT_SIGPENDING,
	"stack": unix.RLIMIT_STACK, "as": unix.RLIMIT_AS,
}

// ParseUlimit reads NAME=SOFT[:HARD] (docker run --ulimit's form); a
// value of -1 or "unlimited" is no limit, and HARD defaults to SOFT.
func ParseUlimit(s string) (Ulimit, error) {
	name, vals, ok := strings.Cut(s, "=")
	if _, known := ulimitResources[name]; !ok || !known {
		names := make([]string, 0, len(ulimitResources))
		for n := range ulimitResources {
			names = append(names, n)
		}
		sort.Strings(names)
		return Ulimit{}, fmt.Errorf("ulimit %q: want NAME=SOFT[:HARD], NAME one of %s", s, strings.Join(names, ", "))
	}
	soft, hard, hasHard := strings.Cut(vals, ":")
	u := Ulimit{Name: name}
	var err error
	if u.Soft, err = limitValue(soft); err != nil {
		return Ulimit{}, fmt.Errorf("ulimit %q: %w", s, err)
	}
	u.Hard = u.Soft
	if hasHard {
		if u.Hard, err = limitValue(hard); err != nil {
			return Ulimit{}, fmt.Errorf("ulimit %q: %w", s, err)
		}
	}
	if u.Soft > u.Hard {
		return Ulimit{}, fmt.Errorf("ulimit %q: the soft limit is above the hard one", s)
	}
	return u, nil
}

func limitValue(s string) (uint64, error) {
	if s == "-1" || s == "unlimited" {
		return unix.RLIM_INFINITY, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == math.MaxUint64 {
		return 0, fmt.Errorf("%q is not a number (or -1 for no limit)", s)
	}
	return n, nil
}

// String is the limit as --ulimit takes it.
func (u Ulimit) String() string {
	v := func(n uint64) string {
		if n == unix.RLIM_INFINITY {
			return "unlimited"
		}
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprintf("%s=%s:%s", u.Name, v(u.Soft), v(u.Hard))
}

// Within lowers u's hard limit (and its soft one with it) to this
// process's, which a process without CAP_SYS_RESOURCE cannot raise; it
// says whether it had to.
func (u *Ulimit) Within() (lowered bool, err error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(ulimitResources[u.Name], &cur); err != nil {
		return false, fmt.Errorf("ulimit %s: %w", u.Name, err)
	}
	if u.Hard <= cur.Max {
		return false, nil
	}
	u.Hard = cur.Max
	u.Soft = min(u.Soft, u.Hard)
	return true, nil
}

// setUlimits sets the limits in this process, for what it starts.
func setUlimits(us []Ulimit) error {
	for _, u := range us {
		res, ok := ulimitResources[u.Name]
		if !ok {
			return fmt.Errorf("ulimit %s: no such resource", u.Name)
		}
		if err := unix.Setrlimit(res, &unix.Rlimit{Cur: u.Soft, Max: u.Hard}); err != nil {
			return fmt.Errorf("ulimit %s: %w (a hard limit above this machine's needs CAP_SYS_RESOURCE)", u, err)
		}
	}
	return nil
}

// CanRaiseLimits says whether this process may raise hard resource
// limits (it has CAP_SYS_RESOURCE), as a container's init started by it
// as root then may.
func CanRaiseLimits() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	return os.Geteuid() == 0 && data[0].Effective&(1<<unix.CAP_SYS_RESOURCE) != 0
}
