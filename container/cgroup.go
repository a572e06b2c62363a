package container

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are the resource limits of a container; zero means none.
type Limits struct {
	Memory int64   // bytes; swap is off
	PIDs   int64   // processes and threads
	CPUs   float64 // CPU time, in CPUs
}

func (l Limits) any() bool { return l.Memory > 0 || l.PIDs > 0 || l.CPUs > 0 }

// cgroup is a container's cgroup: one directory on a cgroup v2 host, one
// per controller on a v1 (or hybrid) host.
type cgroup struct {
	v2    bool
	paths map[string]string // controller ("" for v2) → directory
	limit Limits
	// hierarchies are the v1 hierarchies the container joined, each named
	// by its controllers as mount(2) takes them ("cpu,cpuacct").
	hierarchies []string
}

const (
	cgroupRoot   = "/sys/fs/cgroup"
	cgroupParent = "cove"
)

// newCgroup creates the container's cgroup with limits applied. It returns
// nil and no error where there is no cgroup to be had and no limit was
// asked for; warn says why, once.
func newCgroup(id string, l Limits, warn func(string)) (*cgroup, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		cg, err := newCgroupV2(id, l)
		if err == nil || !l.any() {
			if err != nil {
				warn(fmt.Sprintf("no cgroup: %v; running without limits", err))
			}
			return cg, nil
		}
		return nil, fmt.Errorf("cannot enforce limits: %w", err)
	}
	cg, err := newCgroupV1(id, l)
	if err == nil {
		return cg, nil
	}
	if l.any() {
		return nil, fmt.Errorf("cannot enforce limits on this host (no writable cgroup v2, and cgroup v1: %v); run as root or on a cgroup v2 host with delegation", err)
	}
	// One sentence that says what the host lacks and what it means, the
	// same each time (the error names whichever controller failed first).
	if os.Geteuid() != 0 {
		warn("this host's cgroups are v1 (or hybrid) and root's: the container runs without limits or accounting (cove doctor explains; a cgroup v2 host with delegation gives them to you)")
	} else {
		warn(fmt.Sprintf("no cgroup (%v): the container runs without limits or accounting (cove doctor explains)", err))
	}
	return nil, nil
}

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup %s: %w", name, err)
	}
	return nil
}

func newCgroupV2(id string, l Limits) (*cgroup, error) {
	parent, err := v2Parent()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	cg := &cgroup{v2: true, paths: map[string]string{"": dir}, limit: l}
	set := func() error {
		if l.Memory > 0 {
			if err := writeFile(dir, "memory.max", strconv.FormatInt(l.Memory, 10)); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(dir, "memory.swap.max")); err == nil {
				if err := writeFile(dir, "memory.swap.max", "0"); err != nil {
					return err
				}
			}
		}
		if l.PIDs > 0 {
			if err := writeFile(dir, "pids.max", strconv.FormatInt(l.PIDs, 10)); err != nil {
				return err
			}
		}
		if l.CPUs > 0 {
			if err := writeFile(dir, "cpu.max", fmt.Sprintf("%d 100000", int64(l.CPUs*100000))); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// v2Parent returns the directory under which containers' cgroups go, with
// the memory, pids and cpu controllers enabled for its children: cove/ at
// the root for root, or beside our own cgroup in a delegated subtree.
func v2Parent() (string, error) {
	base := cgroupRoot
	if os.Geteuid() != 0 {
		own, err := ownCgroupV2()
		if err != nil {
			return "", err
		}
		base = filepath.Dir(filepath.Join(cgroupRoot, own))
		if unix.Access(base, unix.W_OK) != nil {
			return "", fmt.Errorf("cgroup %s is not delegated to us", base)
		}
	}
	parent := filepath.Join(base, cgroupParent)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cgroup: %w", err)
	}
	for _, dir := range []string{base, parent} {
		avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
		if err != nil {
			return "", fmt.Errorf("cgroup: %w", err)
		}
		have := map[string]bool{}
		for _, c := range strings.Fields(string(avail)) {
			have[c] = true
		}
		var enable []string
		for _, c := range []string{"memory", "pids", "cpu"} {
			if have[c] {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			// Errors are left to the limit writes, which name the file.
			os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
		}
	}
	return parent, nil
}

func ownCgroupV2() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("not in a cgroup v2 hierarchy")
}

// v1Mount is where a v1 hierarchy is mounted, and its controllers.
type v1Mount struct {
	dir         string
	controllers string // as mount(2) takes them: "cpu,cpuacct"
}

// v1Mounts finds where the v1 controllers cove uses are mounted.
func v1Mounts() (map[string]v1Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]v1Mount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 || fields[sep+1] != "cgroup" {
			continue
		}
		opts := strings.Split(fields[sep+3], ",")
		var ctrls []string
		for _, opt := range opts {
			if !strings.Contains(opt, "=") && !v1NotController[opt] {
				ctrls = append(ctrls, opt)
			}
		}
		for _, opt := range opts {
			switch opt {
			case "memory", "pids", "cpu":
				out[opt] = v1Mount{dir: fields[4], controllers: strings.Join(ctrls, ",")}
			}
		}
	}
	return out, sc.Err()
}

// v1NotController are the v1 super options that name no controller.
var v1NotController = map[string]bool{"rw": true, "ro": true, "xattr": true, "noprefix": true, "clone_children": true, "cpuset_v2_mode": true, "favordynmods": true, "none": true}

func newCgroupV1(id string, l Limits) (*cgroup, error) {
	mounts, err := v1Mounts()
	if err != nil {
		return nil, err
	}
	need := map[string]bool{"memory": l.Memory > 0, "pids": l.PIDs > 0, "cpu": l.CPUs > 0}
	cg := &cgroup{paths: map[string]string{}, limit: l}
	for _, ctrl := range slices.Sorted(maps.Keys(mounts)) {
		mnt := mounts[ctrl]
		parent := filepath.Join(mnt.dir, cgroupParent)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			if need[ctrl] {
				cg.remove()
				return nil, fmt.Errorf("cgroup v1 %s: %w", ctrl, err)
			}
			continue
		}
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup v1 %s: %w", ctrl, err)
		}
		cg.paths[ctrl] = dir
		if !slices.Contains(cg.hierarchies, mnt.controllers) {
			cg.hierarchies = append(cg.hierarchies, mnt.controllers)
		}
	}
	for ctrl, needed := range need {
		if needed && cg.paths[ctrl] == "" {
			cg.remove()
			return nil, fmt.Errorf("the %s controller is not mounted", ctrl)
		}
	}
	if len(cg.paths) == 0 {
		return nil, errors.New("no cgroup v1 controllers")
	}
	set := func() error {
		if l.Memory > 0 {
			dir := cg.paths["memory"]
			if err := writeFile(dir, "memory.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
				if err := writeFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(l.Memory, 10)); err != nil {
					return err
				}
			}
			writeFile(dir, "memory.swappiness", "0")
		}
		if l.PIDs > 0 {
			if err := writeFile(cg.paths["pids"], "pids.max", strconv.FormatInt(l.PIDs, 10)); err != nil {
				return err
			}
		}
		if l.CPUs > 0 {
			dir := cg.paths["cpu"]
			if err := writeFile(dir, "cpu.cfs_period_us", "100000"); err != nil {
				return err
			}
			if err := writeFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(int64(l.CPUs*100000), 10)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := set(); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// views are the hierarchies init mounts at /sys/fs/cgroup (Spec.Cgroups).
func (cg *cgroup) views() []string {
	switch {
	case cg == nil:
		return nil
	case cg.v2:
		return []string{"cgroup2"}
	}
	return cg.hierarchies
}

// dirFd opens the v2 cgroup for clone3(CLONE_INTO_CGROUP), so the workload
// is in it from its first instruction. v1 returns -1: join moves it.
func (cg *cgroup) dirFd() (int, error) {
	if cg == nil || !cg.v2 {
		return -1, nil
	}
	return unix.Open(cg.paths[""], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// join puts pid in the v1 cgroups.
func (cg *cgroup) join(pid int) error {
	if cg == nil || cg.v2 {
		return nil
	}
	for ctrl, dir := range cg.paths {
		if err := writeFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("join the %s cgroup: %w", ctrl, err)
		}
	}
	return nil
}

// oomKilled says whether the kernel killed a process for the memory limit.
func (cg *cgroup) oomKilled() bool {
	if cg == nil || cg.limit.Memory == 0 {
		return false
	}
	file := filepath.Join(cg.paths[""], "memory.events")
	if !cg.v2 {
		file = filepath.Join(cg.paths["memory"], "memory.oom_control")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok && strings.TrimSpace(n) != "0" {
			return true
		}
	}
	return false
}

// kill kills every process in the cgroup.
func (cg *cgroup) kill() {
	if cg == nil {
		return
	}
	if cg.v2 && writeFile(cg.paths[""], "cgroup.kill", "1") == nil {
		return
	}
	for _, dir := range cg.paths {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
}

// remove deletes the cgroup once its processes are gone, waiting a little
// for the kernel to finish tearing them down.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	for _, dir := range cg.paths {
		for i := 0; i < 50; i++ {
			err := unix.Rmdir(dir)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
