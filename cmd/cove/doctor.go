package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cove-sh/cove/container"
	"github.com/cove-sh/cove/image"
	"github.com/cove-sh/cove/internal/apparmor"
	"github.com/cove-sh/cove/internal/dirs"
	"github.com/cove-sh/cove/internal/insideexe"
	"github.com/cove-sh/cove/internal/userns"
	"github.com/cove-sh/cove/internal/userscope"
	"github.com/cove-sh/cove/launcher"
	"github.com/cove-sh/cove/settings"
	"github.com/cove-sh/cove/workspace"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// check is one line of cove doctor.
type check struct {
	name   string
	status string // "ok", "missing" or "note"
	detail string // what was found, or how to fix it
}

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check what cove needs on this machine, and say how to fix what is missing",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "apparmor-profile", Usage: "print an AppArmor profile that lets this cove binary use user namespaces (for " + apparmor.ProfileFile + ")"},
		},
		Action: func(c *cli.Context) error {
			if c.Bool("apparmor-profile") {
				fmt.Fprint(c.App.Writer, apparmor.Profile(apparmor.Executable()))
				return nil
			}
			layout, err := dirs.Resolve(dirs.FromOS(c.String("root")))
			if err != nil {
				return err
			}
			missing := 0
			for _, ch := range doctorChecks(layout) {
				fmt.Fprintf(c.App.Writer, "%-8s %-22s %s\n", ch.status, ch.name, ch.detail)
				if ch.status == "missing" {
					missing++
				}
			}
			if missing > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d things are missing (see above)", missing)}
			}
			return nil
		},
	}
}

// minKernel is the oldest Linux cove supports (README: Requirements).
var minKernel = [2]int{5, 12}

// kernelAtLeast says whether a kernel release (6.1.0-57-cloud-amd64)
// is major.minor or later; a release it cannot read counts as new enough,
// the rest of doctor's checks then say what is missing.
func kernelAtLeast(release string, major, minor int) bool {
	var maj, min int
	if n, _ := fmt.Sscanf(release, "%d.%d", &maj, &min); n != 2 {
		return true
	}
	return maj > major || (maj == major && min >= minor)
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func doctorChecks(layout dirs.Layout) []check {
	var u unix.Utsname
	unix.Uname(&u)
	release := unix.ByteSliceToString(u.Release[:])
	root := os.Geteuid() == 0
	out := []check{kernelCheck(release), usernsCheck(root), cgroupCheck(root), cpusCheck(release)}
	add := func(name, status, detail string) { out = append(out, check{name, status, detail}) }

	// A kernel with seccomp shows a Seccomp line in every process's status.
	if strings.Contains(readTrim("/proc/self/status"), "\nSeccomp:") {
		add("seccomp", "ok", "containers run under cove's filter (--security-opt seccomp=unconfined lifts it)")
	} else {
		add("seccomp", "missing", "this kernel has no seccomp filters (CONFIG_SECCOMP_FILTER): containers cannot start with the filter; use --security-opt seccomp=unconfined")
	}
	if strings.Contains(readTrim("/proc/filesystems"), "overlay") || fileExists("/lib/modules/"+release+"/kernel/fs/overlayfs") {
		add("overlayfs", "ok", "containers share the cached image")
	} else {
		add("overlayfs", "note", "missing: each container gets a copy of its image (slower); load the overlay module")
	}
	out = append(out, idMapChecks(layout, root)...)

	if p, err := container.PastaPath(); err == nil {
		add("network", "ok", "pasta ("+p+"): containers get a network of their own; only -p ports come in")
	} else {
		add("network", "missing", "pasta is missing: apt install passt (or dnf install passt); until then only --net host (your network, loopback included) or --net none work")
	}

	if b := launcher.FindBrowser(); b != "" {
		add("browser", "ok", b+" (for the app window)")
	} else {
		add("browser", "note", "no Chromium, Chrome, Edge or Brave: cove opens the default browser or prints the URL")
	}

	home, _ := os.UserHomeDir()
	set, err := settings.Load(settings.Path(home))
	if err != nil {
		add("settings", "missing", err.Error())
	} else {
		add("settings", "ok", settingsLine(set))
	}
	return append(out, insideCheck(layout), stateCheck(layout))
}

// insideCheck says what a container runs as its init (cove-init) and a
// workspace its IDE server with (cove-inside), root's copies or the data
// directory's (programFile), or (a build without them, or a data
// directory they cannot be written to or run from) cove itself.
func insideCheck(layout dirs.Layout) check {
	var paths []string
	for _, name := range []string{insideexe.Init, insideexe.Inside} {
		path, err := programFile(layout, name)
		switch {
		case errors.Is(err, insideexe.ErrNone):
			return check{"init", "note", insideexe.ErrNone.Error() + ": containers run cove itself as their init, slower to start"}
		case err != nil:
			return check{"init", "note", fmt.Sprintf("%s: %v: containers run cove itself instead, slower to start", name, err)}
		}
		paths = append(paths, path)
	}
	line := "containers run cove-init (" + paths[0] + "), workspaces' servers cove-inside (" + paths[1] + ")"
	if dir, err := systemPrograms(); err == nil && os.Geteuid() != 0 && filepath.Dir(paths[0]) != dir {
		line += "; sudo cove system write-programs would give every user root's copies, which rootless containers run in one exec fewer"
	}
	return check{"init", "ok", line}
}

// kernelCheck says whether the kernel is recent enough.
func kernelCheck(release string) check {
	if kernelAtLeast(release, minKernel[0], minKernel[1]) {
		return check{"kernel", "ok", "Linux " + release}
	}
	return check{"kernel", "missing", fmt.Sprintf("Linux %s: cove needs %d.%d or later (overlayfs in user namespaces, clone3, pidfds); upgrade the kernel", release, minKernel[0], minKernel[1])}
}

// throttleKernel is the first Linux that throttles a task over its
// --cpus quota only on its way back to user space ("sched/fair: Switch to
// task based throttle model", 2025).
var throttleKernel = [2]int{6, 18}

// cpusCheck says what --cpus risks on this kernel. Before throttleKernel
// a container over its quota is stopped wherever it is, in the kernel
// too, holding what it holds (a percpu rwsem of a fork, the cgroups'
// lock): under load every fork of the machine can wait behind it. Seen
// here: a Debian 12 VM (Linux 6.1) silent for minutes at `cove run --cpus
// 0.5` under emulation.
func cpusCheck(release string) check {
	if kernelAtLeast(release, throttleKernel[0], throttleKernel[1]) {
		return check{"--cpus", "ok", "a container over its quota waits on its way back to user space, holding nothing"}
	}
	return check{"--cpus", "note", fmt.Sprintf("Linux %s stops a container over its quota even inside the kernel, holding its locks: on a busy machine a tight limit (--cpus 0.5) can stall other programs' starts for seconds; keep --cpus at 1 or more, or use Linux %d.%d or later", release, throttleKernel[0], throttleKernel[1])}
}

// usernsCheck says whether this user may make user namespaces.
func usernsCheck(root bool) check {
	switch {
	case readTrim("/proc/sys/user/max_user_namespaces") == "0" || readTrim("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		st := "missing"
		if root {
			st = "note"
		}
		return check{"user namespaces", st, "off: sudo sysctl -w user.max_user_namespaces=15000 kernel.unprivileged_userns_clone=1 (needed unless cove runs as root)"}
	case !root && apparmor.Restricted("/proc"):
		return check{"user namespaces", "missing", apparmor.Advice(apparmor.Executable())}
	default:
		return check{"user namespaces", "ok", "available"}
	}
}

// cgroupCheck says whether --memory, --pids and --cpus can work.
func cgroupCheck(root bool) check {
	var st unix.Statfs_t
	switch {
	case unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC:
		ctrls := readTrim("/sys/fs/cgroup/cgroup.controllers")
		own, _ := userscope.Own()
		switch {
		case root || userscope.Delegated(userscope.CgroupRoot, own):
			return check{"cgroup v2", "ok", "controllers: " + ctrls}
		case fileExists(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "systemd", "private")):
			return check{"cgroup v2", "ok", "controllers: " + ctrls + "; your cgroup (" + own + ") is root's: cove starts containers from a scope of your systemd"}
		default:
			return check{"cgroup v2", "missing", "your cgroup (" + own + ") is root's and no systemd user manager of yours runs to give cove one: --memory, --pids and --cpus are refused; log in through systemd (pam_systemd), or sudo loginctl enable-linger $USER"}
		}
	case root:
		return check{"cgroup v2", "note", "not here (cgroup v1 or hybrid): limits use the v1 memory, pids and cpu controllers"}
	default:
		return check{"cgroup v2", "note", "not here (cgroup v1 or hybrid): --memory, --pids and --cpus work only as root; boot with systemd.unified_cgroup_hierarchy=1 for them rootless"}
	}
}

// idMapChecks say how rootless containers' ids map, and which stored
// images lost their owners to an earlier mapping.
func idMapChecks(layout dirs.Layout, root bool) []check {
	var out []check
	m := userns.Current()
	switch {
	case root:
		out = append(out, check{"newuidmap", "ok", "as root, images keep their owners and containers every id"})
	case m.Ranged:
		out = append(out, check{"newuidmap", "ok", fmt.Sprintf("your subordinate ids (%d uids from %d, %d gids from %d) map rootless containers' other users, and images keep their owners through them", m.UIDSub.Count, m.UIDSub.Start, m.GIDSub.Count, m.GIDSub.Start)})
	default:
		name := ""
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		out = append(out, check{"newuidmap", "note", "rootless containers get one id only; " + userns.Advice(name)})
	}
	if !m.Helps() {
		return out
	}
	store, err := image.Open(layout.Images)
	if err != nil {
		return out
	}
	list, err := store.List()
	if err != nil {
		return out
	}
	var lost []string
	for _, e := range list {
		if e.Image.OwnersLost() && e.Ref != "" {
			lost = append(lost, e.Ref)
		}
	}
	if len(lost) > 0 {
		out = append(out, check{"image owners", "note", fmt.Sprintf("%d images were stored before cove kept their owners rootless (every file yours) or under other subordinate ids: %s; cove rmi and cove pull them again (or cove system reset)", len(lost), strings.Join(lost, ", "))})
	}
	return out
}

// stateCheck says whether cove's state directories are writable.
func stateCheck(layout dirs.Layout) check {
	for _, d := range []string{layout.Images, layout.Data, layout.Runtime} {
		if err := os.MkdirAll(d, 0o700); err != nil || unix.Access(d, unix.W_OK) != nil {
			return check{"state", "missing", d + " is not writable: fix its permissions or set COVE_ROOT"}
		}
	}
	return check{"state", "ok", "images in " + layout.Images + ", workspaces in " + layout.Data}
}

// settingsLine says what the user's settings are, and where they would
// go when there are none.
func settingsLine(set settings.Settings) string {
	img := "workspace image " + workspace.DefaultImage + " (cove's default)"
	if set.Image != "" {
		img = "workspace image " + set.Image
	}
	mirrors := "no registry mirrors"
	if len(set.RegistryMirrors) > 0 {
		var regs []string
		for _, reg := range slices.Sorted(maps.Keys(set.RegistryMirrors)) {
			regs = append(regs, reg+" → "+strings.Join(set.RegistryMirrors[reg], ", "))
		}
		mirrors = "registry mirrors " + strings.Join(regs, "; ")
	}
	where := set.Path
	if !fileExists(set.Path) {
		where = "none in " + set.Path
	}
	return where + ": " + img + ", " + mirrors
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
