// Package userscope gets a rootless cove a cgroup it may manage on a
// systemd host. systemd delegates cgroups to a user only below the user's
// service manager (user@UID.service): programs it starts (a desktop's
// terminals, systemd-run --user) can make cgroups beside their own, but a
// login session's shell (ssh, the console, su -l) sits in session-N.scope,
// which is root's. There cove asks the user's systemd for a scope of its
// own, as podman does, and moves into it: its containers' cgroups then go
// beside that scope, in the user's delegated tree.
package userscope

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

// CgroupRoot is where the cgroup v2 hierarchy is mounted.
const CgroupRoot = "/sys/fs/cgroup"

// Own returns this process's cgroup v2 path (as in /proc/self/cgroup).
func Own() (string, error) {
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

// Delegated reports whether a process in cgroup own (a path as
// /proc/self/cgroup gives it) may make cgroups beside its own, under root
// (the hierarchy's mount point): the directory above own is writable to
// it. That is the directory container cgroups go in when cove is not root.
func Delegated(root, own string) bool {
	return unix.Access(filepath.Dir(filepath.Join(root, own)), unix.W_OK) == nil
}

// Enter moves this process into a new scope of the user's systemd (found
// through its private socket in runtimeDir, $XDG_RUNTIME_DIR) when it is
// rootless on a cgroup v2 host and its own cgroup is not delegated. It
// returns the scope's cgroup when it moved, "" when there was no need; an
// error says why it could not (cove then runs as before: limits refused,
// or no cgroup, with a warning).
func Enter(ctx context.Context, runtimeDir string) (string, error) {
	var st unix.Statfs_t
	if os.Geteuid() == 0 || unix.Statfs(CgroupRoot, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", nil
	}
	own, err := Own()
	if err != nil || Delegated(CgroupRoot, own) {
		return "", nil
	}
	if runtimeDir == "" {
		return "", fmt.Errorf("cgroup %s is not delegated to you, and XDG_RUNTIME_DIR is not set to find your systemd", own)
	}
	sock := filepath.Join(runtimeDir, "systemd", "private")
	if _, err := os.Stat(sock); err != nil {
		return "", fmt.Errorf("cgroup %s is not delegated to you, and your systemd user manager is not running (no %s)", own, sock)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	scope, err := startScope(ctx, sock)
	if err != nil {
		return "", fmt.Errorf("cgroup %s is not delegated to you, and your systemd did not give cove a scope: %w", own, err)
	}
	// The unit starts asynchronously: wait until we are in it.
	for {
		if now, err := Own(); err == nil && strings.HasSuffix(now, "/"+scope) {
			if !Delegated(CgroupRoot, now) {
				return "", fmt.Errorf("cove's scope %s is not delegated to you either", now)
			}
			return now, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("systemd did not move cove into %s: %w", scope, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// property is a D-Bus (sv): a unit property's name and value.
type property struct {
	Name  string
	Value dbus.Variant
}

// startScope asks the user's systemd, over its private socket (no bus
// daemon needed), for a transient scope holding this process; it returns
// the scope's name.
func startScope(ctx context.Context, sock string) (string, error) {
	conn, err := dbus.Dial("unix:path="+sock, dbus.WithContext(ctx))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		return "", err
	}
	pid := os.Getpid()
	name := fmt.Sprintf("cove-%d.scope", pid)
	props := []property{
		{"Description", dbus.MakeVariant("cove (its containers' cgroups are beside it)")},
		{"PIDs", dbus.MakeVariant([]uint32{uint32(pid)})},
		{"Delegate", dbus.MakeVariant(true)},
		{"CollectMode", dbus.MakeVariant("inactive-or-failed")},
	}
	aux := []struct {
		Name  string
		Props []property
	}{}
	obj := conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	call := obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager.StartTransientUnit", 0, name, "fail", props, aux)
	if call.Err != nil {
		return "", call.Err
	}
	return name, nil
}
