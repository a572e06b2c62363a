package container

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// The log helper writes a detached container's output to its log file.
// The container gets the write end of a pipe as its stdout and stderr,
// never the file: a descriptor of a host file in the workload's hands can
// be reopened through /proc/PID/fd (for writing, whatever the open flags
// were) and fchmod'ed, so that root in the container could make the log
// a setuid file of its choosing on the host. The helper, `cove init
// --log-helper` in a session of its own (it outlives a launcher that
// returns, as -d does), copies from the pipe into the file until every
// writer is gone, and keeps the file bounded.
//
// The launcher hands it, inherited:
//
//	fd 3  the pipe's read end
//	fd 4  the log file, open for appending
const logHelperArg = "--log-helper"

// maxLog is how large the log grows before it is moved to log.1 (the one
// before that goes) and started again: a workload that writes without end
// must not fill the disk.
const maxLog = 16 << 20

// StartLogHelper starts the helper for the log file at path (made 0600
// if missing) and returns the pipe's write end, for the container's
// stdout and stderr: close it once the container has it.
func StartLogHelper(binary, path string) (*os.File, error) {
	log, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	defer log.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("log: %w", err)
	}
	defer r.Close()
	cmd := &exec.Cmd{
		Path:        binary,
		Args:        []string{"cove", InitArg, logHelperArg},
		Env:         []string{},
		ExtraFiles:  []*os.File{r, log},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start the log helper: %w", err)
	}
	go cmd.Wait() // reaped if it ends while we are here; else init's
	return w, nil
}

// runLogHelper is the helper's body; it never returns.
func runLogHelper() {
	in := os.NewFile(3, "pipe")
	log := os.NewFile(4, "log")
	path, err := os.Readlink("/proc/self/fd/4")
	if err != nil {
		path = ""
	}
	buf := make([]byte, 64<<10)
	var size int64
	if fi, err := log.Stat(); err == nil {
		size = fi.Size()
	}
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if size+int64(n) > maxLog && path != "" {
				// Rotate by the name the launcher gave: the directory is
				// the container's own, out of the workload's reach.
				if os.Rename(path, path+".1") == nil {
					if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_CLOEXEC, 0o600); err == nil {
						log.Close()
						log, size = f, 0
					}
				}
			}
			if _, err := log.Write(buf[:n]); err == nil {
				size += int64(n)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				os.Exit(0)
			}
			os.Exit(1)
		}
	}
}
