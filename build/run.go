package build

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/internal/termtext"
	"github.com/cove-sh/cove/internal/userns"
)

// runStep runs args in a container whose root is the stage so far (lowers,
// top first) with a fresh upper directory, upper, which then holds what the
// command changed. The build context is not in it. The network is the
// host's, as docker build's default, unless RUN --network=none; binds are
// RUN --mount's.
func (b *builder) runStep(ctx context.Context, lowers []string, proc container.Process, upper string, binds []container.Bind, network string) error {
	// The overlay mount's options must fit in a page, with upper and work:
	// the lowers are named relative to the step cache, where init starts.
	steps := filepath.Join(b.opts.CacheDir, "steps")
	rel := make([]string, len(lowers))
	for i, l := range lowers {
		r, err := filepath.Rel(steps, l)
		if err != nil || strings.Contains(r, ":") {
			r = l
		}
		rel[i] = r
	}
	if lower := strings.Join(rel, ":"); len(lower)+2*len(upper)+64 > 4096 {
		return fmt.Errorf("the stage has %d layers, more than one overlay mount can stack under %s: join RUN, COPY and WORKDIR steps (RUN a && b)", len(lowers), b.opts.CacheDir)
	}
	id := newID()
	dir := filepath.Join(b.tmp, "run-"+id[:12])
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		return err
	}
	defer userns.RemoveAll(ctx, dir)
	resolv, hosts := filepath.Join(dir, "etc", "resolv.conf"), filepath.Join(dir, "etc", "hosts")
	r, _ := os.ReadFile("/etc/resolv.conf")
	if network == container.NetPrivate {
		r = container.ResolvConf(r) // pasta's DNS forwarder
	}
	if err := os.WriteFile(resolv, r, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"), 0o644); err != nil {
		return err
	}
	control := ""
	if network == container.NetPrivate {
		// The network helper asks init, over this socket, to block the
		// addresses the host gains while the step runs. Its own short
		// directory (0700): a socket's path has room for 107 bytes only.
		ctlDir, err := os.MkdirTemp("", "cove-build-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(ctlDir)
		control = filepath.Join(ctlDir, "ctl.sock")
	}
	hostname := "cove-build"
	if h := b.opts.BuildArgs["BUILDKIT_SANDBOX_HOSTNAME"]; h != "" {
		hostname = h // the built-in build arg (in the step's key: runInstruction)
	}
	spec := &container.Spec{
		ID: id, Name: "cove-build-" + id[:8], Hostname: hostname, Control: control,
		Lower: strings.Join(rel, ":"), LowerBase: steps, Upper: upper, Work: filepath.Join(dir, "work"), Merged: filepath.Join(dir, "merged"),
		Binary: b.opts.Binary, ResolvConf: resolv, Hosts: hosts,
		Binds: binds, Net: network, UserNS: os.Geteuid() != 0, Process: proc, KeepTmp: true,
	}
	// What RUN prints is the Dockerfile's to choose (a project's may be a
	// workspace's): shown with its control characters made visible (no
	// escape sequence reaches the terminal), and always through a pipe,
	// never a descriptor of ours (a terminal, a file) handed over.
	var out io.Writer = io.Discard
	if b.opts.Output != nil {
		out = termtext.NewWriter(b.opts.Output)
	}
	ctr, err := container.Start(spec, container.Stdio{Stdout: out, Stderr: out}, container.Limits{}, func(msg string) {
		fmt.Fprintf(out, "warning: %s\n", msg)
	})
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, ctr.Kill)
	defer stop()
	code, oom, err := ctr.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if oom && code == 137 {
		return fmt.Errorf("killed: out of memory")
	}
	if code != 0 {
		return fmt.Errorf("the command exited with status %d", code)
	}
	return nil
}

// mountPoints are where the runtime mounts over the container's root; the
// ones the stage lacks are made in the upper directory, empty, and are no
// part of what the RUN changed.
var mountPoints = []string{".cove", "proc", "sys", "dev", "etc/resolv.conf", "etc/hosts"}

// dropMountPoints removes from upper the mount points the runtime made
// there (missing names the ones the stage did not have), and then a
// directory left empty that only held them.
func dropMountPoints(upper string, missing []string) error {
	for _, m := range missing {
		p := filepath.Join(upper, m)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if fi.IsDir() {
			// Empty unless the command made files under the mount (it
			// cannot: they went to the mounted file system).
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				continue
			}
		} else if fi.Mode().IsRegular() && fi.Size() == 0 {
			os.Remove(p)
		}
	}
	etc := filepath.Join(upper, "etc")
	if names, err := os.ReadDir(etc); err == nil && len(names) == 0 && !opaque(etc) {
		os.Remove(etc) // copied up only to hold resolv.conf or hosts
	}
	return nil
}

func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
