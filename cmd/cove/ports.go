package main

import (
	"fmt"
	"strings"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/ide"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
)

// publishFlag is cove up's -p, as cove run's.
func publishFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Usage: "forward `PORTS` from the host: [ADDR:]HOSTPORT:CONTAINERPORT (on 127.0.0.1 unless ADDR is given); the IDE's Ports view forwards more while it runs"}
}

// publishedFlags are the command's -p ports ("" when it has no -p).
func publishedFlags(c *cli.Context) ([]container.Port, error) {
	var ports []container.Port
	for _, v := range c.StringSlice("publish") {
		p, err := container.ParsePort(v)
		if err != nil {
			return nil, fmt.Errorf("-p: %w", err)
		}
		if p.Proto != "tcp" {
			return nil, fmt.Errorf("-p %s: a workspace's ports are TCP (cove run -p forwards UDP)", v)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// servePorts serves the IDE's Ports view for ws on proxy: its listening
// ports, those published with it, and forwards on request. The -p ports
// its backend did not publish (a Pod; a workspace that was running
// before this -p; --net host or none) are forwarded through its IDE
// server from here, at the port asked for. Close the result when the
// launcher ends: its forwards end with it.
func servePorts(c *cli.Context, proxy *ide.Proxy, ws workspace.Workspace) *ide.Ports {
	p := &ide.Ports{Dial: ws.DialIDE}
	for _, q := range ws.Published() {
		if q.Proto == "tcp" {
			p.Published = append(p.Published, ide.PublishedPort{HostIP: q.HostIP, HostPort: q.HostPort, Port: q.ContainerPort, Source: q.Source})
		}
	}
	asked, _ := publishedFlags(c) // checked before the workspace started
	for _, q := range asked {
		published := false
		for _, pub := range ws.Published() {
			published = published || pub.Overlaps(q) && pub.ContainerPort == q.ContainerPort
		}
		if published {
			continue
		}
		if _, err := p.Forward(q.ContainerPort, q.HostIP, int(q.HostPort), "-p"); err != nil {
			fmt.Fprintf(c.App.ErrWriter, "cove: -p %s: %s\n", q, termtext.Visible(err.Error()))
		}
	}
	proxy.Handle("/api/ports", p.ServeList())
	proxy.Handle("/api/ports/forward", p.ServeForward())
	return p
}

// publishServedNote says, when cove up -p finds another cove serving the
// workspace, that its -p ports are not forwarded: that launcher forwards
// ports, in its IDE's Ports view.
func publishServedNote(c *cli.Context) {
	if ps := c.StringSlice("publish"); len(ps) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "cove: note: another cove serves this workspace: -p %s is not forwarded; forward ports in the IDE's Ports view, or stop it and run cove up -p again\n",
			termtext.Visible(strings.Join(ps, " -p ")))
	}
}
