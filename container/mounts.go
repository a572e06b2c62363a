package container

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"
)

// rootfs sets up the container's root inside its new mount namespace and
// pivots into it. Every mount target is resolved inside the new root
// (openat2 RESOLVE_IN_ROOT through pathrs-lite) and mounted through its
// /proc/self/fd path, so an image whose /proc, /dev or /etc/resolv.conf is
// a symlink to a host path gets the mount inside its root instead.
type rootfs struct {
	spec *Spec
	root *os.File // O_PATH handle on the merged root
}

func setupRootfs(spec *Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	// Our own /proc, for our PID namespace: pids that init reads or
	// writes there (a child's uid_map) must be its own, not the host's.
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc for init: %w", err)
	}
	if spec.Copy {
		if err := unix.Mount(spec.Merged, spec.Merged, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind root: %w", err)
		}
	} else {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", spec.Lower, spec.Upper, spec.Work)
		if spec.UserNS {
			opts += ",userxattr"
		}
		if err := mountOverlay(spec.Merged, opts, spec.Volatile); err != nil {
			return fmt.Errorf("mount overlay root: %w", err)
		}
	}
	// The image's device nodes open nothing: the project chooses the
	// image, a layer may hold a node naming one of this machine's devices
	// (its disk), extracted as root it is real, and there is no devices
	// cgroup to refuse it. /dev is a file system of its own, its nodes
	// bound from the host's.
	if err := unix.MountSetattr(unix.AT_FDCWD, spec.Merged, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NODEV}); err != nil {
		return fmt.Errorf("mount the root nodev: %w", err)
	}
	root, err := os.OpenFile(spec.Merged, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer root.Close()
	r := &rootfs{spec: spec, root: root}
	steps := []func() error{r.mountCove, r.mountProc, r.mountDev, r.mountSys, r.maskKernel, r.mountTmp, r.mountEtc, r.mountBinds}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return pivot(spec.Merged)
}

// target resolves rel inside the root, creating it (a directory, or an
// empty file when file is set) if it is missing, and returns an O_PATH
// handle on it.
func (r *rootfs) target(rel string, file bool) (*os.File, error) {
	rel = strings.TrimPrefix(path.Clean("/"+rel), "/")
	// A target may be a dangling symlink (Ubuntu's resolv.conf points into
	// /run): follow it by hand, inside the root, and create the file or
	// directory where it leads.
	for range 40 {
		if f, err := pathrs.OpenatInRoot(r.root, rel); err == nil {
			return f, nil
		}
		dir, base := splitPath(rel)
		parent, err := pathrs.MkdirAllHandle(r.root, dir, 0o755)
		if err != nil {
			return nil, err
		}
		var fd int
		if file {
			fd, err = unix.Openat(int(parent.Fd()), base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err == nil {
				unix.Close(fd)
			}
		} else {
			err = unix.Mkdirat(int(parent.Fd()), base, 0o755)
		}
		if err == nil {
			parent.Close()
			return pathrs.OpenatInRoot(r.root, rel)
		}
		link, lerr := readlinkAt(int(parent.Fd()), base)
		parent.Close()
		if lerr != nil {
			return nil, err
		}
		if path.IsAbs(link) {
			rel = strings.TrimPrefix(path.Clean(link), "/")
		} else {
			rel = strings.TrimPrefix(path.Clean("/"+dir+"/"+link), "/")
		}
	}
	return nil, unix.ELOOP
}

func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func splitPath(rel string) (dir, base string) {
	i := strings.LastIndex(rel, "/")
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// mountAt mounts onto rel inside the root.
func (r *rootfs) mountAt(rel string, file bool, source, fstype string, flags uintptr, data string) error {
	t, err := r.target(rel, file)
	if err != nil {
		return fmt.Errorf("mount %s: %w", "/"+strings.TrimPrefix(rel, "/"), err)
	}
	defer t.Close()
	if err := unix.Mount(source, fdPath(t), fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s: %w", "/"+strings.TrimPrefix(rel, "/"), err)
	}
	return nil
}

// remountReadOnly makes the mount at rel (and those below it) read-only.
func (r *rootfs) remountReadOnly(rel string) error {
	t, err := pathrs.OpenatInRoot(r.root, strings.TrimPrefix(rel, "/"))
	if err != nil {
		return fmt.Errorf("remount %s read-only: %w", rel, err)
	}
	defer t.Close()
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(int(t.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("remount %s read-only: %w", rel, err)
	}
	return nil
}

func fdPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// mountCove binds init's program (Spec.Binary) read-only at /.cove/init
// and the workload's (Spec.Tools) at /.cove/cove, on a tmpfs of their own,
// so that init and the servers run from a file the container cannot
// write (runc's CVE-2019-5736).
func (r *rootfs) mountCove() error {
	cove, err := r.mountFresh(".cove", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=1m")
	if err != nil {
		return err
	}
	defer cove.close()
	for _, b := range [][2]string{{"init", r.spec.Binary}, {"cove", r.spec.tools()}} {
		if err := cove.mountAt(b[0], true, b[1], "", unix.MS_BIND, ""); err != nil {
			return err
		}
		t, err := cove.open(b[0])
		if err != nil {
			return err
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		err = unix.MountSetattr(int(t.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr)
		t.Close()
		if err != nil {
			return fmt.Errorf("remount /.cove/%s read-only: %w", b[0], err)
		}
	}
	return nil
}

// freshFS is a file system init has just mounted inside the root (the
// tmpfs at /dev or at /.cove): nothing in it comes from the image, and no
// other process reaches it (init's mount namespace is its own, the workload
// not started), so its paths are made and opened relative to its root and
// beneath it, a few system calls each, where a path through the image
// takes some fifty (pathrs-lite's lookup and its checks through /proc).
type freshFS struct {
	root *os.File // O_PATH handle on the new mount's root
	rel  string   // where it is, for errors
}

// mountFresh mounts a tmpfs at rel inside the root and opens it.
func (r *rootfs) mountFresh(rel string, flags uintptr, data string) (*freshFS, error) {
	if err := r.mountAt(rel, false, "tmpfs", "tmpfs", flags, data); err != nil {
		return nil, err
	}
	root, err := pathrs.OpenatInRoot(r.root, rel)
	if err != nil {
		return nil, fmt.Errorf("mount /%s: %w", rel, err)
	}
	return &freshFS{root: root, rel: rel}, nil
}

func (f *freshFS) close() { f.root.Close() }

// open opens name, a path beneath f's root, as an O_PATH handle,
// following no symlink.
func (f *freshFS) open(name string) (*os.File, error) {
	t, err := openIn(f.root, name)
	if err != nil {
		return nil, fmt.Errorf("open /%s/%s: %w", f.rel, name, err)
	}
	return t, nil
}

// mountAt makes name in f (a directory, or an empty file when file is set)
// and mounts onto it.
func (f *freshFS) mountAt(name string, file bool, source, fstype string, flags uintptr, data string) error {
	dir := int(f.root.Fd())
	var err error
	if file {
		var fd int
		if fd, err = unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644); err == nil {
			unix.Close(fd)
		}
	} else {
		err = unix.Mkdirat(dir, name, 0o755)
	}
	if err != nil {
		return fmt.Errorf("mount /%s/%s: %w", f.rel, name, err)
	}
	t, err := f.open(name)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := unix.Mount(source, fdPath(t), fstype, flags, data); err != nil {
		return fmt.Errorf("mount /%s/%s: %w", f.rel, name, err)
	}
	return nil
}

// openIn opens rel beneath dir as an O_PATH handle, following no symlink.
func openIn(dir *os.File, rel string) (*os.File, error) {
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(int(dir.Fd()), rel, how)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

func (r *rootfs) mountProc() error {
	return r.mountAt("proc", false, "proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

var devices = []string{"null", "zero", "full", "random", "urandom", "tty"}

func (r *rootfs) mountDev() error {
	dev, err := r.mountFresh("dev", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=755,size=65536k")
	if err != nil {
		return err
	}
	defer dev.close()
	for _, d := range devices {
		if err := dev.mountAt(d, true, "/dev/"+d, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	for _, d := range r.spec.Devices {
		// Anywhere the user says (/dev/fuse, or a path of the image's).
		if err := r.mountAt(d.Target, true, d.Source, "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	if err := dev.mountAt("pts", false, "devpts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	shm := r.spec.ShmSize
	if shm <= 0 {
		shm = 64 << 20
	}
	if err := dev.mountAt("shm", false, "shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=1777,size=%dk", (shm+1023)>>10)); err != nil {
		return err
	}
	// POSIX message queues, of the container's own IPC namespace, where
	// podman and Docker put them; a kernel without them goes without.
	if err := dev.mountAt("mqueue", false, "mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil &&
		!errors.Is(err, unix.ENODEV) {
		return err
	}
	links := [][2]string{{"pts/ptmx", "ptmx"}, {"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, l := range links {
		if err := unix.Symlinkat(l[0], int(dev.root.Fd()), l[1]); err != nil {
			return fmt.Errorf("symlink /dev/%s: %w", l[1], err)
		}
	}
	return nil
}

// mountSys mounts a read-only sysfs, or binds the host's read-only where a
// fresh one is not allowed (a user namespace sharing the host network).
func (r *rootfs) mountSys() error {
	err := r.mountAt("sys", false, "sysfs", "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "")
	if err == nil {
		return nil
	}
	if err := r.mountAt("sys", false, "/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	return r.remountReadOnly("sys")
}

// readonlyPaths are the parts of /proc through which root writes the
// host's kernel: sysctls (most of them global: kernel.core_pattern runs a
// program of the writer's choice as the host's root; with the host's
// network, net.* are the host's too), IRQ affinities, the filesystems'
// and buses' knobs, and the SysRq trigger. They are Docker's (moby
// oci/defaults.go) and the OCI runtime spec's readonlyPaths; with a
// network namespace of its own the container gets them read-only too, as
// Docker does: its own net.* settings are not worth a writable window
// onto the rest.
var readonlyPaths = []string{"proc/bus", "proc/fs", "proc/irq", "proc/sys", "proc/sysrq-trigger"}

// ownSysctls stay writable inside the read-only /proc/sys: they are the
// writer's UTS namespace's, and every container has its own, so root can
// set the container's hostname (sethostname(2) needs CAP_SYS_ADMIN, which
// the workload never has) and never the host's.
var ownSysctls = []string{"proc/sys/kernel/hostname", "proc/sys/kernel/domainname"}

// maskedPaths show the host's kernel memory (kcore), the keyring keys of
// the host uid that the container's root is (keys are not namespaced),
// timers and scheduling with the host's tasks (timer_list, sched_debug:
// what other containers and the launcher run, and when), interrupt counts
// (a side channel), firmware tables and power meters (powercap's energy
// counters leak what other processes compute, the PLATYPUS attack):
// Docker's maskedPaths. A file gets /dev/null bound over it, a directory
// an empty read-only tmpfs.
var maskedPaths = []string{
	"proc/acpi", "proc/asound", "proc/interrupts", "proc/kcore", "proc/keys", "proc/latency_stats",
	"proc/sched_debug", "proc/scsi", "proc/timer_list", "proc/timer_stats",
	"sys/devices/virtual/powercap", "sys/firmware",
}

// Mount attributes of the read-only /proc paths, as runc sets them.
const readonlyAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC

// maskKernel makes readonlyPaths read-only and masks maskedPaths in the
// container's fresh /proc and /sys; a path this kernel lacks is skipped.
// The workload cannot undo it: it has no CAP_SYS_ADMIN to unmount with,
// and seccomp keeps it from making a user namespace that would give it one.
func (r *rootfs) maskKernel() error {
	k, err := r.openKernelFS()
	if err != nil {
		return err
	}
	defer k.close()
	for _, p := range readonlyPaths {
		if err := k.rebind(p, readonlyAttrs, 0); err != nil {
			return err
		}
	}
	for _, p := range ownSysctls {
		if err := k.rebind(p, 0, unix.MOUNT_ATTR_RDONLY); err != nil {
			return err
		}
	}
	for _, p := range maskedPaths {
		if err := k.mask(p); err != nil {
			return err
		}
	}
	return nil
}

// kernelFS holds the container's /proc and /sys, which init has just
// mounted (mountProc; mountSys: a fresh sysfs or a bind of the host's), so
// nothing in them comes from the image.
type kernelFS struct {
	proc, sys *os.File
}

// openKernelFS opens /proc and /sys inside the root once (a resolution
// that must not leave it, as for every target); the paths below them are
// then opened relative to these, which costs a few microseconds a path
// instead of tens.
func (r *rootfs) openKernelFS() (*kernelFS, error) {
	proc, err := pathrs.OpenatInRoot(r.root, "proc")
	if err != nil {
		return nil, fmt.Errorf("mask /proc: %w", err)
	}
	sys, err := pathrs.OpenatInRoot(r.root, "sys")
	if err != nil {
		proc.Close()
		return nil, fmt.Errorf("mask /sys: %w", err)
	}
	return &kernelFS{proc: proc, sys: sys}, nil
}

func (k *kernelFS) close() {
	k.proc.Close()
	k.sys.Close()
}

// open opens rel ("proc/…" or "sys/…") as an O_PATH handle, following no
// symlink and staying beneath its file system's root; nil without an
// error when this kernel has no such path.
func (k *kernelFS) open(rel string) (*os.File, error) {
	dir, sub := k.proc, strings.TrimPrefix(rel, "proc/")
	if s, ok := strings.CutPrefix(rel, "sys/"); ok {
		dir, sub = k.sys, s
	}
	t, err := openIn(dir, sub)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open /%s: %w", rel, err)
	}
	return t, nil
}

// rebind mounts a copy of the mount at rel (and those below it) over rel,
// with the attributes set and clr set and cleared. The copy is changed
// while it is still detached (open_tree, mount_setattr, move_mount), so it
// has them from the moment it appears at rel.
func (k *kernelFS) rebind(rel string, set, clr uint64) error {
	t, err := k.open(rel)
	if t == nil {
		return err
	}
	defer t.Close()
	tree, err := unix.OpenTree(int(t.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("remount /%s: %w", rel, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: set, Attr_clr: clr}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("remount /%s: %w", rel, err)
	}
	if err := unix.MoveMount(tree, "", int(t.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("remount /%s: %w", rel, err)
	}
	return nil
}

// mask hides rel as runc's maskPath does: /dev/null over a file (it reads
// empty), an empty read-only tmpfs over a directory. The host's /dev/null
// is the source, as for the container's own /dev/null (see mountDev); a
// user namespace may bind it too.
func (k *kernelFS) mask(rel string) error {
	t, err := k.open(rel)
	if t == nil {
		return err
	}
	defer t.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(t.Fd()), &st); err != nil {
		return fmt.Errorf("mask /%s: %w", rel, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = unix.Mount("tmpfs", fdPath(t), "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=555,size=4k,nr_inodes=1")
	} else {
		err = unix.Mount("/dev/null", fdPath(t), "", unix.MS_BIND, "")
	}
	if err != nil {
		return fmt.Errorf("mask /%s: %w", rel, err)
	}
	return nil
}

func (r *rootfs) mountTmp() error {
	if r.spec.KeepTmp {
		return nil
	}
	return r.mountAt("tmp", false, "tmpfs", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
}

func (r *rootfs) mountEtc() error {
	for _, f := range [][2]string{{r.spec.ResolvConf, "etc/resolv.conf"}, {r.spec.Hosts, "etc/hosts"}, {r.spec.HostnameFile, "etc/hostname"}} {
		if f[0] == "" {
			continue
		}
		if err := r.mountAt(f[1], true, f[0], "", unix.MS_BIND, ""); err != nil {
			return err
		}
	}
	return nil
}

func (r *rootfs) mountBinds() error {
	for _, b := range r.spec.Binds {
		if b.Beneath != "" {
			src, err := openBeneath(b.Beneath, b.Source)
			if err != nil {
				return err
			}
			defer src.Close()
			b.Source = fdPath(src)
		}
		st, err := os.Stat(b.Source)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Source, err)
		}
		if b.CopyUp && st.IsDir() {
			if err := r.copyUp(b); err != nil {
				return err
			}
		}
		if b.MapOwner {
			if err := r.mountIDMapped(b, st); err != nil {
				return err
			}
		} else if err := r.mountAt(b.Target, !st.IsDir(), b.Source, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if b.ReadOnly {
			if err := r.remountReadOnly(b.Target); err != nil {
				return err
			}
		}
	}
	for _, t := range r.spec.Tmpfs {
		if err := r.mountTmpfs(t); err != nil {
			return err
		}
	}
	return nil
}

// openBeneath opens rel inside dir as an O_PATH handle, following no
// symlink on the way (nor a magic link) and never leaving dir: a bind's
// source in a directory a workspace writes (see Bind.Beneath).
func openBeneath(dir, rel string) (*os.File, error) {
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bind %s: %w", dir, err)
	}
	defer d.Close()
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(int(d.Fd()), rel, how)
	if err != nil {
		return nil, fmt.Errorf("bind %s in %s (opened without following a symlink, inside it): %w", rel, dir, err)
	}
	return os.NewFile(uintptr(fd), path.Join(dir, rel)), nil
}

// pivot makes root the root directory and detaches the old one: runc's
// pivot_root(".", ".") needs no directory for the old root inside the new.
func pivot(root string) error {
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Mount("", ".", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("old root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	return unix.Chdir("/")
}

// mountIDMapped binds b with an ID-mapped mount: its owner on the host
// shows as root inside, and what root creates there belongs to that owner
// on the host. It needs a user namespace whose map is "OWNER 0 1" (the
// mount maps on-disk OWNER to 0 and back); a short-lived child holds it.
func (r *rootfs) mountIDMapped(b Bind, fi os.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	holder := exec.Command("/proc/self/exe", InitArg, "--hold-userns")
	holder.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(st.Uid), HostID: b.OwnerUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(st.Gid), HostID: b.OwnerGID, Size: 1}},
	}
	stdin, err := holder.StdinPipe()
	if err != nil {
		return err
	}
	if err := holder.Start(); err != nil {
		return fmt.Errorf("bind %s: user namespace for the id map: %w", b.Source, err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(userns)
	tree, err := unix.OpenTree(unix.AT_FDCWD, b.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("bind %s: %w", b.Source, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("bind %s: id-mapped mount (needs Linux 5.12 and a file system that supports it): %w", b.Source, err)
	}
	t, err := r.target(b.Target, !fi.IsDir())
	if err != nil {
		return fmt.Errorf("mount %s: %w", b.Target, err)
	}
	defer t.Close()
	if err := unix.MoveMount(tree, "", int(t.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s: %w", b.Target, err)
	}
	return nil
}

// mountCgroupView gives the container a cgroup namespace rooted at its own
// cgroup and shows that cgroup, read-only, at /sys/fs/cgroup, as podman
// and Docker do: the JVM, Node and the like read their memory and CPU
// limits there, and /proc/self/cgroup no longer names the host's paths.
// Init calls it once it is in its cgroups and has pivoted into the root;
// /sys there is the container's own sysfs (or the host's, read-only),
// never a path the image provides.
func mountCgroupView(hierarchies []string) error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("cgroup namespace: %w", err)
	}
	const dir = "/sys/fs/cgroup"
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_RDONLY
	if len(hierarchies) == 1 && hierarchies[0] == "cgroup2" {
		err := unix.Mount("cgroup2", dir, "cgroup2", flags, "")
		if errors.Is(err, unix.EBUSY) {
			// /sys is the host's, bound (a user's container on the host's
			// network): the cgroup2 mount there has the superblock the new
			// one would have, and the kernel refuses to stack a filesystem
			// on itself. A tmpfs between them lets it.
			if err = unix.Mount("tmpfs", dir, "tmpfs", flags&^unix.MS_RDONLY, "mode=755,size=4k"); err == nil {
				err = unix.Mount("cgroup2", dir, "cgroup2", flags, "")
			}
		}
		if err != nil {
			return fmt.Errorf("mount %s: %w", dir, err)
		}
		return nil
	}
	if len(hierarchies) == 0 {
		return nil
	}
	// v1: a tmpfs with one mount per hierarchy the container joined, and
	// a link for each controller of a shared one (cpu → cpu,cpuacct), as
	// on the host.
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	for _, h := range hierarchies {
		sub := path.Join(dir, h)
		if err := os.Mkdir(sub, 0o555); err != nil {
			return fmt.Errorf("cgroup view: %w", err)
		}
		if err := unix.Mount("cgroup", sub, "cgroup", flags, h); err != nil {
			return fmt.Errorf("mount %s: %w", sub, err)
		}
		if ctrls := strings.Split(h, ","); len(ctrls) > 1 {
			for _, c := range ctrls {
				os.Symlink(h, path.Join(dir, c))
			}
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dir, err)
	}
	return nil
}

// mountOverlay mounts the container's root, volatile if asked: a kernel
// before 5.10 does not know the option (EINVAL), and gets the mount
// without it.
func mountOverlay(target, opts string, volatile bool) error {
	if volatile {
		err := unix.Mount("overlay", target, "overlay", unix.MS_NODEV, opts+",volatile")
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	return unix.Mount("overlay", target, "overlay", unix.MS_NODEV, opts)
}
