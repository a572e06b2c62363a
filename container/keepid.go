package container

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A rootless container with Spec.KeepID has its user namespace nested in
// one mapped as every rootless container's is (0 the user, 1…N the
// subordinate ids, written by newuidmap). The kernel gives a process its
// capabilities in a user namespace only when it execs as root there; a
// process the launcher starts execs before newuidmap can write its maps,
// and with keep-id the user's own id is not root, so init could never
// become root by its own exec. Hence a small parent, the keeper: the
// launcher starts it with only a new user namespace (the usual maps); it
// execs again, as root there; then it starts init in a namespace nested
// in its own, with init's other namespaces, mapped so that the user is
// KeepID and root is the first subordinate id (the keeper, root in the
// parent namespace, may write any map of that namespace's ids, and init
// becomes root before its exec). Seen from the host, the nested maps are
// the flat keep-id map: U is the user, 0…U-1 and U+1… the subordinate ids.
//
// The keeper then tells the launcher init's pid, as the first line on the
// sync socket ({"pid": N}, or {"error": "…"}), hands the spec to init,
// passes signals on to it, and exits with init's status. Init gets SIGKILL
// should the keeper die.
const (
	keeperArg       = "--keep-id"
	keeperMappedArg = "--keep-id-mapped"
)

// keepIDMaps returns the maps of a namespace nested in one whose ids are
// 0…n-1, where id (the user, the parent's 0) is id: 0…id-1 are the
// parent's 1…id, and those above id are themselves. The nested namespace
// covers every id of its parent, so what it leaves on disk is owned by ids
// the usual rootless maps cover.
func keepIDMaps(id, n int) []syscall.SysProcIDMap {
	low := min(id, n-1)
	var m []syscall.SysProcIDMap
	if low > 0 {
		m = append(m, syscall.SysProcIDMap{ContainerID: 0, HostID: 1, Size: low})
	}
	m = append(m, syscall.SysProcIDMap{ContainerID: id, HostID: 0, Size: 1})
	if n-1 > id {
		m = append(m, syscall.SysProcIDMap{ContainerID: id + 1, HostID: id + 1, Size: n - 1 - id})
	}
	return m
}

// mapSize returns how many ids a map file of this process's namespace
// covers from 0 on (/proc/self/uid_map: the usual rootless maps are one
// contiguous run).
func mapSize(file string) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		first, err1 := strconv.Atoi(fields[0])
		size, err2 := strconv.Atoi(fields[2])
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("%s: bad line %q", file, sc.Text())
		}
		n = max(n, first+size)
	}
	return n, sc.Err()
}

// runKeeper is the keeper (see above); mapped says it runs again, as
// root of its namespace. It never returns.
func runKeeper(mapped bool) {
	sync := os.NewFile(syncFd, "sync")
	fail := func(err error) {
		json.NewEncoder(sync).Encode(syncMsg{Error: err.Error()})
		os.Exit(125)
	}
	unix.CloseRange(ctlFd+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	spec, err := readSpec()
	if err != nil {
		fail(err)
	}
	if !mapped {
		// The launcher wrote the maps before it sent the spec: an exec now
		// is as root of the namespace.
		if err := passSpec(spec); err != nil {
			fail(err)
		}
		err := unix.Exec("/proc/self/exe", []string{"cove", InitArg, keeperMappedArg}, []string{})
		fail(fmt.Errorf("re-exec in the user namespace: %w", err))
	}
	if spec.KeepID == nil {
		fail(fmt.Errorf("keep-id: no ids in the spec"))
	}
	code, err := keep(spec, sync, false)
	if err != nil {
		fail(err)
	}
	os.Exit(code)
}

// joinerArg runs the joiner: a keeper for a container that joins another's
// namespaces (NetJoin). nsenter(1) puts it there, as root of the user
// namespace it joins (a Go program cannot setns into a user namespace:
// it has threads); it starts init in namespaces of its own for the rest.
const joinerArg = "--join"

// runJoiner is the joiner. It never returns.
func runJoiner() {
	sync := os.NewFile(syncFd, "sync")
	fail := func(err error) {
		json.NewEncoder(sync).Encode(syncMsg{Error: err.Error()})
		os.Exit(125)
	}
	// nsenter's namespace files, and whatever else came along, stay out.
	unix.CloseRange(ctlFd+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	spec, err := readSpec()
	if err != nil {
		fail(err)
	}
	code, err := keep(spec, sync, true)
	if err != nil {
		fail(err)
	}
	os.Exit(code)
}

// keep starts init nested in the keeper's namespace and waits for it;
// joined (the joiner), init stays in the keeper's user and network
// namespaces.
func keep(spec *Spec, sync *os.File, joined bool) (int, error) {
	attr, err := keptInitAttr(spec, joined)
	if err != nil {
		return 0, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	specR, specW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer specW.Close()
	ctl := os.NewFile(ctlFd, "control")
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"cove", InitArg},
		Env:         []string{},
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  []*os.File{specR, sync, ctl},
		SysProcAttr: attr,
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	if err := cmd.Start(); err != nil {
		specR.Close()
		if joined {
			return 0, fmt.Errorf("start init in the joined namespaces: %w", err)
		}
		return 0, fmt.Errorf("keep-id: start init in a nested user namespace: %w", err)
	}
	specR.Close()
	ctl.Close()
	// The pid first, then the spec: init says nothing on the socket
	// before it has read the spec, so the launcher reads this line first.
	msg, _ := json.Marshal(syncMsg{PID: cmd.Process.Pid})
	_, werr := sync.Write(append(msg, '\n'))
	sync.Close()
	if werr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return 125, nil
	}
	specW.Write(b) // init reads it at once: a pipe's buffer is not needed to hold it all
	specW.Close()
	os.Stdin.Close()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	cmd.Wait()
	close(done)
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return exitCode(unix.WaitStatus(ws)), nil
}

// keptInitAttr is how the keeper starts init: in a user namespace nested
// in its own, mapped for keep-id, with namespaces of its own for the
// rest; joined, in the keeper's user and network namespaces.
func keptInitAttr(spec *Spec, joined bool) (*syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
		// Root before the exec: init then has its capabilities.
		Credential: &syscall.Credential{Uid: 0, Gid: 0},
		Setsid:     true,
		// The keeper runs on one locked thread (Init locks it).
		Pdeathsig: unix.SIGKILL,
	}
	if joined {
		return attr, nil
	}
	uids, err := mapSize("/proc/self/uid_map")
	if err != nil {
		return nil, fmt.Errorf("keep-id: %w", err)
	}
	gids, err := mapSize("/proc/self/gid_map")
	if err != nil {
		return nil, fmt.Errorf("keep-id: %w", err)
	}
	attr.Cloneflags |= unix.CLONE_NEWUSER
	if spec.Net == NetNone || spec.Net == NetPrivate {
		attr.Cloneflags |= unix.CLONE_NEWNET
	}
	attr.UidMappings = keepIDMaps(spec.KeepID.UID, uids)
	attr.GidMappings = keepIDMaps(spec.KeepID.GID, gids)
	// The workload's supplementary groups need setgroups(2).
	attr.GidMappingsEnableSetgroups = true
	return attr, nil
}
