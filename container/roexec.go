package container

import (
	"errors"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startInit starts init (cmd) so that, where the launcher may mount (as
// root), init runs from a read-only mount from its first instruction: the
// fork is made from a thread with a mount namespace of its own in which
// cmd.Path is bound read-only over itself, and init's new mount namespace
// is a copy of that one. The container then cannot write the host's
// binary through /proc/1/exe (runc's CVE-2019-5736) without init's second
// exec from /.cove/init, which init skips when it finds its own binary
// protected (see exeProtected). This is runc's "clone the binary before
// the container sees it", with a bind instead of a copy, and one exec.
//
// A user without the privilege to mount starts init as before; so does a
// root whose mount fails (init then re-executes from the bind).
func startInit(cmd *exec.Cmd) error {
	if os.Geteuid() != 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread's mount namespace is not the
		// process's, so the runtime ends the thread with this goroutine
		// instead of giving it to other goroutines.
		runtime.LockOSThread()
		bindReadOnlySelf(cmd.Path)
		errc <- cmd.Start()
	}()
	return <-errc
}

// bindReadOnlySelf moves the calling thread into a mount namespace of its
// own, private (nothing propagates to the host's), and binds bin read-only
// over itself there. A failure leaves bin as it was: init then finds it
// writable and re-executes from its own read-only bind.
func bindReadOnlySelf(bin string) {
	if unix.Unshare(unix.CLONE_NEWNS) != nil {
		return
	}
	if unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") != nil {
		return
	}
	if unix.Mount(bin, bin, "", unix.MS_BIND, "") != nil {
		return
	}
	unix.Mount("", bin, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// exeProtected says whether no process of the container can write the
// binary this process runs (through /proc/1/exe): init, which still has
// every capability the container's processes could ever get, is refused
// write access to it by the kernel. That is so when the file is on a
// read-only mount (startInit's bind), or when the container maps neither
// its owner (no capability applies to a file whose owner a user namespace
// does not map) nor an id that its mode or ACL lets write (a root-owned
// install seen from a rootless container). access(2) asks exactly this,
// with init's real ids and capabilities.
func exeProtected() bool {
	err := unix.Access("/proc/self/exe", unix.W_OK)
	return errors.Is(err, unix.EROFS) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)
}
