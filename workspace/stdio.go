package workspace

import (
	"io"
	"io/fs"
	"os"
)

// handOver says whether f, one of our standard streams, may be given to
// a container as it is: only a pipe or a socket may. Anything else goes
// through a pipe of ours, copied: a terminal could be pushed keystrokes
// (TIOCSTI), and a file, directory or device handed over can be opened
// again inside, through /proc/self/fd/N, as the host's file itself and
// for whatever its permissions allow, not only as it was opened (a
// read-only `< dump.sql` written over, a `< DIR` listed and read).
func handOver(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0
}

// ExecStdio gives a process run in a container (cove exec) our standard
// streams, in: stdin, stdout, stderr. Pipes and sockets are handed over
// as they are, anything else (a terminal, a file, a directory) through a
// pipe that is copied (see handOver); without interactive, a stdin that
// is a terminal (or another device) is /dev/null: the command did not
// ask for the keyboard.
// Call the returned function once the process has ended: it closes our
// ends and waits for the output to be copied.
func ExecStdio(in [3]*os.File, interactive bool) ([3]*os.File, func(), error) {
	var out [3]*os.File
	var closers []func()
	closeAll := func() {
		for _, f := range closers {
			f()
		}
	}
	for i, f := range in {
		if i == 0 && !interactive && !handOver(f) {
			if fi, err := f.Stat(); err == nil && fi.Mode()&fs.ModeCharDevice != 0 {
				null, err := os.Open(os.DevNull)
				if err != nil {
					closeAll()
					return out, func() {}, err
				}
				out[0] = null
				closers = append(closers, func() { null.Close() })
				continue
			}
		}
		if handOver(f) {
			out[i] = f
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			return out, func() {}, err
		}
		if i == 0 {
			out[i] = r
			go func() { io.Copy(w, f); w.Close() }()
			closers = append(closers, func() { r.Close() })
		} else {
			out[i] = w
			done := make(chan struct{})
			go func() { io.Copy(f, r); close(done) }()
			closers = append(closers, func() { w.Close(); <-done })
		}
	}
	return out, closeAll, nil
}
