package container

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Tmpfs is a file system in memory, empty at each start, as docker run
// --tmpfs and --mount type=tmpfs make one. What it holds counts against
// the container's memory limit.
type Tmpfs struct {
	Target   string `json:"target"`
	Size     int64  `json:"size,omitempty"` // bytes; 0 is the kernel's default, half the memory
	Mode     uint32 `json:"mode,omitempty"` // 0 is 1777
	ReadOnly bool   `json:"readonly,omitempty"`
	NoExec   bool   `json:"noexec,omitempty"`
}

// ParseTmpfs reads docker run --tmpfs's PATH[:OPTIONS], the options
// comma-separated: size=64m, mode=1777, ro or rw, noexec or exec (nosuid
// and nodev are always so). As Docker, it is noexec unless exec is said.
func ParseTmpfs(s string) (Tmpfs, error) {
	target, opts, _ := strings.Cut(s, ":")
	t := Tmpfs{Target: target, NoExec: true}
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			if err := t.option(o); err != nil {
				return Tmpfs{}, fmt.Errorf("tmpfs %q: %w", s, err)
			}
		}
	}
	return t, t.check()
}

// option sets one option as --mount type=tmpfs writes it (tmpfs-size,
// tmpfs-mode) or as --tmpfs does (size, mode, ro, noexec…).
func (t *Tmpfs) option(o string) error {
	k, v, _ := strings.Cut(strings.TrimSpace(o), "=")
	switch k {
	case "size", "tmpfs-size":
		n, err := ParseSize(v)
		if err != nil {
			return err
		}
		t.Size = n
	case "mode", "tmpfs-mode":
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			return fmt.Errorf("mode %q: want octal permissions, as 1777", v)
		}
		t.Mode = uint32(m)
	case "ro", "readonly":
		t.ReadOnly = v == "" || v == "true" || v == "1"
	case "rw":
		t.ReadOnly = false
	case "noexec":
		t.NoExec = true
	case "exec":
		t.NoExec = false
	case "nosuid", "nodev", "":
	default:
		return fmt.Errorf("option %q: cove takes size, mode, ro, rw, exec and noexec", o)
	}
	return nil
}

// SetOptions applies --mount type=tmpfs's options (tmpfs-size,
// tmpfs-mode, readonly) to t.
func (t *Tmpfs) SetOptions(opts ...string) error {
	for _, o := range opts {
		if err := t.option(o); err != nil {
			return fmt.Errorf("tmpfs %s: %w", t.Target, err)
		}
	}
	return t.check()
}

func (t Tmpfs) check() error {
	if !path.IsAbs(t.Target) || path.Clean(t.Target) == "/" {
		return fmt.Errorf("tmpfs %q: want an absolute path inside the container, not /", t.Target)
	}
	return nil
}

// mountTmpfs mounts t in the container's root.
func (r *rootfs) mountTmpfs(t Tmpfs) error {
	mode := t.Mode
	if mode == 0 {
		mode = 0o1777
	}
	data := fmt.Sprintf("mode=%o", mode)
	if t.Size > 0 {
		data += fmt.Sprintf(",size=%dk", (t.Size+1023)>>10)
	}
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if t.NoExec {
		flags |= unix.MS_NOEXEC
	}
	if t.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	return r.mountAt(t.Target, false, "tmpfs", "tmpfs", flags, data)
}
