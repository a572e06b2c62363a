package container

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cove-sh/cove/internal/execfile"
	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

func needPasta(t *testing.T) {
	t.Helper()
	if _, err := PastaPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// hostServer answers "hello from ADDR" to every connection on addr, until
// the test ends.
func hostServer(t *testing.T, addr string) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "hello from %s\n", addr)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// otherHostAddr is one of the host's addresses beyond its loopback.
func otherHostAddr(t *testing.T) string {
	t.Helper()
	addrs, err := HostAddresses()
	must(t, err)
	for _, a := range addrs {
		if ip, _, err := net.ParseCIDR(a); err == nil && ip.To4() != nil && !ip.IsLinkLocalUnicast() {
			return ip.String()
		}
	}
	t.Skip("the host has no IPv4 address beyond its loopback")
	return ""
}

// TestRunPrivateNetHidesTheHost: in a network of its own a container
// reaches no host service, neither on the host's loopback nor on the host's
// other address (bound to 0.0.0.0, as most are); with the host's network
// it reaches both. Against the old default (host) the first half fails.
func TestRunPrivateNetHidesTheHost(t *testing.T) {
	needRoot(t)
	needPasta(t)
	img, cfg := testImage(t, nil)
	lo := hostServer(t, "127.0.0.1:0")
	_, any, _ := net.SplitHostPort(hostServer(t, "0.0.0.0:0"))
	other := net.JoinHostPort(otherHostAddr(t), any)
	script := func(addrs ...string) string {
		var b strings.Builder
		for _, a := range addrs {
			h, p, _ := net.SplitHostPort(a)
			fmt.Fprintf(&b, "echo | nc -w 2 %s %s || echo unreachable %s\n", h, p, a)
		}
		return b.String()
	}
	for _, tc := range []struct {
		net   string
		reach bool
	}{{NetPrivate, false}, {NetHost, true}} {
		r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = tc.net }, "sh", "-c", script(lo, other)).ok(t)
		for _, a := range []string{lo, other} {
			if reached := !strings.Contains(r.stdout, "unreachable "+a); reached != tc.reach {
				t.Errorf("--net %s: %s reached: %v, want %v (%q)", tc.net, a, reached, tc.reach, r.stdout)
			}
		}
	}
}

// TestRunPrivateNetNoRawPackets: the workload has no CAP_NET_RAW in its
// own network, so it cannot write a packet past its routes onto pasta's
// interface (pasta would send a SYN for 127.0.0.1 on as the host: tried
// with a raw socket against pasta 2023-03-09), yet ping sockets work.
func TestRunPrivateNetNoRawPackets(t *testing.T) {
	needRoot(t)
	needPasta(t)
	img, cfg := testImage(t, nil)
	r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = NetPrivate }, "sh", "-c",
		"grep CapBnd /proc/self/status; cat /proc/sys/net/ipv4/ping_group_range; ip route").ok(t)
	var want uint64
	for _, c := range keptCaps {
		if c != unix.CAP_NET_RAW {
			want |= 1 << c
		}
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%016x", want)) {
		t.Errorf("bounding set in a private network: %q, want %016x (no CAP_NET_RAW)", r.stdout, want)
	}
	if !strings.Contains(r.stdout, "0\t0") && !strings.Contains(r.stdout, "0\t2147483647") {
		t.Errorf("ping_group_range: %q, want it open to the container's groups", r.stdout)
	}
	if !strings.Contains(r.stdout, "prohibit "+otherHostAddr(t)) {
		t.Errorf("no prohibit route for the host's address %s: %q", otherHostAddr(t), r.stdout)
	}
	// The cloud's metadata service (the machine's credentials) too.
	if !strings.Contains(r.stdout, "prohibit 169.254.169.254") {
		t.Errorf("no prohibit route for the cloud metadata service: %q", r.stdout)
	}
}

// TestRunPrivateNetHelperGoes: pasta and its helper end with the
// container. Only this process's own are watched (pasta descends from it,
// through the helper): other tests' and the machine's come and go.
func TestRunPrivateNetHelperGoes(t *testing.T) {
	needRoot(t)
	needPasta(t)
	img, cfg := testImage(t, nil)
	seen := map[int]bool{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, pid := range ownPastas() {
				seen[pid] = true
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = NetPrivate }, "sleep", "1").ok(t)
	close(stop)
	<-done
	if len(seen) == 0 {
		t.Fatal("no pasta of the container's was seen while it ran")
	}
	time.Sleep(50 * time.Millisecond)
	for _, pid := range ownPastas() {
		t.Errorf("pasta %d is left after the container ended", pid)
	}
}

// ownPastas are the pids of running pasta processes that descend from
// this one.
func ownPastas() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if !bytes.HasPrefix(argv, []byte("pasta\x00")) {
			continue
		}
		for p := parentPid(pid); p > 1; p = parentPid(p) {
			if p == os.Getpid() {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// parentPid is pid's parent, 0 when it is gone.
func parentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses and may
	// hold anything: state, ppid, …
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func TestParsePort(t *testing.T) {
	good := map[string]Port{
		"8080:80":             {"127.0.0.1", 8080, 80, "tcp", ""},
		"5353:53/udp":         {"127.0.0.1", 5353, 53, "udp", ""},
		"0.0.0.0:8080:80/tcp": {"0.0.0.0", 8080, 80, "tcp", ""},
		"192.0.2.7:1:65535":   {"192.0.2.7", 1, 65535, "tcp", ""},
	}
	for in, want := range good {
		got, err := ParsePort(in)
		if err != nil || got != want {
			t.Errorf("ParsePort(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParsePort(got.String()); err != nil || back != got {
			t.Errorf("ParsePort(%q.String() = %q) = %+v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"80", "0:80", "8080:0", "70000:80", "8080:80/sctp", "host:8080:80", "[fe80::1%eth0]:1:2", ":80", "a:b", "[::1]:8080:80", "[::]:8080:80"} {
		if p, err := ParsePort(in); err == nil {
			t.Errorf("ParsePort(%q) = %+v, want an error", in, p)
		}
	}
	a, _ := ParsePort("0.0.0.0:8080:80")
	b, _ := ParsePort("8080:81")
	c, _ := ParsePort("8080:80/udp")
	if !a.Overlaps(b) || a.Overlaps(c) {
		t.Errorf("Overlaps: 0.0.0.0:8080 and 127.0.0.1:8080 share the port; tcp and udp do not")
	}
}

func TestResolvConfForwardsDNS(t *testing.T) {
	got := string(ResolvConf([]byte("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.test\n")))
	want := "nameserver " + DNSForward + "\noptions edns0 trust-ad\nsearch example.test\n"
	if got != want {
		t.Errorf("ResolvConf = %q, want %q", got, want)
	}
}

// TestHostAddressesBlockCloudMetadata: the clouds' metadata services,
// which hand out the machine's credentials, are blocked with the host's
// own addresses.
func TestHostAddressesBlockCloudMetadata(t *testing.T) {
	blocked, err := HostAddresses()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"169.254.169.254/32", "fd00:ec2::254/128"} {
		if !slices.Contains(blocked, want) {
			t.Errorf("%s is not blocked: %v", want, blocked)
		}
	}
}

// TestRunJoinSharesTheNetwork: a container started with NetJoin is in the
// network namespace of the one it joins (a pod's): it reaches a server
// there on 127.0.0.1, while its PID and mount namespaces are its own.
func TestRunJoinSharesTheNetwork(t *testing.T) {
	needRoot(t)
	needPasta(t)
	img, cfg := testImage(t, nil)
	proc, err := ProcessFromImage(cfg, []string{"sh", "-c", "echo pong | nc -l -p 5432; sleep 30"}, nil, "", "")
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644))
	spec := &Spec{
		ID: fmt.Sprintf("test%d", time.Now().UnixNano()), Name: "pod", Hostname: "pod",
		Lower: img.RootFS, Upper: filepath.Join(dir, "upper"), Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged"),
		Binary: coveBin, ResolvConf: filepath.Join(dir, "resolv.conf"), Hosts: filepath.Join(dir, "hosts"),
		Net: NetPrivate, Process: proc,
	}
	var out bytes.Buffer
	pod, err := Start(spec, Stdio{Stdout: &out, Stderr: &out}, Limits{}, func(string) {})
	must(t, err)
	defer func() { pod.Kill(); pod.Wait() }()
	r := runIn(t, img, cfg, Limits{}, func(s *Spec) { s.Net = NetJoin; s.JoinPid = pod.Pid },
		"sh", "-c", "for i in $(seq 50); do nc 127.0.0.1 5432 </dev/null && break; sleep 0.1; done; ps -o args | grep -c '^nc -l'; readlink /proc/self/ns/net").ok(t)
	lines := strings.Fields(r.stdout)
	podNet, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pod.Pid))
	if len(lines) < 3 || lines[0] != "pong" || lines[1] != "0" || lines[len(lines)-1] != podNet {
		t.Fatalf("joined container said %q; want pong from the pod's 127.0.0.1:5432, no pod process in sight (0), the pod's network namespace %s", r.stdout, podNet)
	}
}

// TestPastaExecutable checks that the helper runs pasta's .avx2 twin
// (what Debian's pasta would re-execute) only where the CPU has AVX2 and
// the twin is an executable file, and pasta itself otherwise.
func TestPastaExecutable(t *testing.T) {
	dir := t.TempDir()
	passt := filepath.Join(dir, "passt")
	pasta := filepath.Join(dir, "pasta")
	if err := execfile.Write(passt, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("passt", pasta); err != nil {
		t.Fatal(err)
	}
	if got := pastaExecutable(pasta); got != pasta {
		t.Errorf("no twin: got %s, want %s", got, pasta)
	}
	twin := passt + ".avx2"
	if err := os.WriteFile(twin, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := pastaExecutable(pasta); got != pasta {
		t.Errorf("twin not executable: got %s, want %s", got, pasta)
	}
	if err := os.Chmod(twin, 0o755); err != nil {
		t.Fatal(err)
	}
	want := pasta
	if cpu.X86.HasAVX2 {
		want = twin
	}
	if got := pastaExecutable(pasta); got != want {
		t.Errorf("twin (AVX2 %v): got %s, want %s", cpu.X86.HasAVX2, got, want)
	}
}
