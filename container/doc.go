// Package container runs a process isolated from the host, without a
// daemon: the caller is the parent and state lives in files.
//
// [Start] takes a [Spec] (the image's root filesystem as an overlay's
// lower layer, the kept upper layer, the process, mounts, network, user
// mapping) and [Limits], and starts cove's own binary as the container's
// init in new PID, mount, UTS, IPC, cgroup and network namespaces (and a
// user namespace when not root: the user is root inside, and where
// newuidmap and /etc/subuid ranges exist ids 1…N are the user's range).
// Init mounts what Docker mounts (proc, sys, dev, with /proc's and /sys's
// dangerous files masked), pivots into the root, drops capabilities to
// Docker's default set less CAP_MKNOD, installs the seccomp filter
// (Docker's default profile, see seccomp.go), reaps and forwards signals.
// The private network is pasta's; limits are cgroup v2 or v1 controllers,
// or a systemd user scope for a user.
//
// Every later process of a container (cove exec) is started by its init
// over a control socket, never with setns from the host. A container's
// record holds its init's PID with the process start time, the boot id and
// the expected /proc/PID/exe, so a reused PID is never taken for it.
package container
