package container

import (
	"fmt"
	"net"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestHostTapTakesTheKernelsDefaultRoute: on a host with several
// interfaces, addresses and default routes (a laptop on Wi-Fi and a dock,
// a VPN's routes in a table of its own), the container's interface copies
// the default route of the main table with the lowest metric: its
// interface's name, that interface's first address with the prefix
// widened until the gateway is in it, and the gateway; with no default
// route left, the offline addresses. Real links in a network namespace of
// the test's own.
func TestHostTapTakesTheKernelsDefaultRoute(t *testing.T) {
	needRoot(t)
	type step struct {
		what string
		do   func() error
		want Tap // MACs not compared
	}
	var wifi, dock netlink.Link
	wifiDefault := &netlink.Route{Gw: net.ParseIP("192.168.50.1"), Priority: 600}
	dockDefault := &netlink.Route{Gw: net.ParseIP("10.1.0.1"), Priority: 100, Flags: int(netlink.FLAG_ONLINK)}
	vpnDefault := &netlink.Route{Gw: net.ParseIP("192.168.50.254"), Priority: 1, Table: 51820}
	steps := []step{
		{"two defaults: the dock's metric is lower; a VPN's in its own table is not the main one's",
			func() error {
				var err error
				if wifi, err = link("wlp2s0", "192.168.50.7/24"); err != nil {
					return err
				}
				// The dock's first address is a /32 whose gateway is off-link.
				if dock, err = link("enx0050b6", "10.1.2.3/32", "10.9.9.9/24"); err != nil {
					return err
				}
				wifiDefault.LinkIndex, dockDefault.LinkIndex, vpnDefault.LinkIndex = wifi.Attrs().Index, dock.Attrs().Index, wifi.Attrs().Index
				for _, r := range []*netlink.Route{wifiDefault, dockDefault, vpnDefault} {
					if err := netlink.RouteAdd(r); err != nil {
						return err
					}
				}
				return nil
			},
			Tap{Name: "enx0050b6", Addr: "10.1.2.3/22", Gateway: "10.1.0.1"}},
		{"the dock unplugged: Wi-Fi's",
			func() error { return netlink.RouteDel(dockDefault) },
			Tap{Name: "wlp2s0", Addr: "192.168.50.7/24", Gateway: "192.168.50.1"}},
		{"no default route in the main table: offline",
			func() error { return netlink.RouteDel(wifiDefault) },
			Tap{Name: "eth0", Addr: offlineAddr, Gateway: offlineGateway, Offline: true}},
	}
	inNetns(t, func() {
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Errorf("%s: %v", s.what, err)
				return
			}
			got, err := HostTap()
			if err != nil {
				t.Errorf("%s: %v", s.what, err)
				return
			}
			if got.MAC == "" || got.PastaMAC == "" || got.MAC == got.PastaMAC {
				t.Errorf("%s: MACs %q and %q", s.what, got.MAC, got.PastaMAC)
			}
			got.MAC, got.PastaMAC = "", ""
			if *got != s.want {
				t.Errorf("%s: %+v, want %+v", s.what, *got, s.want)
			}
		}
	})
}

// inNetns runs f on a thread in a new network namespace, which ends with
// it (the thread is never unlocked, so the runtime ends it too).
func inNetns(t *testing.T, f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("a network namespace of the test's own: %v", err)
			return
		}
		f()
	}()
	<-done
}

// link makes an interface, up, with addrs in order: a veth whose peer
// (up too, so that it has a carrier) stays beside it (this machine's
// kernel has no dummy links).
func link(name string, addrs ...string) (netlink.Link, error) {
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		return nil, err
	}
	if peer, err := netlink.LinkByName(name + "p"); err != nil || netlink.LinkSetUp(peer) != nil {
		return nil, fmt.Errorf("%s's peer: %v", name, err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		addr, err := netlink.ParseAddr(a)
		if err != nil {
			return nil, err
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return nil, err
		}
	}
	return link, netlink.LinkSetUp(link)
}
