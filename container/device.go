package container

import (
	"fmt"
	"os"
	"path"
	"strings"
)

// Device is one of the host's devices given to the container, as docker
// run --device gives it: the node bound at Target, under /dev.
type Device struct {
	Source string `json:"source"` // the host's node, as /dev/fuse
	Target string `json:"target"` // where the container sees it, under /dev
}

// ParseDevice reads HOST[:CONTAINER][:PERMS] (docker run --device's form)
// and checks that HOST is one of this machine's character or block
// devices. PERMS (r, w, m) is accepted and not enforced: cove keeps no
// device rules beyond the node's own permissions.
func ParseDevice(s string) (Device, error) {
	parts := strings.Split(s, ":")
	if len(parts) > 3 || parts[0] == "" {
		return Device{}, fmt.Errorf("device %q: want HOST[:CONTAINER][:PERMS]", s)
	}
	d := Device{Source: parts[0], Target: parts[0]}
	if len(parts) > 1 && strings.HasPrefix(parts[1], "/") {
		d.Target = parts[1]
		parts = append(parts[:1], parts[2:]...)
	}
	if len(parts) > 1 && (parts[1] == "" || strings.Trim(parts[1], "rwm") != "") {
		return Device{}, fmt.Errorf("device %q: permissions %q: want r, w and m", s, parts[1])
	}
	if len(parts) > 2 {
		return Device{}, fmt.Errorf("device %q: want HOST[:CONTAINER][:PERMS]", s)
	}
	if !path.IsAbs(d.Source) || path.Clean(d.Target) != d.Target || !strings.HasPrefix(d.Target, "/dev/") {
		return Device{}, fmt.Errorf("device %q: want an absolute host path, seen in the container under /dev", s)
	}
	fi, err := os.Stat(d.Source)
	if err != nil {
		return Device{}, fmt.Errorf("device %s: %w", s, err)
	}
	if fi.Mode()&os.ModeDevice == 0 {
		return Device{}, fmt.Errorf("device %s: not a device on this machine (%s)", d.Source, fi.Mode().Type())
	}
	return d, nil
}
