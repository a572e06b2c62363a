package container

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// cove exec asks the container's init to start the process, rather than
// joining the namespaces with setns from a multi-threaded Go program: init
// already sits in every namespace and the cgroup, and its children inherit
// them. The launcher listens on a Unix socket in the container's state
// directory (0700, so only its owner reaches it) and hands the listener to
// init as fd 5. One connection is one exec:
//
//	client → init  an ExecRequest as one JSON line, with the process's
//	               stdin, stdout and stderr attached (SCM_RIGHTS) unless
//	               it asks for a terminal
//	init → client  {"pid": N} (with the terminal's master attached) or
//	               {"error": "…"}, then {"exit": status} when it ends

// ExecRequest is what cove exec asks for. Empty fields take the
// container's: its environment (Env adds to it), working dir and user.
type ExecRequest struct {
	Args     []string `json:"args"`
	Env      []string `json:"env,omitempty"`
	Cwd      string   `json:"cwd,omitempty"`
	User     string   `json:"user,omitempty"`
	Terminal bool     `json:"terminal,omitempty"`
	// Block, if set, is not a process: the network helper asks init to
	// add prohibit routes for these host addresses (prefixes), which the
	// host gained after the start (see watchHostAddresses).
	Block []string `json:"block,omitempty"`
}

type execReply struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"` // with Error: see ExecError
	Exit  *int   `json:"exit,omitempty"`
}

// ExecError is a command Exec could not start in the container. Code is
// the exit status shells (and podman exec) give for it: 127 when the
// command is not found, 126 when it cannot be run; 0 otherwise.
type ExecError struct {
	Code int
	Err  error
}

func (e *ExecError) Error() string { return e.Err.Error() }
func (e *ExecError) Unwrap() error { return e.Err }

// startCode is the shell's exit status for a command that failed to start.
func startCode(err error) int {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127
	case errors.Is(err, fs.ErrPermission):
		return 126
	}
	return 0
}

func (in *initProc) serveExec(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go in.exec(conn.(*net.UnixConn))
	}
}

func (in *initProc) exec(conn *net.UnixConn) {
	defer conn.Close()
	// The connection stays in Go's poller (no File(), which would make the
	// socket blocking under the poller's feet): messages and descriptors
	// go through ReadMsgUnix and WriteMsgUnix.
	reply := func(r execReply, rights []byte) {
		b, _ := json.Marshal(r)
		conn.WriteMsgUnix(append(b, '\n'), rights, nil)
	}
	line, fds, err := recvLine(conn.ReadMsgUnix)
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var req ExecRequest
	if err == nil {
		err = json.Unmarshal(line, &req)
	}
	if err == nil && len(req.Block) > 0 {
		code := 0
		if in.routes == nil {
			err = errors.New("the container has no network of its own")
		} else {
			err = blockAddresses(in.routes.RouteAdd, req.Block)
		}
		if err != nil {
			reply(execReply{Error: err.Error()}, nil)
		} else {
			reply(execReply{Exit: &code}, nil)
		}
		return
	}
	if err == nil && len(req.Args) == 0 {
		err = errors.New("no command")
	}
	if err == nil && !req.Terminal && len(fds) != 3 {
		err = errors.New("want stdin, stdout and stderr")
	}
	if err != nil {
		reply(execReply{Error: "exec: " + err.Error()}, nil)
		return
	}
	p := in.spec.Process
	p.Args, p.Env, p.Terminal = req.Args, mergeEnv(p.Env, req.Env), req.Terminal
	if req.Cwd != "" {
		p.Cwd = req.Cwd
	}
	if req.User != "" {
		p.User = req.User
	}
	var stdio []*os.File
	for _, fd := range fds {
		stdio = append(stdio, os.NewFile(uintptr(fd), "exec-stdio"))
	}
	fds = nil // the files own them now
	done := make(chan int, 1)
	in.mu.Lock()
	proc, master, err := spawn(in.spec, p, stdio)
	if err == nil {
		in.waiters[proc.Pid] = done
	}
	in.mu.Unlock()
	for _, s := range stdio {
		s.Close()
	}
	if err != nil {
		reply(execReply{Error: err.Error(), Code: startCode(err)}, nil)
		return
	}
	var rights []byte
	if master != nil {
		rights = unix.UnixRights(int(master.Fd()))
	}
	reply(execReply{PID: proc.Pid}, rights)
	if master != nil {
		master.Close()
	}
	// A client that goes away (killed, or a tool's timeout) takes its
	// process group with it: nothing it started lingers in the container.
	gone := make(chan struct{})
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := conn.Read(buf); err != nil {
				close(gone)
				return
			}
		}
	}()
	select {
	case code := <-done:
		reply(execReply{Exit: &code}, nil)
	case <-gone:
		unix.Kill(-proc.Pid, unix.SIGKILL)
		<-done
	}
}

// recvmsg reads one message and its control data.
type recvmsg func(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)

// fileRecvmsg reads from a socket held as a plain file (the sync pair).
func fileRecvmsg(f *os.File) recvmsg {
	return func(b, oob []byte) (int, int, int, *net.UnixAddr, error) {
		n, oobn, flags, _, err := unix.Recvmsg(int(f.Fd()), b, oob, unix.MSG_CMSG_CLOEXEC)
		return n, oobn, flags, nil, err
	}
}

// lineReader reads JSON lines and the descriptors sent with them from a
// stream socket. A stream keeps no message boundaries: one read may bring
// two lines (the PID reply and, for a quick process, its exit), so what
// follows the first newline is kept for the next call, not dropped —
// dropping it lost exits, so that an exec hung or failed at random.
type lineReader struct {
	recv    recvmsg
	pending []byte
	// fds came with the line that ends at fdsEnd in pending (-1: the one
	// not yet whole). A read that brings descriptors ends with the
	// message that carried them, but may begin with lines before it (the
	// keep-id keeper's, then init's with its interface): they are not
	// that line's.
	fds    []int
	fdsEnd int
}

// recvLine reads one line from a socket that carries a single one.
func recvLine(recv recvmsg) ([]byte, []int, error) {
	return (&lineReader{recv: recv}).next()
}

// next returns the next line and the descriptors that came with it.
func (r *lineReader) next() ([]byte, []int, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for bytes.IndexByte(r.pending, '\n') < 0 {
		n, oobn, _, _, err := r.recv(buf, oob)
		if err != nil {
			return nil, r.takeFds(), err
		}
		var got []int
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, cm := range cmsgs {
				if rights, err := unix.ParseUnixRights(&cm); err == nil {
					got = append(got, rights...)
				}
			}
		}
		r.pending = append(r.pending, buf[:n]...)
		if len(got) > 0 {
			r.fds = append(r.fds, got...)
			r.fdsEnd = bytes.LastIndexByte(r.pending, '\n')
		}
		if n == 0 {
			return nil, r.takeFds(), io.ErrUnexpectedEOF
		}
		if len(r.pending) > 1<<20 {
			return nil, r.takeFds(), errors.New("message too long")
		}
	}
	i := bytes.IndexByte(r.pending, '\n')
	line := r.pending[:i:i]
	r.pending = r.pending[i+1:]
	var fds []int
	if len(r.fds) > 0 {
		if r.fdsEnd <= i {
			fds = r.takeFds()
		} else {
			r.fdsEnd -= i + 1
		}
	}
	return line, fds, nil
}

// takeFds hands over the descriptors held.
func (r *lineReader) takeFds() []int {
	fds := r.fds
	r.fds = nil
	return fds
}

// Exec runs a process in the running container whose control socket is
// ctl. stdio are its standard streams (ignored with a terminal); started,
// if set, gets the terminal's master once the process runs. It returns the
// process's exit status.
func Exec(ctl string, req ExecRequest, stdio [3]*os.File, started func(console *os.File)) (int, error) {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: ctl, Net: "unix"})
	if err != nil {
		return 0, fmt.Errorf("reach the container's init: %w", err)
	}
	defer conn.Close()
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	var rights []byte
	if !req.Terminal {
		rights = unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()))
	}
	if _, _, err := conn.WriteMsgUnix(append(b, '\n'), rights, nil); err != nil {
		return 0, err
	}
	var console *os.File
	replies := &lineReader{recv: conn.ReadMsgUnix}
	for {
		line, fds, err := replies.next()
		if err != nil {
			return 0, fmt.Errorf("the container's init went away: %w", err)
		}
		var r execReply
		if err := json.Unmarshal(line, &r); err != nil {
			return 0, err
		}
		switch {
		case r.Error != "":
			return 0, &ExecError{Code: r.Code, Err: errors.New(r.Error)}
		case r.Exit != nil:
			return *r.Exit, nil
		case r.PID != 0:
			if len(fds) == 1 {
				// Non-blocking, so that the runtime polls it and a Close
				// (a hangup) ends a Read blocked on it instead of waiting
				// for the program's next output.
				unix.SetNonblock(fds[0], true)
				console = os.NewFile(uintptr(fds[0]), "console")
			}
			if started != nil {
				started(console)
			}
		}
	}
}
