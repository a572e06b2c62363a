package kube

import (
	"context"
	"fmt"
	"net"
)

// Forwarder opens connections to a port inside the Pod through the API
// server (port-forward), each on an upgraded connection of its own, with
// no port opened on the user's machine: another local user could connect
// to one, where the launcher's proxy checks its token and origin first. A
// lost connection (a laptop that slept, an API server restart) costs only
// the requests on it; the next Dial upgrades a new one.
type Forwarder struct {
	pod  *Pod
	port int
}

// Forward returns a Forwarder to port in the Pod (on its loopback).
func (p *Pod) Forward(port int) *Forwarder { return &Forwarder{pod: p, port: port} }

// Dial opens a connection to the port.
func (f *Forwarder) Dial() (net.Conn, error) {
	c, err := f.pod.cluster.api.Forward(context.Background(), f.pod.path(), f.port)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", f.pod.Namespace, f.pod.Name, err)
	}
	return c, nil
}
