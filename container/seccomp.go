package container

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in a container: the parts of the kernel
// that are not namespaced (the keyring, the clock, modules, kexec, swap,
// accounting) and the big attack surfaces a workload has no use for
// (bpf, perf events, userfaultfd, file handles, the new mount API). Most
// need a capability the container does not hold anyway; the filter is
// the second wall, for when a kernel bug forgets the first. It is the
// deny side of Docker's default profile, less ptrace (debuggers work on
// kernels since 4.8) and personality.
var deniedSyscalls = []uintptr{
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_OPEN_BY_HANDLE_AT,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_LOOKUP_DCOOKIE, unix.SYS_QUOTACTL,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
	unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	// New namespaces: an unprivileged user namespace is where most recent
	// kernel privilege escalations start.
	unix.SYS_UNSHARE, unix.SYS_SETNS,
}

// cloneNamespaces are clone(2)'s flags for new namespaces (CLONE_NEWTIME
// is clone3's and unshare's only).
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// seccompProgram is the filter: on another architecture's calling
// convention (i386 or x32 on x86_64) every call fails with ENOSYS, so the
// list cannot be side-stepped; clone3 says ENOSYS too, so that libc falls
// back to clone, whose flags the filter can read (a pointer's struct it
// cannot); clone with a namespace flag and the denied calls get EPERM.
// Written by hand (golang.org/x/net/bpf would add a dependency and no
// labels): a load, a check and a return per case.
func seccompProgram() ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // seccomp_data.args[0], its low half (little endian)
		x32Bit  = 0x40000000
		allow   = unix.SECCOMP_RET_ALLOW
		eperm   = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys  = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	load := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	ret := func(v uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: v} }
	// A jump goes to the instruction at index *to, resolved once the
	// program's length is known: when the test holds, or when it fails.
	type jump struct {
		at          int
		to          *int
		whenFailing bool
	}
	var (
		prog  []unix.SockFilter
		jumps []jump
	)
	test := func(op uint16, k uint32, to *int, whenFailing bool) {
		jumps = append(jumps, jump{len(prog), to, whenFailing})
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
	}
	cond := func(op uint16, k uint32, to *int) { test(op, k, to, false) }
	var retEPERM, retENOSYS, checkClone int

	prog = append(prog, load(offArch))
	test(unix.BPF_JEQ, arch, &retENOSYS, true) // another architecture's calls
	prog = append(prog, load(offNr))
	if runtime.GOARCH == "amd64" {
		cond(unix.BPF_JGE, x32Bit, &retENOSYS)
	}
	cond(unix.BPF_JEQ, unix.SYS_CLONE3, &retENOSYS)
	cond(unix.BPF_JEQ, unix.SYS_CLONE, &checkClone)
	for _, nr := range deniedSyscalls {
		cond(unix.BPF_JEQ, uint32(nr), &retEPERM)
	}
	prog = append(prog, ret(allow))
	checkClone = len(prog)
	prog = append(prog, load(offArg0))
	cond(unix.BPF_JSET, cloneNamespaces, &retEPERM)
	prog = append(prog, ret(allow))
	retEPERM = len(prog)
	prog = append(prog, ret(eperm))
	retENOSYS = len(prog)
	prog = append(prog, ret(enosys))

	for _, j := range jumps {
		d := *j.to - j.at - 1
		if d < 0 || d > 255 {
			return nil, fmt.Errorf("seccomp filter: a jump of %d", d)
		}
		if j.whenFailing {
			prog[j.at].Jf = uint8(d)
		} else {
			prog[j.at].Jt = uint8(d)
		}
	}
	return prog, nil
}

// installSeccomp applies the filter to every thread of this process (init)
// and so to all it starts, which cannot remove it. Init holds
// CAP_SYS_ADMIN in its user namespace, so no_new_privs is not needed, and
// setuid programs in the container (sudo) keep working.
func installSeccomp() error {
	prog, err := seccompProgram()
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return fmt.Errorf("install the seccomp filter: %w (a kernel without seccomp filters? --security-opt seccomp=unconfined runs without)", errno)
	case tid != 0: // TSYNC names a thread it could not bring along
		return fmt.Errorf("install the seccomp filter: thread %d could not take it", tid)
	}
	return nil
}
