package container

import (
	"fmt"

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
func dropBoundingCaps(noRaw bool) error {
	keep := map[uintptr]bool{}
	for _, c := range keptCaps {
		keep[c] = true
	}
	if noRaw {
		keep[unix.CAP_NET_RAW] = false
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}
