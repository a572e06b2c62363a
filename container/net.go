package container

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// The network modes of Spec.Net.
const (
	// NetPrivate is a network namespace of the container's own, joined to
	// the outside by pasta (Debian's passt package): outbound TCP, UDP and
	// DNS work, nothing on the host's loopback or its own addresses is
	// reachable, and only Spec.Ports are forwarded in. The default.
	NetPrivate = "private"
	// NetHost shares the host's network: every service on its loopback
	// is reachable from inside.
	NetHost = "host"
	// NetNone is a network namespace with its loopback only.
	NetNone = "none"
	// NetJoin shares the network namespace of a running container (its
	// init at Spec.JoinPid), and rootless its user namespace too, as the
	// containers of a pod do: a workspace's Compose services reach one
	// another on 127.0.0.1, and the outside as that container does
	// (through its pasta, behind its blocks of the host's addresses).
	NetJoin = "join"
)

// blocksRaw says whether the container's network is one of its own or
// joined, where raw sockets are not given (see keptCapSet).
func (s *Spec) blocksRaw() bool { return s.Net == NetPrivate || s.Net == NetJoin }

// DNSForward is the address the container's resolv.conf names under
// NetPrivate: pasta answers there by asking the host's resolver, so a
// resolver on the host's loopback (systemd-resolved's 127.0.0.53) works
// without the container reaching that loopback. 169.254.1.1 is what
// podman uses for the same.
const DNSForward = "169.254.1.1"

// Port is a host port forwarded into the container (cove run -p).
type Port struct {
	HostIP        string `json:"host_ip"` // 127.0.0.1 unless the user gave one
	HostPort      uint16 `json:"host_port"`
	ContainerPort uint16 `json:"container_port"`
	Proto         string `json:"proto"` // tcp or udp
	// Source says who asked for it, for the IDE's Ports view: "-p" (the
	// command line), "forwardPorts" (devcontainer.json).
	Source string `json:"source,omitempty"`
}

// String is the port as -p takes it: ADDR:HOSTPORT:CONTAINERPORT/PROTO.
func (p Port) String() string {
	return fmt.Sprintf("%s:%d/%s", net.JoinHostPort(p.HostIP, strconv.Itoa(int(p.HostPort))), p.ContainerPort, p.Proto)
}

// Overlaps says whether p and q ask for the same host port: one protocol
// and port, and one address or an unspecified one (0.0.0.0, ::) on
// either side.
func (p Port) Overlaps(q Port) bool {
	if p.Proto != q.Proto || p.HostPort != q.HostPort {
		return false
	}
	a, errA := netip.ParseAddr(p.HostIP)
	b, errB := netip.ParseAddr(q.HostIP)
	if errA != nil || errB != nil {
		return true
	}
	return a == b || a.IsUnspecified() || b.IsUnspecified()
}

// ParsePort reads podman's -p syntax: [ADDR:]HOSTPORT:CONTAINERPORT[/tcp|udp]
// (an IPv6 ADDR in brackets). Without ADDR the port is bound to 127.0.0.1
// only: a port reachable from the network is asked for by giving 0.0.0.0.
func ParsePort(s string) (Port, error) {
	p := Port{HostIP: "127.0.0.1", Proto: "tcp"}
	bad := func(why string) (Port, error) {
		return Port{}, fmt.Errorf("port %q: %s (want [ADDR:]HOSTPORT:CONTAINERPORT[/tcp|udp], e.g. 8080:80)", s, why)
	}
	rest := s
	if i := strings.LastIndexByte(rest, '/'); i >= 0 {
		p.Proto, rest = rest[i+1:], rest[:i]
		if p.Proto != "tcp" && p.Proto != "udp" {
			return bad("the protocol is tcp or udp")
		}
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return bad("no container port")
	}
	ctr, rest := rest[i+1:], rest[:i]
	host := rest
	if j := strings.LastIndexByte(rest, ':'); j >= 0 {
		addr := strings.TrimSuffix(strings.TrimPrefix(rest[:j], "["), "]")
		host = rest[j+1:]
		ip, err := netip.ParseAddr(addr)
		if err != nil || ip.Zone() != "" {
			return bad("the address is not an IP address")
		}
		if ip.Is6() && !ip.Is4In6() {
			// pasta carries no IPv6 (see pastaArgs).
			return bad("the container's own network carries IPv4 only, as Docker's default one does: give an IPv4 address (127.0.0.1, 0.0.0.0)")
		}
		ip = ip.Unmap()
		p.HostIP = ip.String()
	}
	hp, err1 := strconv.ParseUint(host, 10, 16)
	cp, err2 := strconv.ParseUint(ctr, 10, 16)
	if err1 != nil || err2 != nil || hp == 0 || cp == 0 {
		return bad("ports are numbers from 1 to 65535")
	}
	p.HostPort, p.ContainerPort = uint16(hp), uint16(cp)
	return p, nil
}

// PastaPath finds pasta, which NetPrivate needs; the error says how to
// get it.
func PastaPath() (string, error) {
	p, err := exec.LookPath("pasta")
	if err != nil {
		return "", errors.New("pasta is missing: a container's own network needs it (apt install passt, or dnf install passt); or choose --net host (shares your network) or --net none")
	}
	return p, nil
}

// pastaExecutable is the binary the network helper runs for pasta (at
// path, as PastaPath found it). Debian's and Fedora's pasta is a
// baseline build that, on a CPU with AVX2, re-executes its .avx2 twin
// beside it (passt's arch_avx2_exec: the resolved binary's path plus
// ".avx2"): the helper runs that twin itself, one dynamic load and exec
// fewer on the private network's start. Without the twin, or AVX2, it is
// path, as before. The helper gives either "pasta" as argv[0], which is
// what makes passt run as pasta.
func pastaExecutable(path string) string {
	if !cpu.X86.HasAVX2 {
		return path
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path
	}
	twin := real + ".avx2"
	if fi, err := os.Stat(twin); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return path
	}
	return twin
}

// metadataAddresses are the clouds' instance metadata services (AWS, GCP,
// Azure, Oracle at 169.254.169.254, AWS's IPv6 one, Alibaba's): they hand
// out the machine's credentials to whoever asks from it, so a workspace
// must not be able to ask.
var metadataAddresses = []string{"169.254.169.254/32", "fd00:ec2::254/128", "100.100.100.200/32"}

// HostAddresses lists the host's own addresses beyond its loopback, as
// single-address prefixes, and the cloud metadata services': under
// NetPrivate each becomes a prohibit route in the container's namespace.
// pasta connects as the host, so a packet to one of them would reach the
// host's services bound to 0.0.0.0, or the machine's credentials. The
// addresses the host gains later are blocked as they come (see
// watchHostAddresses); IPv6 is not routed at all (see pastaArgs).
func HostAddresses() ([]string, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	var out []string
	for _, a := range addrs {
		if p, ok := hostPrefix(a.IP); ok {
			out = append(out, p)
		}
	}
	return append(out, metadataAddresses...), nil
}

// hostPrefix is a host address as the prefix its prohibit route has; the
// loopback has none (the container's loopback is its own).
func hostPrefix(b net.IP) (string, bool) {
	ip, ok := netip.AddrFromSlice(b)
	if !ok || ip.Unmap().IsLoopback() {
		return "", false
	}
	ip = ip.Unmap().WithZone("")
	return netip.PrefixFrom(ip, ip.BitLen()).String(), true
}

// ResolvConf is the container's resolv.conf under NetPrivate: pasta's DNS
// forwarder as the one nameserver, and the host's search and options.
func ResolvConf(host []byte) []byte {
	var b bytes.Buffer
	b.WriteString("nameserver " + DNSForward + "\n")
	for _, line := range strings.Split(string(host), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "search" || f[0] == "domain" || f[0] == "options") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// pastaArgs are pasta's options for a container's namespace. The helper
// hands pasta the namespaces as its fds 3 (network) and 4 (user, when the
// container has one), a pipe on fd 5 where pasta writes its pid once it
// is set up, and the container's tap interface on fd 6.
//
//   - --fd 6: the interface is init's, made and configured before the
//     workload starts (see Tap), so nothing waits for pasta, which takes
//     some 70 ms of its own to start: what the workload sends before pasta
//     reads it waits for it (see makeTap). Hence no --config-net, and
//     the addresses pasta assumes given as init set them (-a -n -g), its
//     own MAC (-M) one of ours (the host's interface may have none, see
//     -i lo), and the container's (--ns-mac-addr) known to it before its
//     first frame.
//   - -T none -U none: nothing in the namespace is forwarded to the host
//     (pasta's default, auto, makes the host's loopback ports reachable
//     from the container's loopback).
//   - -t/-u: only the ports asked for come in (the default, auto, forwards
//     every port the container listens on).
//   - --no-map-gw: the gateway's address is not the host's loopback.
//   - --ipv4-only: pasta carries no IPv6, as Docker's default network has
//     none. pasta connects as the host, so every address of the host is a
//     way to its services; in IPv6 the host has addresses a workspace
//     could name past any route in its namespace (a link-local one with a
//     scope, fe80::…%eth0, is looked up only among the scope's routes)
//     and addresses that come and go (temporary ones). With no IPv6 at
//     all, none of them is reachable, whatever the host gains later
//     (setupPrivateNet also turns IPv6 off on the namespace's interfaces).
//   - --dns-forward: DNS through the host's resolver (see DNSForward).
//   - --runas 0: as root pasta would become nobody before it opens the
//     namespace it is given; it keeps only the capabilities it needs and
//     runs under its own seccomp filter.
//   - -i lo, with a host offline (Tap.Offline): pasta (as Debian 12 ships
//     it) refuses to start without a default route; given the loopback as
//     its interface it starts, and connects out once the host is back.
func pastaArgs(ports []Port, userns, root bool, tap *Tap) []string {
	addr, _ := netip.ParsePrefix(tap.Addr)
	args := []string{"--foreground", "--quiet", "--no-map-gw", "--ipv4-only", "--no-netns-quit",
		"-T", "none", "-U", "none", "--dns-forward", DNSForward,
		"--netns", "/proc/self/fd/3", "--pid", "/proc/self/fd/5", "--fd", "6",
		"-a", addr.Addr().String(), "-n", strconv.Itoa(addr.Bits()), "-g", tap.Gateway,
		"-M", tap.PastaMAC, "--ns-mac-addr", tap.MAC}
	if tap.Offline {
		args = append(args, "-i", "lo")
	}
	if userns {
		args = append(args, "--userns", "/proc/self/fd/4")
	}
	if root {
		args = append(args, "--runas", "0")
	}
	for _, proto := range []string{"tcp", "udp"} {
		flag, n := "-"+proto[:1], 0
		for _, p := range ports {
			if p.Proto == proto {
				spec := fmt.Sprintf("%s/%d:%d", p.HostIP, p.HostPort, p.ContainerPort)
				args, n = append(args, flag, spec), n+1
			}
		}
		if n == 0 {
			args = append(args, flag, "none")
		}
	}
	return args
}

// Tap is the container's network interface under NetPrivate, as the
// launcher chooses it and init makes it: what pasta's --config-net would
// set up, which is the host's outward interface copied (its name, its
// address, its gateway), so that the container sees the network the
// host is on.
type Tap struct {
	Name     string `json:"name"`
	MAC      string `json:"mac"`      // the container's end
	PastaMAC string `json:"pastaMAC"` // pasta's, the gateway's
	Addr     string `json:"addr"`     // the container's address and prefix, 192.0.2.2/24
	Gateway  string `json:"gateway"`
	// Offline: the host has no default route (a laptop with no network);
	// the addresses are link-local ones of ours, and pasta forwards what
	// it can once the host is back.
	Offline bool `json:"offline,omitempty"`
}

// tapMTU is pasta's: the largest frame it reads and writes.
const tapMTU = 65520

// The addresses of a container started while the host is offline.
const (
	offlineAddr    = "169.254.2.1/24"
	offlineGateway = "169.254.2.2"
)

// HostTap is the interface a container gets under NetPrivate, taken from
// the host's default IPv4 route (the one the kernel uses: the lowest
// metric) as pasta takes it: that route's interface's name, its first
// address, the prefix widened until the gateway is inside it, and the
// gateway; with no default route, Offline.
func HostTap() (*Tap, error) {
	tap := &Tap{Name: "eth0", MAC: randomMAC(), PastaMAC: randomMAC()}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("read the host's routes: %w", err)
	}
	var def *netlink.Route
	for i, r := range routes {
		if isDefault(r) && r.Gw.To4() != nil && (def == nil || r.Priority < def.Priority) {
			def = &routes[i]
		}
	}
	var link netlink.Link
	var addrs []netlink.Addr
	if def != nil {
		if link, err = netlink.LinkByIndex(def.LinkIndex); err == nil {
			addrs, err = netlink.AddrList(link, netlink.FAMILY_V4)
		}
		if err != nil {
			return nil, fmt.Errorf("read the host's interface for its default route: %w", err)
		}
	}
	if len(addrs) == 0 {
		tap.Addr, tap.Gateway, tap.Offline = offlineAddr, offlineGateway, true
		return tap, nil
	}
	ip, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	gw, _ := netip.AddrFromSlice(def.Gw.To4())
	bits, _ := addrs[0].Mask.Size()
	for bits > 0 && !netip.PrefixFrom(ip, bits).Masked().Contains(gw) {
		bits--
	}
	tap.Name = link.Attrs().Name
	tap.Addr = netip.PrefixFrom(ip, bits).String()
	tap.Gateway = gw.String()
	return tap, nil
}

// isDefault says whether r is a default route.
func isDefault(r netlink.Route) bool {
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// randomMAC is a random locally administered unicast address.
func randomMAC() string {
	var b [6]byte
	rand.Read(b[:])
	b[0] = b[0]&^1 | 2
	return net.HardwareAddr(b[:]).String()
}

// makeTap makes the container's interface (in init, in the container's
// network namespace) as t says and returns its descriptor: the device
// lives as long as a descriptor of it does, and pasta gets this one.
//
// What the workload sends before pasta is up waits: its ARP requests for
// the gateway in the interface's queue, its packets in the kernel's
// neighbour queue until pasta answers them. Not a permanent neighbour
// entry for the gateway instead: then a SYN and its retransmission would
// both wait in the interface's queue, and pasta (as Debian 12 ships it)
// loops forever on two SYNs of one connection read at once. ARP is asked
// for up to 20 s, not the kernel's 3, for a pasta slow to start on a busy
// machine.
func makeTap(t *Tap) (int, error) {
	fail := func(err error) (int, error) {
		return -1, fmt.Errorf("make the container's network interface %s: %w", t.Name, err)
	}
	mac, err := net.ParseMAC(t.MAC)
	if err != nil {
		return fail(err)
	}
	addr, err := netlink.ParseAddr(t.Addr)
	if err != nil {
		return fail(err)
	}
	gw := net.ParseIP(t.Gateway)
	if gw == nil {
		return fail(fmt.Errorf("bad gateway %q", t.Gateway))
	}
	// Opened here rather than by netlink's Tuntap, which wraps the
	// descriptor in a pollable os.File: that starts Go's poller in init,
	// two threads and 2 MB more for the container's life.
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	ifr, err := unix.NewIfreq(t.Name)
	if err == nil {
		ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
	}
	var tap netlink.Link
	if err == nil {
		tap, err = netlink.LinkByName(t.Name)
	}
	if err != nil {
		unix.Close(fd)
		return fail(err)
	}
	steps := []func() error{
		func() error { return netlink.LinkSetHardwareAddr(tap, mac) },
		func() error { return netlink.LinkSetMTU(tap, tapMTU) },
		func() error { return netlink.AddrAdd(tap, addr) },
		func() error { return netlink.LinkSetUp(tap) },
		func() error {
			return os.WriteFile("/proc/sys/net/ipv4/neigh/"+t.Name+"/mcast_solicit", []byte("20"), 0)
		},
		func() error { return netlink.RouteAdd(&netlink.Route{LinkIndex: tap.Attrs().Index, Gw: gw}) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			unix.Close(fd)
			return fail(err)
		}
	}
	return fd, nil
}

// loopbackUp brings up the new network namespace's loopback, as ifconfig
// does: two ioctls on a socket, where netlink's lookup and change took two
// requests through Go's poller (~1 ms of every start, more under load).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err != nil {
		return fmt.Errorf("bring up loopback: %w", err)
	}
	return nil
}

// setupPrivateNet runs in init's stage 1, in the container's namespaces,
// before pasta may have configured the interface: the loopback comes up,
// each host address gets a prohibit route (the workload has neither
// CAP_NET_ADMIN to remove them nor CAP_NET_RAW to send around them), IPv6
// goes off on every interface but the loopback (see pastaArgs), and ICMP
// echo sockets are allowed to every group, so that ping works without
// CAP_NET_RAW.
func setupPrivateNet(blocked []string) error {
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := blockAddresses(netlink.RouteAdd, blocked); err != nil {
		return err
	}
	if err := disableIPv6(); err != nil {
		return err
	}
	// Best effort: a mapping without group 0 refuses the range, and ping
	// is a convenience.
	_ = os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 "+strconv.Itoa(maxMappedGID())), 0)
	return nil
}

// blockAddresses adds a prohibit route for each prefix with add.
func blockAddresses(add func(*netlink.Route) error, blocked []string) error {
	for _, s := range blocked {
		_, dst, err := net.ParseCIDR(s)
		if err != nil {
			return fmt.Errorf("block host address %s: %w", s, err)
		}
		err = add(&netlink.Route{Dst: dst, Type: unix.RTN_PROHIBIT})
		if dst.IP.To4() == nil && (errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EOPNOTSUPP)) {
			continue // a kernel without IPv6 has no IPv6 to block
		}
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("block host address %s: %w", s, err)
		}
	}
	return nil
}

// disableIPv6 turns IPv6 off on the namespace's interfaces, pasta's among
// them whether it made it yet or not (default is what a new one gets),
// and keeps it on the loopback (::1 is the container's own). pasta
// carries no IPv6 (--ipv4-only) either: this is the second wall, so that
// not even a link-local address of the namespace's own is there to send
// from.
func disableIPv6() error {
	const conf = "/proc/sys/net/ipv6/conf/"
	if _, err := os.Stat(conf); errors.Is(err, os.ErrNotExist) {
		return nil // a kernel without IPv6
	}
	if err := os.WriteFile(conf+"default/disable_ipv6", []byte("1"), 0); err != nil {
		return fmt.Errorf("turn IPv6 off in the container's network: %w", err)
	}
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("turn IPv6 off in the container's network: %w", err)
	}
	for _, l := range links {
		if name := l.Attrs().Name; name != "lo" {
			if err := os.WriteFile(conf+name+"/disable_ipv6", []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("turn IPv6 off on %s in the container's network: %w", name, err)
			}
		}
	}
	return nil
}

// maxMappedGID is the highest group id of init's user namespace.
func maxMappedGID() int {
	b, err := os.ReadFile("/proc/self/gid_map")
	if err != nil {
		return 0
	}
	max := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		start, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[2])
		if start+n-1 > max {
			max = start + n - 1
		}
	}
	if max > 2147483647 {
		max = 2147483647
	}
	return max
}
