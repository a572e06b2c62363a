package container

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseHostEntry reads docker run --add-host's NAME:IP (or NAME=IP, its
// form for IPv6's colons; an IP in brackets too). IP may be
// "host-gateway", which the caller resolves. The name is one a hosts
// file can hold: letters, digits, dots, dashes and underscores.
func ParseHostEntry(s string) (name, ip string, err error) {
	sep := ":"
	if eq := strings.IndexByte(s, '='); eq >= 0 && (eq < strings.IndexByte(s, ':') || !strings.Contains(s, ":")) {
		sep = "="
	}
	name, ip, ok := strings.Cut(s, sep)
	ip = strings.Trim(ip, "[]")
	if _, perr := netip.ParseAddr(ip); !ok || (perr != nil && ip != "host-gateway") || !validHostName(name) {
		return "", "", fmt.Errorf("add-host %q: want NAME:IP (or NAME:host-gateway)", s)
	}
	return name, ip, nil
}

// validHostName says whether name can stand in a hosts file (a space or
// a newline would add entries of its own).
func validHostName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}
