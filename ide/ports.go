package ide

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Ports view's server half, in the workspace: which TCP ports its
// processes listen on (read from /proc/net/tcp and tcp6, which are the
// workspace's own network namespace's, since the server runs in it), and
// a tunnel to one of them on the workspace's own loopback, which the
// launcher relays a connection on its side of the machine to (forward.go).
// The server dials nothing but its own loopback: where a connection goes
// is never the page's or the launcher's to name beyond a port number.

// Listening is a TCP port a process in the workspace listens on.
type Listening struct {
	Port      uint16   `json:"port"`
	Addresses []string `json:"addresses"`         // where it listens: 0.0.0.0, ::, 127.0.0.1…
	Process   string   `json:"process,omitempty"` // its process's name (comm), when found
	Pid       int      `json:"pid,omitempty"`
	inodes    []uint64
}

// tcpListen is the state of a listening socket in /proc/net/tcp
// (TCP_LISTEN in the kernel's include/net/tcp_states.h).
const tcpListen = "0A"

// maxProcNetLines bounds the sockets read from one /proc/net/tcp file: a
// workspace with more than this many is not one the view can show anyway.
const maxProcNetLines = 1 << 16

// ParseProcNetTCP reads a /proc/net/tcp or /proc/net/tcp6 table and
// returns its listening sockets, one a line (not yet grouped by port).
// The addresses are as the kernel prints them: each 32-bit word in the
// machine's byte order.
func ParseProcNetTCP(r io.Reader) ([]Listening, error) {
	var out []Listening
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 512), 4096)
	for n := 0; sc.Scan(); n++ {
		if n == 0 {
			continue // the header
		}
		if n > maxProcNetLines {
			break
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		addr, port, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("line %d: local address %q", n, f[1])
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("line %d: port %q", n, port)
		}
		ip, err := procAddr(addr)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		inode, _ := strconv.ParseUint(f[9], 10, 64)
		out = append(out, Listening{Port: uint16(p), Addresses: []string{ip.String()}, inodes: []uint64{inode}})
	}
	return out, sc.Err()
}

// procAddr decodes an address of /proc/net/tcp{,6}: 8 or 32 hex digits,
// each group of 8 a 32-bit word in the machine's byte order.
func procAddr(s string) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 4 && len(b) != 16 {
		return netip.Addr{}, fmt.Errorf("address %q", s)
	}
	out := make([]byte, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.NativeEndian.Uint32(b[i:]))
	}
	a, _ := netip.AddrFromSlice(out)
	return a.Unmap(), nil
}

// listeningPorts is what the workspace listens on, one entry a port, by
// port, with the process of each found where it is cheap (this server's
// user may read other processes' fd tables, as the workspace's only
// user usually can). The server's own sockets are left out: it is not
// the user's to forward (on a cluster it listens on the Pod's loopback).
func listeningPorts(proc string, self int) ([]Listening, error) {
	byPort := map[uint16]*Listening{}
	read := 0
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		f, err := os.Open(filepath.Join(proc, name))
		if err != nil {
			continue // no IPv6
		}
		ls, err := ParseProcNetTCP(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", proc, name, err)
		}
		read++
		for _, l := range ls {
			if cur := byPort[l.Port]; cur != nil {
				if !slices.Contains(cur.Addresses, l.Addresses[0]) {
					cur.Addresses = append(cur.Addresses, l.Addresses[0])
				}
				cur.inodes = append(cur.inodes, l.inodes...)
				continue
			}
			l := l
			byPort[l.Port] = &l
		}
	}
	if read == 0 {
		return nil, fmt.Errorf("%s/net/tcp: cannot be read", proc)
	}
	owners := socketOwners(proc, byPort)
	var out []Listening
	for _, l := range byPort {
		mine := false
		for _, ino := range l.inodes {
			if o, ok := owners[ino]; ok {
				mine = mine || o == self
				if l.Pid == 0 {
					l.Pid = o
				}
			}
		}
		if mine {
			continue
		}
		if l.Pid != 0 {
			l.Process = procComm(proc, l.Pid)
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Listening) int { return int(a.Port) - int(b.Port) })
	return out, nil
}

// maxScanPids and maxScanFds bound the walk over the fd tables that finds
// a socket's process: the names are a convenience, the list is not.
const (
	maxScanPids = 4096
	maxScanFds  = 4096
)

// socketOwners maps the inodes of the listening sockets in ports to the
// pid of a process that holds them.
func socketOwners(proc string, ports map[uint16]*Listening) map[uint64]int {
	want := map[uint64]bool{}
	for _, l := range ports {
		for _, ino := range l.inodes {
			if ino != 0 {
				want[ino] = true
			}
		}
	}
	owners := map[uint64]int{}
	if len(want) == 0 {
		return owners
	}
	d, err := os.Open(proc)
	if err != nil {
		return owners
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	pids := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if pids++; pids > maxScanPids || len(owners) == len(want) {
			break
		}
		fdDir := filepath.Join(proc, name, "fd")
		fd, err := os.Open(fdDir)
		if err != nil {
			continue // another user's process
		}
		fds, _ := fd.Readdirnames(maxScanFds)
		fd.Close()
		for _, n := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, n))
			if err != nil {
				continue
			}
			s, ok := strings.CutPrefix(link, "socket:[")
			if !ok {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
			if err == nil && want[ino] {
				if _, seen := owners[ino]; !seen {
					owners[ino] = pid
				}
			}
		}
	}
	return owners
}

// procComm is a process's name as the kernel keeps it (at most 15 bytes).
func procComm(proc string, pid int) string {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64))
	return strings.TrimSpace(string(b))
}

// servePortsListening serves GET /api/ports/listening: the workspace's listening TCP
// ports as JSON.
func servePortsListening(w http.ResponseWriter, r *http.Request) {
	ls, err := listeningPorts("/proc", os.Getpid())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if ls == nil {
		ls = []Listening{}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"ports": ls})
}

// tunnelUpgrade is the Upgrade token of a tunnel: after the 101 answer the
// connection carries the bytes of one TCP connection to the port, both
// ways, as they are.
const tunnelUpgrade = "cove-tunnel"

// ParsePortNumber reads a TCP port as the API takes it: decimal digits
// only, 1 to 65535.
func ParsePortNumber(s string) (uint16, error) {
	if s == "" || len(s) > 5 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q: want a number from 1 to 65535", s)
	}
	return uint16(n), nil
}

// tunnelDialWait bounds a tunnel's dial on the workspace's loopback.
const tunnelDialWait = 5 * time.Second

// serveTunnel serves GET /api/ports/tunnel?port=N with Upgrade:
// cove-tunnel: it dials the port on the workspace's own loopback (IPv4,
// then IPv6), answers 101 and relays the connection.
func serveTunnel(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), tunnelUpgrade) {
		http.Error(w, "a tunnel needs Upgrade: "+tunnelUpgrade, http.StatusBadRequest)
		return
	}
	port, err := ParsePortNumber(r.URL.Query().Get("port"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), tunnelDialWait)
	defer cancel()
	var d net.Dialer
	var up net.Conn
	for _, host := range []string{"127.0.0.1", "::1"} {
		if up, err = d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))); err == nil {
			break
		}
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("nothing answers on port %d of the workspace's loopback: %v", port, err), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel over this connection", http.StatusInternalServerError)
		return
	}
	down, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	down.SetDeadline(time.Time{})
	if _, err := io.WriteString(down, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+tunnelUpgrade+"\r\n\r\n"); err != nil {
		up.Close()
		down.Close()
		return
	}
	// Bytes the client sent after its request, already read.
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			up.Close()
			down.Close()
			return
		}
	}
	relay(down, up)
}

// relayBuffer is the size of each direction's buffer: a relay holds two,
// whatever either side sends.
const relayBuffer = 32 << 10

// relay copies a to b and b to a until both directions end, passing on a
// half close where the connection can (TCP, Unix sockets), and closes
// both.
func relay(a, b net.Conn) {
	var wg sync.WaitGroup
	one := func(dst, src net.Conn) {
		defer wg.Done()
		io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, relayBuffer))
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
			src.Close()
		}
	}
	wg.Add(2)
	go one(a, b)
	go one(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

// errTunnel is a tunnel the workspace's server refused, with its reason.
var errTunnel = errors.New("the workspace's server refused the tunnel")
