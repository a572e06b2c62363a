package container

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cove-sh/cove/internal/execfile"
	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// mustRefuse are calls Docker's default profile refuses a container with
// Docker's default capabilities, written out here rather than derived from
// the profile, so that a profile or a compiler that lets one through fails.
var mustRefuse = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "mount", "umount2", "pivot_root", "unshare", "setns",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
	"swapon", "swapoff", "reboot", "acct", "settimeofday", "clock_settime", "quotactl",
	"syslog", "vhangup", "kcmp", "lookup_dcookie",
}

// profileAllowed names the calls the profile lets a container keeping caps
// make, with or without conditions on their arguments, and the ones it
// answers with an errno of its own (clone3: ENOSYS).
func profileAllowed(t *testing.T, caps []string) (plain, conditional, errno map[string]bool) {
	t.Helper()
	prof, err := mobyseccomp.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: caps}}})
	if err != nil {
		t.Fatal(err)
	}
	plain, conditional, errno = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, sc := range prof.Syscalls {
		for _, n := range sc.Names {
			switch {
			case sc.Action == specs.ActErrno:
				errno[n] = true
			case len(sc.Args) > 0:
				conditional[n] = true
			default:
				plain[n] = true
			}
		}
	}
	return plain, conditional, errno
}

// TestSeccompRefusesWhatDockerRefuses runs a probe in a container that
// makes, raw, every call of this architecture that Docker's default
// profile refuses, and the argument-filtered ones both ways: each refused
// call must fail with EPERM there, under the filter; calls newer than the
// profile fail with ENOSYS; and without the filter the same probe gets
// other answers for the calls the kernel alone would let through (so the
// EPERMs are the filter's, not the missing capabilities').
func TestSeccompRefusesWhatDockerRefuses(t *testing.T) {
	needRoot(t)
	probe := filepath.Join(t.TempDir(), "syscallprobe")
	build := exec.Command("go", "build", "-o", probe, "./testdata/syscallprobe")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	caps, err := keptCapNames(false, nil, nil) // runIn's network is the host's: NET_RAW is kept
	must(t, err)
	plain, conditional, errnoRules := profileAllowed(t, caps)
	for _, n := range mustRefuse {
		if plain[n] || conditional[n] {
			t.Errorf("Docker's default profile allows %s: update mustRefuse only if Docker changed its mind", n)
		}
	}

	var args, refused []string
	for _, e := range syscallTable {
		name, nr := e.name, e.nr
		if plain[name] || conditional[name] || errnoRules[name] {
			continue
		}
		refused = append(refused, name)
		args = append(args, fmt.Sprintf("%s:%d", name, nr))
	}
	slices.Sort(refused)
	for _, n := range mustRefuse {
		if _, known := syscallNr(n); known && !slices.Contains(refused, n) {
			t.Errorf("%s is not among the calls the test makes", n)
		}
	}
	nr := func(name string) uintptr { n, _ := syscallNr(name); return uintptr(n) }
	special := map[string]string{
		// The argument filters, both ways.
		"socket-vsock":                  fmt.Sprintf("%d:%d:%d:0", nr("socket"), unix.AF_VSOCK, unix.SOCK_STREAM),
		"socket-unix":                   fmt.Sprintf("%d:%d:%d:0", nr("socket"), unix.AF_UNIX, unix.SOCK_STREAM),
		"personality-query":             fmt.Sprintf("%d:0xffffffff", nr("personality")),
		"personality-addr-no-randomize": fmt.Sprintf("%d:%d", nr("personality"), addrNoRandomize),
		"clone-newuser":                 fmt.Sprintf("%d:%d", nr("clone"), unix.CLONE_NEWUSER|uint32(unix.SIGCHLD)),
		"clone3":                        fmt.Sprintf("%d:0:0", nr("clone3")),
		// Above every number the profile names: a newer call.
		"newer": fmt.Sprintf("%d", maxNr()+100),
	}
	for label, a := range special {
		args = append(args, label+":"+a)
	}
	probeIn := func(noSeccomp bool) map[string]unix.Errno {
		img, cfg := testImage(t, nil)
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) {
			s.NoSeccomp = noSeccomp
			must(t, os.MkdirAll(s.Upper, 0o755))
			data, err := os.ReadFile(probe)
			must(t, err)
			must(t, execfile.Write(filepath.Join(s.Upper, "syscallprobe"), data, 0o755))
		}, append([]string{"/syscallprobe"}, args...)...).ok(t)
		got := map[string]unix.Errno{}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			label, e, _ := strings.Cut(line, " ")
			n, err := strconv.Atoi(e)
			if err != nil {
				t.Fatalf("probe said %q", line)
			}
			got[label] = unix.Errno(n)
		}
		return got
	}

	_, _, highest, err := seccompRules(caps)
	must(t, err)
	got := probeIn(false)
	for _, name := range refused {
		want := unix.EPERM
		if n, _ := syscallNr(name); n > highest {
			want = unix.ENOSYS // newer than the profile: libc falls back
		}
		if got[name] != want {
			t.Errorf("%s: %v under the filter, want %v", name, got[name], want)
		}
	}
	want := map[string]unix.Errno{
		"socket-vsock": unix.EPERM, "socket-unix": 0,
		"personality-query": 0, "personality-addr-no-randomize": unix.EPERM,
		"clone-newuser": unix.EPERM, "clone3": unix.ENOSYS, "newer": unix.ENOSYS,
	}
	for label, e := range want {
		if got[label] != e {
			t.Errorf("%s: %v under the filter, want %v", label, got[label], e)
		}
	}
	t.Logf("%d calls refused with EPERM, checked from inside", len(refused))

	// Without the filter the kernel answers these itself, not with EPERM:
	// the answers above were the filter's.
	free := probeIn(true)
	for _, label := range []string{"io_uring_setup", "unshare", "keyctl", "socket-vsock", "clone3", "personality-addr-no-randomize"} {
		if free[label] == unix.EPERM {
			t.Errorf("%s: EPERM without the filter too; the test cannot tell the filter's answer", label)
		}
	}
}

func maxNr() uint32 {
	m := uint32(0)
	for _, e := range syscallTable {
		m = max(m, e.nr)
	}
	return m
}

// TestSeccompFollowsCapabilities: a capability the container is given
// unlocks what Docker's profile ties to it (CAP_SYS_PTRACE: kcmp),
// and a container without it does not get those calls.
func TestSeccompFollowsCapabilities(t *testing.T) {
	with, err := keptCapNames(false, []string{"SYS_PTRACE"}, nil)
	must(t, err)
	without, err := keptCapNames(true, nil, nil)
	must(t, err)
	if slices.Contains(without, "CAP_NET_RAW") {
		t.Errorf("a private network's container keeps NET_RAW: %v", without)
	}
	p1, _, _ := profileAllowed(t, with)
	p2, _, _ := profileAllowed(t, without)
	if !p1["kcmp"] || p2["kcmp"] {
		t.Errorf("kcmp: with SYS_PTRACE %v, without %v", p1["kcmp"], p2["kcmp"])
	}
	for _, caps := range [][]string{with, without} {
		progs, err := seccompPrograms(caps)
		must(t, err)
		for _, prog := range progs {
			if len(prog) == 0 || len(prog) > unix.BPF_MAXINSNS {
				t.Fatalf("a filter of %d instructions", len(prog))
			}
			t.Logf("a filter of %d instructions", len(prog))
		}
	}
}

// addrNoRandomize is personality(2)'s ADDR_NO_RANDOMIZE (linux/personality.h).
const addrNoRandomize = 0x0040000

// TestSyscallTablesUseTheKernelsNames: every call of each table that
// Docker's profile does not name (for any architecture or capability) is
// one the profile leaves out on purpose. A name the table spells otherwise
// than the kernel and libseccomp (elastic's arm64 "fstatat" for
// newfstatat) would be refused as if the profile left it out: every stat
// of a Go or C program on arm64 failed.
func TestSyscallTablesUseTheKernelsNames(t *testing.T) {
	t.Parallel()
	named := map[string]bool{}
	for _, sc := range mobyseccomp.DefaultProfile().Syscalls {
		for _, n := range sc.Names {
			named[n] = true
		}
	}
	leftOut := map[string]bool{"arch_specific_syscall": true, "afs_syscall": true, "create_module": true, "get_kernel_syms": true,
		"getpmsg": true, "putpmsg": true, "query_module": true, "security": true, "sysfs": true, "tuxcall": true,
		"uselib": true, "ustat": true, "vserver": true, "_sysctl": true, "nfsservctl": true, "migrate_pages": true,
		"move_pages": true, "open_tree_attr": true, "pivot_root": true}
	for _, n := range mustRefuse {
		leftOut[n] = true
	}
	for arch, table := range map[string][]syscallEntry{"amd64": syscallsAMD64[:], "arm64": syscallsARM64[:]} {
		for _, e := range table {
			if !named[e.name] && !leftOut[e.name] {
				t.Errorf("%s: %s (%d) is not a name Docker's profile knows: is it the kernel's name?", arch, e.name, e.nr)
			}
		}
		for _, n := range []string{"read", "write", "openat", "close", "newfstatat", "fstat", "mmap", "futex", "clone", "execve", "exit_group"} {
			if !slices.ContainsFunc(table, func(e syscallEntry) bool { return e.name == n }) {
				t.Errorf("%s: no %s", arch, n)
			}
		}
	}
}
