package container

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The container's seccomp filter is Docker's default profile, taken from
// the package Docker and podman build theirs from (moby/profiles), not a
// copy of it: an allow list, with the calls a capability unlocks allowed
// only when the container keeps that capability (mount and unshare with
// CAP_SYS_ADMIN, which a container never keeps), argument filters on
// clone (no new namespaces), personality (the few harmless personas) and
// socket (no AF_VSOCK, a door to the hypervisor), and io_uring absent
// (refused, as Docker has refused it since 2023: it bypasses the filter's
// view of what a process does). Every other call fails with EPERM.
//
// Two details are runc's, not the profile's:
//   - a call newer than any the profile names fails with ENOSYS, not EPERM,
//     so that a libc on a newer kernel falls back to the older call it
//     knows (as it does where the kernel lacks the call);
//   - another architecture's calling convention (i386, or x32 on x86_64)
//     fails whole: the filter checks numbers of the native one only.
//
// The system call numbers come from elastic/go-seccomp-bpf's tables
// (generated into zsyscalls_GOARCH.go: no start-up cost); the
// filter is assembled here, not by that library's compiler, which does not
// load the call's number again after checking an argument (a later rule
// then compares an argument with call numbers: socket(AF_VSOCK=40) would
// have passed as x86_64's call 40). The shape: the few rules with argument
// checks first (one compare each for any other call), then the allowed
// numbers as sorted ranges, each jump short and local.

// errnoRet is a SECCOMP_RET_ERRNO that returns errno.
func errnoRet(errno unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(errno) }

//go:generate go run ../scripts/gensyscalls

// syscallEntry is a system call's name and number (zsyscalls_GOARCH.go).
type syscallEntry struct {
	name string
	nr   uint32
}

// syscallNr is the number of the native call named name.
func syscallNr(name string) (uint32, bool) {
	i, ok := slices.BinarySearchFunc(syscallTable[:], name, func(e syscallEntry, n string) int { return strings.Compare(e.name, n) })
	if !ok {
		return 0, false
	}
	return syscallTable[i].nr, true
}

// argOps are the argument checks the filter can make: all of libseccomp's.
var argOps = []specs.LinuxSeccompOperator{specs.OpEqualTo, specs.OpNotEqual, specs.OpMaskedEqual,
	specs.OpLessThan, specs.OpLessEqual, specs.OpGreaterThan, specs.OpGreaterEqual}

// seccompRule is one rule of the profile for one call: its action when
// every argument check holds.
type seccompRule struct {
	nr     uint32
	action uint32
	args   []specs.LinuxSeccompArg
}

// seccompRules is Docker's default profile for a container that keeps caps
// (names as CAP_CHOWN): the calls allowed outright, the rules with argument
// checks or an errno of their own, and the highest call number the profile
// names (calls above it are newer than the profile: ENOSYS).
func seccompRules(caps []string) (allowed []uint32, rules []seccompRule, highest uint32, err error) {
	if len(syscallTable) == 0 {
		return nil, nil, 0, fmt.Errorf("no seccomp filter for %s: --security-opt seccomp=unconfined runs without", runtime.GOARCH)
	}
	rs := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps}}}
	prof, err := mobyseccomp.GetDefaultProfile(rs)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("seccomp profile: %w", err)
	}
	if prof.DefaultAction != specs.ActErrno || prof.DefaultErrnoRet == nil || unix.Errno(*prof.DefaultErrnoRet) != unix.EPERM {
		return nil, nil, 0, fmt.Errorf("seccomp profile: default action %s, want EPERM", prof.DefaultAction)
	}
	plain := map[uint32]bool{}
	for _, sc := range prof.Syscalls {
		var action uint32
		switch sc.Action {
		case specs.ActAllow:
			action = unix.SECCOMP_RET_ALLOW
		case specs.ActErrno:
			errno := unix.EPERM
			if sc.ErrnoRet != nil {
				errno = unix.Errno(*sc.ErrnoRet)
			}
			action = errnoRet(errno)
		default:
			return nil, nil, 0, fmt.Errorf("seccomp profile: action %s for %v", sc.Action, sc.Names)
		}
		for _, a := range sc.Args {
			if a.Index > 5 || !slices.Contains(argOps, a.Op) {
				return nil, nil, 0, fmt.Errorf("seccomp profile: %v: argument check %+v not supported", sc.Names, a)
			}
		}
		for _, name := range sc.Names {
			nr, known := syscallNr(name)
			if !known {
				// Another architecture's call, or one newer than the
				// table: libseccomp skips those too.
				continue
			}
			highest = max(highest, nr)
			if len(sc.Args) == 0 && action == unix.SECCOMP_RET_ALLOW {
				plain[nr] = true
				continue
			}
			rules = append(rules, seccompRule{nr: nr, action: action, args: sc.Args})
		}
	}
	for _, r := range rules {
		if plain[r.nr] {
			return nil, nil, 0, fmt.Errorf("seccomp profile: call %d both allowed and checked", r.nr)
		}
	}
	for nr := range plain {
		allowed = append(allowed, nr)
	}
	slices.Sort(allowed)
	return allowed, rules, highest, nil
}

// A label names an instruction a jump goes to; asm resolves them.
type label int

type asmInsn struct {
	in     bpf.Instruction
	jt, jf label   // for a conditional jump: where each way goes (0: the next instruction)
	at     []label // the labels this instruction carries
}

// asm builds a BPF program whose jumps name labels.
type asm struct {
	insns  []asmInsn
	labels int
	next   []label // the labels the next instruction carries
}

func (a *asm) label() label { a.labels++; return label(a.labels) }
func (a *asm) mark(l label) { a.next = append(a.next, l) }
func (a *asm) emit(in bpf.Instruction) {
	a.insns = append(a.insns, asmInsn{in: in, at: a.next})
	a.next = nil
}
func (a *asm) jump(cond bpf.JumpTest, val uint32, jt, jf label) {
	a.insns = append(a.insns, asmInsn{in: bpf.JumpIf{Cond: cond, Val: val}, jt: jt, jf: jf, at: a.next})
	a.next = nil
}
func (a *asm) ret(v uint32) { a.emit(bpf.RetConstant{Val: v}) }

func (a *asm) assemble() ([]bpf.Instruction, error) {
	pos := map[label]int{}
	for i, in := range a.insns {
		for _, l := range in.at {
			pos[l] = i
		}
	}
	out := make([]bpf.Instruction, len(a.insns))
	for i, in := range a.insns {
		j, ok := in.in.(bpf.JumpIf)
		if !ok {
			out[i] = in.in
			continue
		}
		skip := func(l label) (uint8, error) {
			if l == 0 {
				return 0, nil
			}
			to, ok := pos[l]
			d := to - i - 1
			if !ok || d < 0 || d > 255 {
				return 0, fmt.Errorf("seccomp filter: instruction %d jumps %d", i, d)
			}
			return uint8(d), nil
		}
		var err1, err2 error
		j.SkipTrue, err1 = skip(in.jt)
		j.SkipFalse, err2 = skip(in.jf)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		out[i] = j
	}
	return out, nil
}

// seccomp_data's offsets: the call's number, its architecture, argument i
// (its low half first: amd64 and arm64 are little endian).
const (
	offNr   = 0
	offArch = 4
	x32Bit  = 0x40000000
)

func offArg(i uint, high bool) uint32 {
	off := 16 + 8*uint32(i)
	if high {
		off += 4
	}
	return off
}

// seccompProgram is the profile's filter for a container keeping caps:
// native calls only, then the calls with argument checks, then the
// allowed numbers; anything else is refused with EPERM.
func seccompProgram(caps []string) ([]bpf.Instruction, uint32, error) {
	allowed, rules, highest, err := seccompRules(caps)
	if err != nil {
		return nil, 0, err
	}
	var a asm
	a.nativeOnly()
	a.checkedCalls(rules)
	a.allowedRanges(allowed)
	a.ret(errnoRet(unix.EPERM))
	prog, err := a.assemble()
	return prog, highest, err
}

// nativeOnly refuses another architecture's calling convention (i386, and
// x32 on x86_64) with ENOSYS, and leaves the call's number loaded.
func (a *asm) nativeOnly() {
	// BPF jumps only forward, and at most 255: each refusal below is
	// right after its test.
	native := a.label()
	a.emit(bpf.LoadAbsolute{Off: offArch, Size: 4})
	a.jump(bpf.JumpEqual, auditArch, native, 0)
	a.ret(errnoRet(unix.ENOSYS)) // another architecture's calls
	a.mark(native)
	a.emit(bpf.LoadAbsolute{Off: offNr, Size: 4})
	if runtime.GOARCH == "amd64" {
		x64 := a.label()
		a.jump(bpf.JumpGreaterOrEqual, x32Bit, 0, x64)
		a.ret(errnoRet(unix.ENOSYS)) // x32's calls
		a.mark(x64)
	}
}

// checkedCalls compiles the rules with argument checks: one compare per
// checked call (socket has a rule per address family), so any other call
// passes them all quickly; its rules in the profile's order inside, the
// first that holds deciding, and none holding refused.
func (a *asm) checkedCalls(rules []seccompRule) {
	var order []uint32
	byNr := map[uint32][]seccompRule{}
	for _, r := range rules {
		if byNr[r.nr] == nil {
			order = append(order, r.nr)
		}
		byNr[r.nr] = append(byNr[r.nr], r)
	}
	for _, nr := range order {
		other := a.label()
		a.jump(bpf.JumpEqual, nr, 0, other)
		for _, r := range byNr[nr] {
			fail := a.label()
			for _, arg := range r.args {
				a.argCheck(arg, fail)
			}
			a.ret(r.action)
			// The next rule is the same call's: it loads what it checks,
			// and the call's number is not needed again (whatever no
			// rule takes is refused below).
			a.mark(fail)
		}
		// No rule held: refused (the call is in no allowed range).
		a.ret(errnoRet(unix.EPERM))
		a.mark(other)
	}
}

// argHalf is the high or low 32 bits of an argument check's Value and
// ValueTwo: the filter loads an argument a half at a time.
func argHalf(arg specs.LinuxSeccompArg, high bool) (val, two uint32) {
	if high {
		return uint32(arg.Value >> 32), uint32(arg.ValueTwo >> 32)
	}
	return uint32(arg.Value), uint32(arg.ValueTwo)
}

// argCheck goes on to the next instruction if the 64-bit argument check
// holds, else jumps to fail.
func (a *asm) argCheck(arg specs.LinuxSeccompArg, fail label) {
	switch arg.Op {
	case specs.OpEqualTo:
		for _, high := range []bool{true, false} {
			v, _ := argHalf(arg, high)
			a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, high), Size: 4})
			a.jump(bpf.JumpEqual, v, 0, fail)
		}
	case specs.OpNotEqual:
		pass := a.label()
		hi, _ := argHalf(arg, true)
		lo, _ := argHalf(arg, false)
		a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, true), Size: 4})
		a.jump(bpf.JumpEqual, hi, 0, pass)
		a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, false), Size: 4})
		a.jump(bpf.JumpEqual, lo, fail, 0)
		a.mark(pass)
	case specs.OpLessThan, specs.OpLessEqual, specs.OpGreaterThan, specs.OpGreaterEqual:
		a.orderCheck(arg, fail)
	case specs.OpMaskedEqual: // (arg & Value) == ValueTwo
		for _, high := range []bool{true, false} {
			mask, want := argHalf(arg, high)
			a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, high), Size: 4})
			a.emit(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: mask})
			a.jump(bpf.JumpEqual, want, 0, fail)
		}
	}
}

// orderCheck is argCheck for <, <=, > and >=: unsigned 64-bit order from
// two halves, the high halves deciding unless equal, then the low halves.
func (a *asm) orderCheck(arg specs.LinuxSeccompArg, fail label) {
	pass := a.label()
	above, below := pass, fail // the high half is above or below the value's
	if arg.Op == specs.OpLessThan || arg.Op == specs.OpLessEqual {
		above, below = fail, pass
	}
	hi, _ := argHalf(arg, true)
	lo, _ := argHalf(arg, false)
	a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, true), Size: 4})
	a.jump(bpf.JumpGreaterThan, hi, above, 0)
	a.jump(bpf.JumpEqual, hi, 0, below)
	a.emit(bpf.LoadAbsolute{Off: offArg(arg.Index, false), Size: 4})
	switch arg.Op {
	case specs.OpGreaterThan:
		a.jump(bpf.JumpGreaterThan, lo, pass, fail)
	case specs.OpGreaterEqual:
		a.jump(bpf.JumpGreaterOrEqual, lo, pass, fail)
	case specs.OpLessThan:
		a.jump(bpf.JumpGreaterOrEqual, lo, fail, pass)
	case specs.OpLessEqual:
		a.jump(bpf.JumpGreaterThan, lo, fail, pass)
	}
	a.mark(pass)
}

// allowedRanges allows the allowed numbers, as ranges in order: past a
// range's end, go on; inside it, allow; before its start, no later range
// holds the call: refused.
func (a *asm) allowedRanges(allowed []uint32) {
	for i := 0; i < len(allowed); {
		lo, hi := allowed[i], allowed[i]
		for i++; i < len(allowed) && allowed[i] == hi+1; i++ {
			hi = allowed[i]
		}
		next, deny := a.label(), a.label()
		a.jump(bpf.JumpGreaterThan, hi, next, 0)
		a.jump(bpf.JumpGreaterOrEqual, lo, 0, deny)
		a.ret(unix.SECCOMP_RET_ALLOW)
		a.mark(deny)
		a.ret(errnoRet(unix.EPERM))
		a.mark(next)
	}
}

// seccompPrograms are the filters to install, in order: Docker's profile,
// then the one that turns calls newer than the profile into ENOSYS (the
// kernel takes the last installed filter's errno when two say "error").
func seccompPrograms(caps []string) ([][]unix.SockFilter, error) {
	prog, highest, err := seccompProgram(caps)
	if err != nil {
		return nil, err
	}
	profile, err := toSockFilter(prog)
	if err != nil {
		return nil, err
	}
	newer, err := toSockFilter(newerCallsFilter(auditArch, highest))
	if err != nil {
		return nil, err
	}
	return [][]unix.SockFilter{profile, newer}, nil
}

// newerCallsFilter says ENOSYS for native calls above highest and allows
// the rest (the profile's filter decides those).
func newerCallsFilter(native, highest uint32) []bpf.Instruction {
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		// Another architecture's calls: the profile's filter refuses them.
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: native, SkipFalse: 2},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		// x32's numbers (bit 30 set) land here too: ENOSYS, as the
		// profile's filter says for them.
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: highest, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: errnoRet(unix.ENOSYS)},
	}
}

func toSockFilter(insts []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// installSeccomp applies the filters for a container keeping caps to
// every thread of this process (init) and so to all it starts, which
// cannot remove them. Init holds CAP_SYS_ADMIN in its user namespace, so
// no_new_privs is not needed, and setuid programs in the container (sudo)
// keep working.
func installSeccomp(caps []string) error {
	progs, err := seccompPrograms(caps)
	if err != nil {
		return err
	}
	for _, prog := range progs {
		fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
		tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
		runtime.KeepAlive(prog)
		switch {
		case errno != 0:
			return fmt.Errorf("install the seccomp filter: %w (a kernel without seccomp filters? --security-opt seccomp=unconfined runs without)", errno)
		case tid != 0: // TSYNC names a thread it could not bring along
			return fmt.Errorf("install the seccomp filter: thread %d could not take it", tid)
		}
	}
	return nil
}
