package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dialSource is a static program for inside a container: it connects to
// each HOST:PORT it is given (a HOST ending in %* once per interface of
// the container, as a scoped link-local address), writes a line, and
// prints "reached ADDR: LINE" or "unreachable ADDR: why". busybox's nc
// cannot take a scoped IPv6 address.
const dialSource = `package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	ifs, _ := net.Interfaces()
	for _, a := range os.Args[1:] {
		host, port, _ := net.SplitHostPort(a)
		targets := []string{a}
		if h, ok := strings.CutSuffix(host, "%*"); ok {
			targets = nil
			for _, i := range ifs {
				targets = append(targets, net.JoinHostPort(h+"%"+i.Name, port))
			}
		}
		for _, t := range targets {
			c, err := net.DialTimeout("tcp", t, 3*time.Second)
			if err != nil {
				fmt.Printf("unreachable %s: %v\n", t, err)
				continue
			}
			c.SetDeadline(time.Now().Add(3 * time.Second))
			fmt.Fprintf(c, "hi\n")
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil {
				fmt.Printf("reached %s: %s", t, line)
			} else {
				fmt.Printf("unreachable %s: %v\n", t, err)
			}
		}
	}
}
`

// buildDialer builds dialSource into a directory anyone may read.
func buildDialer(t *testing.T) string {
	t.Helper()
	dir := rootlessBase(t, "cove-dial-")
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(dialSource), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module dial\n\ngo 1.21\n"), 0o644))
	build := exec.Command("go", "build", "-o", "dial", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the dialer: %v: %s", err, out)
	}
	return dir
}

// TestNetRefusesEveryHostAddress: from a container on the private
// network, no address of the host reaches its services bound to [::]
// (dual-stack): not its IPv4 addresses, not its global or ULA IPv6 ones,
// not its link-local one named with a scope (fe80::…%IF, which skipped
// the prohibit route: a scoped lookup sees only the scope's routes), and
// none of those it gains after the container started. The internet is
// still reached. With a root launcher and covetest's rootless one.
func TestNetRefusesEveryHostAddress(t *testing.T) {
	t.Parallel()
	dialDir := buildDialer(t)
	netModes(t, func(t *testing.T, h *fakeHost, u netUser, ref string) {
		// The host's IPv6: a global address and default route on its
		// main interface (so pasta would carry IPv6), a link-local one
		// there, a ULA on its second interface.
		n := "-n"
		for _, c := range [][]string{
			{n, h.ns, "addr", "add", "2001:db8:1::1/64", "dev", h.hostIf, "nodad"},
			{n, h.ns, "addr", "add", "fe80::77/64", "dev", h.hostIf, "nodad"},
			{n, h.ns, "addr", "add", "fd42::5/64", "dev", "side0", "nodad"},
			{n, h.ns, "-6", "route", "replace", "default", "via", "2001:db8:1::2"},
		} {
			ipCmd(t, c...)
		}
		var port string
		h.in(h.ns, func() {
			_, port, _ = splitHostPort(serveHello(t, "tcp", "[::]:0", "the host"))
		})
		t.Cleanup(func() {
			for _, c := range [][]string{
				{n, h.ns, "addr", "del", "2001:db8:1::1/64", "dev", h.hostIf},
				{n, h.ns, "addr", "del", "fe80::77/64", "dev", h.hostIf},
				{n, h.ns, "addr", "del", "fd42::5/64", "dev", "side0"},
				{n, h.ns, "addr", "del", "198.19.6.6/32", "dev", "side0"},
				{n, h.ns, "addr", "del", "fd42::6/128", "dev", "side0"},
				{n, h.ns, "addr", "del", "fe80::78/64", "dev", h.hostIf},
			} {
				exec.Command("ip", c...).Run()
			}
		})
		if r := u.cove(t, h.ns, "run", "-d", "--name", "web", "--pull", "never", "-v", dialDir+":/t:ro", ref, "sleep", "300"); r.code != 0 {
			t.Fatalf("run -d: %+v", r)
		}
		// Addresses the host gains while the container runs.
		for _, c := range [][]string{
			{n, h.ns, "addr", "add", "198.19.6.6/32", "dev", "side0"},
			{n, h.ns, "addr", "add", "fd42::6/128", "dev", "side0", "nodad"},
			{n, h.ns, "addr", "add", "fe80::78/64", "dev", h.hostIf, "nodad"},
		} {
			ipCmd(t, c...)
		}
		// The container hears of the new IPv4 address from the helper:
		// wait (bounded) for its route, then try.
		added := time.Now()
		deadline := added.Add(5 * time.Second)
		for {
			r := u.cove(t, h.ns, "exec", "web", "ip", "route")
			if strings.Contains(r.stdout, "prohibit 198.19.6.6") {
				t.Logf("the new address's route was there %v after it was added (the time of one cove exec included)", time.Since(added))
				break
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		hostAddrs := []string{
			"198.18.0.1", otherAddr, "198.19.6.6", // IPv4, the last added after the start
			"2001:db8:1::1", "fd42::5", "fd42::6",
			"fe80::77%*", "fe80::78%*", // link-local, with every interface of the container as the scope
		}
		var args []string
		for _, a := range hostAddrs {
			args = append(args, "["+a+"]:"+port)
		}
		args = append(args, inetAddr+":80")
		r := u.cove(t, h.ns, append([]string{"exec", "web", "/t/dial"}, args...)...)
		if r.code != 0 {
			t.Fatalf("dial: %+v", r)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if strings.HasPrefix(line, "reached ") && strings.Contains(line, "hello from the host") {
				t.Errorf("the host's service answered through one of its addresses: %s", line)
			}
		}
		if !strings.Contains(r.stdout, "reached "+inetAddr+":80: hello from the internet") {
			t.Errorf("the internet is not reached from the private network:\n%s%s", r.stdout, r.stderr)
		}
		t.Logf("%s", r.stdout)
	})
}

func splitHostPort(a string) (string, string, error) {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return "", "", fmt.Errorf("no port in %q", a)
	}
	return strings.Trim(a[:i], "[]"), a[i+1:], nil
}
