package workspace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/devcontainer"
	"github.com/cove-sh/cove/internal/projectfs"
	"github.com/cove-sh/cove/internal/termtext"
)

// maxEnvFile is the most of an --env-file read: a file of variables, not
// a place to hide a disk image.
const maxEnvFile = 1 << 20

// runArgsLaunch applies devcontainer.json's runArgs that shape the launch
// (--shm-size, --ulimit, --add-host, --device, --tmpfs) to l, and puts the variables of its
// --env-files before its -e ones in rt.Env, as docker run orders them.
// project is the host's project directory: a relative --env-file is in
// it. A file cove cannot read is an error before anything starts.
func runArgsLaunch(w io.Writer, dc *devcontainer.Config, rt *devcontainer.Runtime, project string, l *Launch) error {
	if dc == nil || rt == nil {
		return nil
	}
	note := func(f string, a ...any) {
		fmt.Fprintf(w, "cove: note: %s\n", termtext.Visible(fmt.Sprintf(f, a...)))
	}
	if rt.ShmSize != "" {
		n, err := container.ParseSize(rt.ShmSize)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s: runArgs --shm-size %q: want a size, as 2g or 512m", dc.Path, rt.ShmSize)
		}
		l.ShmSize = n
	}
	for _, s := range rt.Ulimits {
		u, err := container.ParseUlimit(s)
		if err != nil {
			return fmt.Errorf("%s: runArgs --%w", dc.Path, err)
		}
		l.Ulimits = append(l.Ulimits, u)
	}
	for _, h := range rt.ExtraHosts {
		if h[1] != "host-gateway" {
			l.ExtraHosts = append(l.ExtraHosts, h)
			continue
		}
		switch l.Net {
		case container.NetHost:
			// The host's network is the workspace's: the host is here.
			l.ExtraHosts = append(l.ExtraHosts, [2]string{h[0], "127.0.0.1"})
		default:
			note("runArgs --add-host %s:host-gateway: the workspace's network does not reach this machine's own services (that keeps them out of the project's reach); runArgs --network=host gives it the host's network", h[0])
		}
	}
	for _, v := range rt.Devices {
		d, err := container.ParseDevice(v)
		if errors.Is(err, fs.ErrNotExist) {
			note("runArgs --device %s: this machine has no such device; the workspace starts without it", v)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: runArgs --%w", dc.Path, err)
		}
		l.Devices = append(l.Devices, d)
	}
	for _, v := range rt.Tmpfs {
		t, err := container.ParseTmpfs(v)
		if err != nil {
			return fmt.Errorf("%s: runArgs --%w", dc.Path, err)
		}
		l.Tmpfs = append(l.Tmpfs, t)
	}
	var env []string
	for _, p := range rt.EnvFiles {
		vars, err := readEnvFile(dc.Trusted, project, p, note)
		if err != nil {
			return fmt.Errorf("%s: runArgs --env-file %s: %w", dc.Path, p, err)
		}
		env = append(env, vars...)
	}
	rt.Env = append(env, rt.Env...)
	return nil
}

// readEnvFile reads docker's env-file format: a KEY=VALUE a line, the
// value as written (no quotes taken off), # comments and blank lines
// skipped. A file in the project is the workspace's to write: it is read
// through projectfs (no symlink leads out of the project, no FIFO blocks),
// so that it cannot hand the workspace one of this machine's files. One
// elsewhere is read only from a trusted devcontainer.json.
func readEnvFile(trusted bool, project, p string, note func(string, ...any)) ([]string, error) {
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(project, p)
	}
	var b []byte
	rel, err := filepath.Rel(project, abs)
	if err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		d, err := projectfs.Open(project)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		b, err = d.ReadFileLimit(rel, maxEnvFile)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist: write it (KEY=VALUE lines), or take --env-file out of runArgs", rel)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
	} else {
		if !trusted {
			return nil, fmt.Errorf("a file outside the project is read only from a trusted devcontainer.json: cove up --trust")
		}
		f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NONBLOCK, 0) // a FIFO does not hold the start up
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxEnvFile {
			return nil, fmt.Errorf("not a file of at most %d bytes", maxEnvFile)
		}
		if b, err = io.ReadAll(io.LimitReader(f, maxEnvFile)); err != nil {
			return nil, err
		}
	}
	var vars []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxEnvFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		if k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", n, termtext.Visible(line))
		}
		if !ok {
			note("runArgs --env-file %s: %s takes its value from the host's environment in docker; cove does not pass the host's variables: write %s=VALUE", p, k, k)
			continue
		}
		vars = append(vars, line)
	}
	return vars, sc.Err()
}
