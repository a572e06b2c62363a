package container

import (
	"fmt"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// keptCaps are the capabilities a container's processes may have: Docker's
// default set, less CAP_MKNOD (there is no devices cgroup to make device
// nodes harmless). Without CAP_SYS_ADMIN root in the container cannot
// mount, without CAP_SYS_PTRACE it cannot trace init, without
// CAP_SYS_MODULE it cannot load kernel code.
var keptCaps = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER,
	unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE,
}

// capNames are keptCaps' names as Kubernetes and the OCI spec write them.
var capNames = map[uintptr]string{
	unix.CAP_CHOWN: "CHOWN", unix.CAP_DAC_OVERRIDE: "DAC_OVERRIDE", unix.CAP_FSETID: "FSETID", unix.CAP_FOWNER: "FOWNER",
	unix.CAP_NET_RAW: "NET_RAW", unix.CAP_SETGID: "SETGID", unix.CAP_SETUID: "SETUID", unix.CAP_SETFCAP: "SETFCAP", unix.CAP_SETPCAP: "SETPCAP",
	unix.CAP_NET_BIND_SERVICE: "NET_BIND_SERVICE", unix.CAP_SYS_CHROOT: "SYS_CHROOT", unix.CAP_KILL: "KILL", unix.CAP_AUDIT_WRITE: "AUDIT_WRITE",
}

// Capabilities names the capabilities a container's processes may have
// (CHOWN, KILL, …), for a workspace run by another engine (a Kubernetes
// Pod) to get what cove's own containers get. NET_RAW is left out: like a
// container in a network of its own, the workspace does not need it.
func Capabilities() []string {
	var names []string
	for _, c := range keptCaps {
		if c != unix.CAP_NET_RAW {
			names = append(names, capNames[c])
		}
	}
	return names
}

// dropBoundingCaps removes every other capability from init's bounding
// set. Init keeps what it holds now; whatever it starts (the workload,
// cove exec's processes) can never gain more than keptCaps. In a network
// of its own (NetPrivate) CAP_NET_RAW goes too, as podman drops it: a
// packet written raw onto the interface would skip the routes that keep
// the host's addresses out of reach, and pasta would send it on as the
// host (to its loopback too). Ping works without it (ping_group_range).
// Spec.CapAdd and CapDrop change the kept set (add, then drop), as
// Docker's --cap-add and --cap-drop do; NET_RAW stays out of a private
// network whatever they say.
//
// prctl applies each drop: threadPrctl, for the one thread about to fork
// (restrictThread). Init itself keeps its bounding set: it execs nothing
// once it runs as stage 2 but through spawn, whose thread is restricted
// first, and a drop on every thread cost one stop-the-world per
// capability (28, ~5 ms of each start).
func dropBoundingCaps(noRaw bool, add, drop []string, prctl func(option int, arg uintptr) error) error {
	keep, err := keptCapSet(noRaw, add, drop)
	if err != nil {
		return err
	}
	// CAP_SETPCAP is what dropping needs: it goes last, if it goes.
	order := make([]uintptr, 0, unix.CAP_LAST_CAP+1)
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if c != unix.CAP_SETPCAP {
			order = append(order, c)
		}
	}
	for _, c := range append(order, unix.CAP_SETPCAP) {
		if keep[c] {
			continue
		}
		if err := prctl(unix.PR_CAPBSET_DROP, c); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// keptCapSet is the set of capabilities a container keeps: keptCaps, plus
// add, less drop, less CAP_NET_RAW when noRaw.
func keptCapSet(noRaw bool, add, drop []string) (map[uintptr]bool, error) {
	keep := map[uintptr]bool{}
	for _, c := range keptCaps {
		keep[c] = true
	}
	for _, n := range add {
		c, err := ParseCap(n)
		if err != nil {
			return nil, err
		}
		keep[c] = true
	}
	for _, n := range drop {
		c, err := ParseCap(n)
		if err != nil {
			return nil, err
		}
		keep[c] = false
	}
	if noRaw {
		keep[unix.CAP_NET_RAW] = false
	}
	return keep, nil
}

// keptCapNames names the kept set as the OCI spec does (CAP_CHOWN, …),
// which is how Docker's seccomp profile says what a capability unlocks.
func keptCapNames(noRaw bool, add, drop []string) ([]string, error) {
	keep, err := keptCapSet(noRaw, add, drop)
	if err != nil {
		return nil, err
	}
	var names []string
	for name, c := range capByName {
		if keep[c] {
			names = append(names, "CAP_"+name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// allThreadsPrctl makes a prctl whose effect is per thread
// (no_new_privs) on every thread of init: the Go runtime forks the
// processes cove exec asks for from whichever thread runs that goroutine,
// and each child inherits that thread's flags. With cgo (a test binary)
// the runtime cannot, and the calling thread alone is changed: spawn
// restricts its own thread again before it forks (restrictThread).
func allThreadsPrctl(option int, arg uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, uintptr(option), arg, 0)
	if errno == syscall.ENOTSUP {
		return unix.Prctl(option, arg, 0, 0, 0)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// threadPrctl is prctl on the calling thread alone.
func threadPrctl(option int, arg uintptr) error { return unix.Prctl(option, arg, 0, 0, 0) }

// restrictThread applies the spec's bounding set and no_new_privs to the
// calling thread, which must be locked to its goroutine: the process it
// forks next gets no more. Only that thread: a drop on every thread stops
// the world and signals each thread, per capability, which on a busy
// machine cost every start and every cove exec milliseconds.
func restrictThread(spec *Spec) error {
	if err := dropBoundingCaps(spec.blocksRaw(), spec.CapAdd, spec.CapDrop, threadPrctl); err != nil {
		return err
	}
	if spec.NoNewPrivileges {
		return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	}
	return nil
}

// capByName are the capabilities by Docker's names (without CAP_).
var capByName = map[string]uintptr{
	"CHOWN": unix.CAP_CHOWN, "DAC_OVERRIDE": unix.CAP_DAC_OVERRIDE, "DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH,
	"FOWNER": unix.CAP_FOWNER, "FSETID": unix.CAP_FSETID, "KILL": unix.CAP_KILL, "SETGID": unix.CAP_SETGID,
	"SETUID": unix.CAP_SETUID, "SETPCAP": unix.CAP_SETPCAP, "LINUX_IMMUTABLE": unix.CAP_LINUX_IMMUTABLE,
	"NET_BIND_SERVICE": unix.CAP_NET_BIND_SERVICE, "NET_BROADCAST": unix.CAP_NET_BROADCAST, "NET_ADMIN": unix.CAP_NET_ADMIN,
	"NET_RAW": unix.CAP_NET_RAW, "IPC_LOCK": unix.CAP_IPC_LOCK, "IPC_OWNER": unix.CAP_IPC_OWNER, "SYS_MODULE": unix.CAP_SYS_MODULE,
	"SYS_RAWIO": unix.CAP_SYS_RAWIO, "SYS_CHROOT": unix.CAP_SYS_CHROOT, "SYS_PTRACE": unix.CAP_SYS_PTRACE,
	"SYS_PACCT": unix.CAP_SYS_PACCT, "SYS_ADMIN": unix.CAP_SYS_ADMIN, "SYS_BOOT": unix.CAP_SYS_BOOT, "SYS_NICE": unix.CAP_SYS_NICE,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "SYS_TIME": unix.CAP_SYS_TIME, "SYS_TTY_CONFIG": unix.CAP_SYS_TTY_CONFIG,
	"MKNOD": unix.CAP_MKNOD, "LEASE": unix.CAP_LEASE, "AUDIT_WRITE": unix.CAP_AUDIT_WRITE, "AUDIT_CONTROL": unix.CAP_AUDIT_CONTROL,
	"SETFCAP": unix.CAP_SETFCAP, "MAC_OVERRIDE": unix.CAP_MAC_OVERRIDE, "MAC_ADMIN": unix.CAP_MAC_ADMIN, "SYSLOG": unix.CAP_SYSLOG,
	"WAKE_ALARM": unix.CAP_WAKE_ALARM, "BLOCK_SUSPEND": unix.CAP_BLOCK_SUSPEND, "AUDIT_READ": unix.CAP_AUDIT_READ,
	"PERFMON": unix.CAP_PERFMON, "BPF": unix.CAP_BPF, "CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE,
}

// ParseCap reads a capability as Docker's --cap-add takes it (NET_ADMIN,
// CAP_NET_ADMIN, any case). ALL is not one: a container with every
// capability is a privileged one, which cove does not run.
func ParseCap(s string) (uintptr, error) {
	n := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "CAP_")
	if c, ok := capByName[n]; ok {
		return c, nil
	}
	if n == "ALL" {
		return 0, fmt.Errorf("capability ALL: every capability makes a privileged container, which cove does not run; name the ones needed")
	}
	return 0, fmt.Errorf("capability %q: no such capability (as in capabilities(7), without CAP_)", s)
}
