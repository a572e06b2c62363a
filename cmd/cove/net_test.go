package main

// The network tests run cove inside a host of their own: a network
// namespace the test makes (standing in for the host, with a loopback
// service, a second interface whose address has a 0.0.0.0 service, and a
// resolver on 127.0.0.53 as systemd-resolved has) joined by a veth pair to
// a second namespace standing in for the internet (a server at
// inet.test). Addresses are in 198.18.0.0/15 (benchmarking, RFC 2544) and
// exist only in these namespaces; nothing is sent beyond them.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/testregistry"
	"github.com/cove-sh/cove/workspace"
	"golang.org/x/sys/unix"
)

// fakeHost is the test's host and internet.
type fakeHost struct {
	t           *testing.T
	ns, inet    string // namespace names
	loopback    string // HOST:PORT of a service on the host's 127.0.0.1
	other       string // HOST:PORT of a 0.0.0.0 service, by the host's second address
	internetURL string // inet.test:80
	hostIf      string // the host's interface with the default route
}

// The internet's server and the host's second address.
const (
	inetAddr  = "198.18.9.9"
	otherAddr = "198.19.5.5"
)

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newFakeHost(t *testing.T) *fakeHost {
	t.Helper()
	needRoot(t)
	if _, err := container.PastaPath(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	n := rand.IntN(1 << 20)
	h := &fakeHost{t: t, ns: fmt.Sprintf("covh%d", n), inet: fmt.Sprintf("covi%d", n)}
	ipCmd(t, "netns", "add", h.ns)
	t.Cleanup(func() { h.remove() })
	ipCmd(t, "netns", "add", h.inet)
	vh, vi := fmt.Sprintf("cvh%d", n), fmt.Sprintf("cvi%d", n)
	h.hostIf = vh
	ipCmd(t, "link", "add", vh, "netns", h.ns, "type", "veth", "peer", "name", vi, "netns", h.inet)
	for _, c := range [][]string{
		{"-n", h.ns, "link", "set", "lo", "up"},
		{"-n", h.ns, "addr", "add", "198.18.0.1/24", "dev", vh},
		{"-n", h.ns, "link", "set", vh, "up"},
		{"-n", h.ns, "route", "add", "default", "via", "198.18.0.2"},
		{"-n", h.ns, "link", "add", "side0", "type", "veth", "peer", "name", "side1"},
		{"-n", h.ns, "addr", "add", otherAddr + "/24", "dev", "side0"},
		{"-n", h.ns, "link", "set", "side0", "up"},
		{"-n", h.ns, "link", "set", "side1", "up"},
		{"-n", h.inet, "link", "set", "lo", "up"},
		{"-n", h.inet, "addr", "add", "198.18.0.2/24", "dev", vi},
		{"-n", h.inet, "link", "set", vi, "up"},
		{"-n", h.inet, "addr", "add", inetAddr + "/32", "dev", "lo"},
		{"-n", h.inet, "route", "add", "default", "via", "198.18.0.1"},
	} {
		ipCmd(t, c...)
	}
	// ip netns exec binds this over /etc/resolv.conf for what runs there.
	must(t, os.MkdirAll(filepath.Join("/etc/netns", h.ns), 0o755))
	must(t, os.WriteFile(filepath.Join("/etc/netns", h.ns, "resolv.conf"), []byte("nameserver 127.0.0.53\n"), 0o644))
	h.in(h.ns, func() {
		h.loopback = serveHello(t, "tcp", "127.0.0.1:0", "host loopback")
		_, port, _ := net.SplitHostPort(serveHello(t, "tcp", "0.0.0.0:0", "host other address"))
		h.other = net.JoinHostPort(otherAddr, port)
		pc, err := net.ListenPacket("udp", "127.0.0.53:53")
		must(t, err)
		t.Cleanup(func() { pc.Close() })
		go serveDNS(pc, map[string]net.IP{"inet.test": net.ParseIP(inetAddr)})
	})
	h.in(h.inet, func() { serveHello(t, "tcp", inetAddr+":80", "the internet") })
	h.internetURL = "inet.test:80"
	return h
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// in runs f on a thread in the namespace ns: the sockets it makes live
// there.
func (h *fakeHost) in(ns string, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	must(h.t, err)
	defer self.Close()
	target, err := os.Open(filepath.Join("/run/netns", ns))
	must(h.t, err)
	defer target.Close()
	must(h.t, unix.Setns(int(target.Fd()), unix.CLONE_NEWNET))
	defer func() {
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			panic("cannot return to the test's network namespace: " + err.Error())
		}
	}()
	f()
}

// dial connects from the fake host to addr and returns the first line.
func (h *fakeHost) dial(addr string) (string, error) {
	var c net.Conn
	var err error
	h.in(h.ns, func() { c, err = net.DialTimeout("tcp", addr, 2*time.Second) })
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

func (h *fakeHost) remove() {
	for _, ns := range []string{h.ns, h.inet} {
		if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
			for _, p := range strings.Fields(string(out)) {
				if pid, err := strconv.Atoi(p); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		exec.Command("ip", "netns", "del", ns).Run()
	}
	os.RemoveAll(filepath.Join("/etc/netns", h.ns))
}

// serveHello answers a line with "hello from WHO", as HTTP does: the
// client speaks first.
func serveHello(t *testing.T, network, addr, who string) string {
	l, err := net.Listen(network, addr)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
					fmt.Fprintf(c, "hello from %s\n", who)
				}
			}()
		}
	}()
	return l.Addr().String()
}

// serveDNS answers A queries for names (NXDOMAIN for others): just
// enough of RFC 1035 for busybox's nslookup.
func serveDNS(pc net.PacketConn, names map[string]net.IP) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		if n < 12 {
			continue
		}
		i, labels := 12, []string{}
		for i < n && q[i] != 0 && i+1+int(q[i]) <= n {
			labels = append(labels, string(q[i+1:i+1+int(q[i])]))
			i += 1 + int(q[i])
		}
		if i+5 > n {
			continue
		}
		qtype := binary.BigEndian.Uint16(q[i+1:])
		i += 5
		resp := append([]byte{}, q[:i]...)
		resp[2] = 0x80 | q[2]&0x01 // a response; recursion desired as asked
		resp[3] = 0x80             // recursion available, no error
		binary.BigEndian.PutUint16(resp[4:], 1)
		binary.BigEndian.PutUint16(resp[6:], 0)
		binary.BigEndian.PutUint32(resp[8:], 0)
		ip, ok := names[strings.ToLower(strings.Join(labels, "."))]
		switch {
		case !ok:
			resp[3] |= 3
		case qtype == 1:
			binary.BigEndian.PutUint16(resp[6:], 1)
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, ip.To4()...)
		}
		pc.WriteTo(resp, from)
	}
}

// netUser is who launches: root, or covetest rootless.
type netUser struct {
	rootless bool
	root     string // COVE_ROOT
	home     string
	env      []string // added to the environment
}

// netModes runs f with a root launcher and with covetest's rootless one,
// each with the test image pulled into its own store.
func netModes(t *testing.T, f func(t *testing.T, h *fakeHost, u netUser, ref string)) {
	h := newFakeHost(t)
	addr := testregistry.Addr(t)
	ref := testregistry.Push(t, addr, layered(t))
	eachNetUser(t, "cove-net-", func(t *testing.T, u netUser, _ string) {
		if r := u.cove(t, "", "pull", "-q", ref); r.code != 0 {
			t.Fatalf("pull: %+v", r)
		}
		t.Cleanup(func() { u.cove(t, h.ns, "rm", "-f", "web") }) // what a failing test left running
		f(t, h, u, ref)
	})
}

// eachNetUser runs f as root and as covetest with its subordinate ids
// (rootless), each with a COVE_ROOT of its own and an empty project
// directory the user owns (a rootless one under a base directory from
// pattern, which covetest can reach).
func eachNetUser(t *testing.T, pattern string, f func(t *testing.T, u netUser, project string)) {
	for _, rootless := range []bool{false, true} {
		mode := "root"
		if rootless {
			mode = "rootless"
		}
		t.Run(mode, func(t *testing.T) {
			u := netUser{rootless: rootless, root: t.TempDir(), home: t.TempDir()}
			project := t.TempDir()
			if rootless {
				ru := needRangedUser(t)
				u.home = ru.u.HomeDir
				base := rootlessBase(t, pattern)
				u.root, project = filepath.Join(base, "root"), filepath.Join(base, "project")
				for _, d := range []string{u.root, project} {
					must(t, os.Mkdir(d, 0o700))
					must(t, os.Chown(d, ru.uid, ru.gid))
				}
			}
			f(t, u, project)
		})
	}
}

// giveToProjectOwner makes everything under project, and under each of
// more, the project directory's owner's (covetest's in eachNetUser's
// rootless run, which made the directory theirs; the test wrote the
// files as root).
func giveToProjectOwner(project string, more ...string) {
	fi, err := os.Stat(project)
	if err != nil {
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	for _, dir := range append([]string{project}, more...) {
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Lchown(p, int(st.Uid), int(st.Gid)) })
	}
}

// command is cove run by u in the namespace ns ("" is the test's own).
func (u netUser) command(ns string, args ...string) *exec.Cmd {
	argv := []string{coveBin}
	env := append(os.Environ(), "COVE_ROOT="+u.root, "HOME="+u.home)
	if u.rootless {
		// setpriv execs cove as covetest, so a signal the test sends
		// reaches cove itself (runuser stays the parent and does not
		// pass SIGINT on: each rootless launcher stopped that way waited
		// out its 30 s before being killed).
		argv = append([]string{"setpriv", "--reuid=covetest", "--regid=covetest", "--init-groups", "--"}, argv...)
		env = append(env, "USER=covetest", "LOGNAME=covetest")
	}
	if ns != "" {
		argv = append([]string{"ip", "netns", "exec", ns}, argv...)
	}
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append(env, u.env...)
	// A container left running holds the output pipes: Wait returns anyway.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

func (u netUser) cove(t *testing.T, ns string, args ...string) result {
	t.Helper()
	cmd := u.command(ns, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	must(t, cmd.Start())
	code, ok := waitExit(cmd, 2*time.Minute)
	if !ok {
		t.Fatalf("cove %v hung; stderr: %s", args, errb.String())
	}
	return result{out.String(), errb.String(), code}
}

// reachScript tries each address (a name is looked up with nslookup
// first, through the container's resolver) and prints "reached ADDR: …"
// or "unreachable ADDR". The client keeps its side open for a second after
// its request: bookworm's pasta (0.0~git20230309) never delivers the reply
// to a client that half-closes at once (echo | nc), where the host's own
// network does; most clients (curl, git, apt) do not half-close.
func reachScript(addrs ...string) string {
	var b strings.Builder
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		if net.ParseIP(host) == nil {
			fmt.Fprintf(&b, "ip=$(nslookup %s 2>/dev/null | awk '/^Address/ {a=$NF} END {print a}'); ", host)
		} else {
			fmt.Fprintf(&b, "ip=%s; ", host)
		}
		fmt.Fprintf(&b, "if out=$( (echo; sleep 1) | timeout 10 nc -w 2 $ip %s 2>&1) && [ -n \"$out\" ]; then echo \"reached %s: $out\"; else echo \"unreachable %s\"; fi\n", port, a, a)
	}
	return b.String()
}

// TestNetDefaultHidesTheHost: from a container on the default network,
// the host's loopback service and its 0.0.0.0 service by its second
// address are unreachable, while the internet is reached by name through
// the host's resolver (on its loopback, as systemd-resolved's is); with
// --net host both host services are reachable. Before the private
// network (host was the default) the first part failed: both reached.
func TestNetDefaultHidesTheHost(t *testing.T) {
	t.Parallel()
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		r := u.cove(t, h.ns, "run", "--rm", "--pull", "never", ref, "sh", "-c", reachScript(h.loopback, h.other, h.internetURL))
		if r.code != 0 {
			t.Fatalf("run: %+v", r)
		}
		for _, a := range []string{h.loopback, h.other} {
			if !strings.Contains(r.stdout, "unreachable "+a) {
				t.Errorf("default network: the host's %s answered:\n%s", a, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "reached "+h.internetURL+": hello from the internet") {
			t.Errorf("default network: %s not reached by name:\n%s%s", h.internetURL, r.stdout, r.stderr)
		}
		r = u.cove(t, h.ns, "run", "--rm", "--pull", "never", "--net", "host", ref, "sh", "-c", reachScript(h.loopback, h.other))
		for _, a := range []string{h.loopback, h.other} {
			if !strings.Contains(r.stdout, "reached "+a+": hello from host") {
				t.Errorf("--net host: the host's %s did not answer:\n%s%s", a, r.stdout, r.stderr)
			}
		}
	})
}

// helperPids are the network helpers and pastas in the namespace ns.
func helperPids(t *testing.T, ns string) []string {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []string
	for _, p := range strings.Fields(string(out)) {
		cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline")
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if filepath.Base(argv0) == "pasta" || strings.Contains(string(cmdline), "\x00--net-helper") {
			pids = append(pids, p)
		}
	}
	return pids
}

// serverScript is a server in the container on port 8080.
const serverScript = `printf '#!/bin/sh\necho hello from the container\n' > /tmp/hello; chmod +x /tmp/hello; exec nc -ll -p 8080 -e /tmp/hello`

// TestNetPublish: -p forwards a host port to a server in the container;
// a second container asking for that host port is refused, naming the
// first; the port closes and pasta is gone when the container stops.
func TestNetPublish(t *testing.T) {
	t.Parallel()
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		port := 20000 + rand.IntN(20000)
		hostPort := fmt.Sprintf("127.0.0.1:%d", port)
		if r := u.cove(t, h.ns, "run", "-d", "--name", "web", "--pull", "never", "-p", fmt.Sprintf("%d:8080", port), ref, "sh", "-c", serverScript); r.code != 0 {
			t.Fatalf("run -d -p: %+v", r)
		}
		var line string
		var err error
		for i := 0; i < 50; i++ { // the server starts after cove returns
			if line, err = h.dial(hostPort); err == nil && line != "" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if line != "hello from the container\n" {
			t.Fatalf("the forwarded port %s: %q, %v", hostPort, line, err)
		}
		if _, err := net.DialTimeout("tcp", hostPort, time.Second); err == nil {
			t.Errorf("the port is forwarded in the fake host's network, yet answered in the test's own")
		}
		r := u.cove(t, h.ns, "run", "--rm", "--pull", "never", "-p", fmt.Sprintf("%d:80", port), ref, "true")
		if r.code != 125 || !strings.Contains(r.stderr, fmt.Sprintf("host port 127.0.0.1:%d:80/tcp: container web forwards it already", port)) {
			t.Errorf("a second container on the same host port: %+v", r)
		}
		if len(helperPids(t, h.ns)) != 2 {
			t.Errorf("helper and pasta while web runs: %v, want 2", helperPids(t, h.ns))
		}
		if r := u.cove(t, h.ns, "stop", "--time", "1", "web"); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
		if line, err := h.dial(hostPort); err == nil {
			t.Errorf("after stop the forwarded port still answers: %q", line)
		}
		if p := helperPids(t, h.ns); len(p) != 0 {
			t.Errorf("after stop, helper or pasta still run: %v", p)
		}
		if r := u.cove(t, h.ns, "rm", "web"); r.code != 0 {
			t.Errorf("rm: %+v", r)
		}
	})
}

// TestNetOffline: on a host with no route out (a laptop with no
// network), a container on the default network starts all the same, and
// reaches the internet once the host is back, without a restart. Before,
// pasta (as Debian 12 ships it) refused to start with no default route
// ("External interface not usable"), and the container with it.
func TestNetOffline(t *testing.T) {
	t.Parallel()
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		ipCmd(t, "-n", h.ns, "route", "del", "default")
		back := false
		defer func() {
			if !back {
				ipCmd(t, "-n", h.ns, "route", "add", "default", "via", "198.18.0.2")
			}
		}()
		script := "ip -4 addr show scope global | grep -q inet && echo up || echo 'no address'; for i in $(seq 100); do " +
			"ip=$(nslookup inet.test 2>/dev/null | awk '/^Address/ {a=$NF} END {print a}'); " +
			"if out=$( (echo; sleep 1) | timeout 5 nc -w 2 $ip 80 2>&1) && [ -n \"$out\" ]; then echo \"reached: $out\"; exit 0; fi; sleep 0.2; done; echo never reached"
		r, first := startLines(t, u.command(h.ns, "run", "--rm", "--pull", "never", ref, "sh", "-c", script))
		if first != "up" {
			r.finish()
			t.Fatalf("offline, the container did not start with its address: %q; stderr: %s", first, r.errb.String())
		}
		ipCmd(t, "-n", h.ns, "route", "add", "default", "via", "198.18.0.2")
		back = true
		if rest, code, ok := r.finish(); !ok || code != 0 || !strings.Contains(rest, "reached: hello from the internet") {
			t.Fatalf("once the host was back (exit %d, %v): %s%s", code, ok, rest, r.errb.String())
		}
	})
}

// TestNetBeforePasta: the workload does not wait for pasta (some 70 ms
// of its own to start): its interface is init's, and what it sends before
// pasta is up waits for it. With a pasta held back 2 s, the container's
// first line comes before pasta runs, and its connection to the internet,
// made at once, succeeds once pasta is there.
func TestNetBeforePasta(t *testing.T) {
	t.Parallel()
	bin, err := os.MkdirTemp("", "cove-slow-pasta-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(bin) })
	must(t, os.Chmod(bin, 0o777))
	real, err := container.PastaPath()
	must(t, err)
	up := filepath.Join(bin, "up")
	must(t, os.WriteFile(filepath.Join(bin, "pasta"), []byte("#!/bin/sh\nsleep 2\ntouch "+up+"\nexec "+real+" \"$@\"\n"), 0o755))
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		os.Remove(up)
		u.env = append(u.env, "PATH="+bin+":"+os.Getenv("PATH"))
		// The client's side stays open past pasta's start (see reachScript).
		script := "echo started; if out=$( (echo; sleep 6) | timeout 30 nc -w 20 " + inetAddr + " 80 2>&1) && [ -n \"$out\" ]; then echo \"reached: $out\"; else echo unreachable; fi"
		r, first := startLines(t, u.command(h.ns, "run", "--rm", "--pull", "never", ref, "sh", "-c", script))
		if first != "started" {
			r.finish()
			t.Fatalf("no start: %q; stderr: %s", first, r.errb.String())
		}
		if _, err := os.Stat(up); err == nil {
			t.Errorf("the workload started after pasta (held back 2 s): it waited for it")
		}
		if rest, code, ok := r.finish(); !ok || code != 0 || !strings.Contains(rest, "reached: hello from the internet") {
			t.Fatalf("a connection made before pasta was up (exit %d, %v): %s%s", code, ok, rest, r.errb.String())
		}
	})
}

// lineRun is a command whose output is read a line at a time while it
// runs.
type lineRun struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	errb  strings.Builder
}

// startLines starts cmd and returns once its first line is read.
func startLines(t *testing.T, cmd *exec.Cmd) (*lineRun, string) {
	t.Helper()
	r := &lineRun{cmd: cmd}
	out, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = &r.errb
	must(t, cmd.Start())
	r.lines = bufio.NewScanner(out)
	r.lines.Scan()
	return r, r.lines.Text()
}

// finish reads the rest of the output and waits for the command to exit.
func (r *lineRun) finish() (rest string, code int, ok bool) {
	var b strings.Builder
	for r.lines.Scan() {
		b.WriteString(r.lines.Text() + "\n")
	}
	code, ok = waitExit(r.cmd, 2*time.Minute)
	return b.String(), code, ok
}

// TestNetLauncherKilled: with its launcher killed (kill -9), a container
// keeps its network while it runs, and pasta goes with it when it ends by
// itself, with nobody left to clean up.
func TestNetLauncherKilled(t *testing.T) {
	t.Parallel()
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		port := 20000 + rand.IntN(20000)
		// The container lives 8 s: its start (on a loaded machine, seconds)
		// and the checks below fit in it, and it ends on its own.
		cmd := u.command(h.ns, "run", "--rm", "--pull", "never", "-p", fmt.Sprintf("%d:8080", port), ref, "sh", "-c", "("+serverScript+") & sleep 8")
		must(t, cmd.Start())
		hostPort := fmt.Sprintf("127.0.0.1:%d", port)
		var line string
		for up := time.Now().Add(6 * time.Second); line == "" && time.Now().Before(up); {
			line, _ = h.dial(hostPort)
			time.Sleep(50 * time.Millisecond)
		}
		if line != "hello from the container\n" {
			t.Fatalf("the forwarded port before the kill: %q", line)
		}
		// The launcher is cove itself: ip netns exec and setpriv exec it.
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		waitExit(cmd, 5*time.Second)
		if line, err := h.dial(hostPort); err != nil || line != "hello from the container\n" {
			t.Errorf("the container lost its forwarded port with its launcher: %q %v", line, err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for len(helperPids(t, h.ns)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if p := helperPids(t, h.ns); len(p) != 0 {
			t.Errorf("the container ended without its launcher, and helper or pasta still run: %v", p)
		}
		if line, err := h.dial(hostPort); err == nil {
			t.Errorf("the forwarded port outlived the container: %q", line)
		}
	})
}

// TestNetWorkspaceForwardPorts: a workspace forwards devcontainer.json's
// forwardPorts from the host's 127.0.0.1 to a server started in it; a
// second workspace asking for the same port is refused, naming the first;
// the port closes when the workspace stops.
func TestNetWorkspaceForwardPorts(t *testing.T) {
	t.Parallel()
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		port := 20000 + rand.IntN(20000)
		var projects []string
		base, err := os.MkdirTemp("", "cove-net-projects-")
		must(t, err)
		t.Cleanup(func() { os.RemoveAll(base) })
		os.Chmod(base, 0o755) // covetest's projects are in it
		for i := 0; i < 2; i++ {
			p := filepath.Join(base, fmt.Sprintf("proj%d", i))
			must(t, os.MkdirAll(filepath.Join(p, ".devcontainer"), 0o755))
			must(t, os.WriteFile(filepath.Join(p, ".devcontainer", "devcontainer.json"),
				[]byte(fmt.Sprintf(`{"image": %q, "forwardPorts": [%d]}`, ref, port)), 0o644))
			if u.rootless {
				_, uid, gid := testUser(t)
				for _, d := range []string{p, filepath.Join(p, ".devcontainer"), filepath.Join(p, ".devcontainer", "devcontainer.json")} {
					must(t, os.Chown(d, uid, gid))
				}
			}
			projects = append(projects, p)
		}
		first := workspace.Name(projects[0])
		t.Cleanup(func() { u.cove(t, h.ns, "rm", "-f", first) })
		if r := u.cove(t, h.ns, "up", "--detach", projects[0]); r.code != 0 {
			t.Fatalf("up --detach: %+v", r)
		}
		script := strings.Replace(serverScript, "8080", strconv.Itoa(port), 1)
		if r := u.cove(t, h.ns, "exec", first, "sh", "-c", "("+script+") >/dev/null 2>&1 &"); r.code != 0 {
			t.Fatalf("exec the server: %+v", r)
		}
		hostPort := fmt.Sprintf("127.0.0.1:%d", port)
		var line string
		for i := 0; i < 50 && line == ""; i++ {
			line, _ = h.dial(hostPort)
			time.Sleep(50 * time.Millisecond)
		}
		if line != "hello from the container\n" {
			t.Fatalf("forwardPorts %d: %q", port, line)
		}
		r := u.cove(t, h.ns, "up", "--detach", projects[1])
		if r.code == 0 || !strings.Contains(r.stderr, fmt.Sprintf("host port 127.0.0.1:%d:%d/tcp: container %s forwards it already", port, port, first)) {
			t.Errorf("a second workspace on the same port: %+v", r)
		}
		if r := u.cove(t, h.ns, "stop", "--time", "1", first); r.code != 0 {
			t.Fatalf("stop: %+v", r)
		}
		if line, err := h.dial(hostPort); err == nil {
			t.Errorf("after stop the forwarded port still answers: %q", line)
		}
	})
}
